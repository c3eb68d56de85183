//! The paced readers of the `store` scenario (and the `informer` scenario).

use std::{
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use crate::{
    harness::{placement::pin, sched::ThreadSched, stats::Latency},
    pods::{self, NAMESPACE, Shape},
    rows::CacheReader,
};

/// Reader latencies by operation.
#[derive(Default)]
pub struct ReaderLatency {
    /// Full lists.
    pub list: Latency,
    /// Owner-UID lookups.
    pub index: Latency,
    /// Namespace lists with a label selector.
    pub ns_list: Latency,
    /// Operations completed.
    pub ops: u64,
    /// What the scheduler did to the reader threads together (`None` without `/proc`).
    pub sched: Option<ThreadSched>,
}

impl ReaderLatency {
    /// Adds `o`'s figures.
    pub fn merge(&mut self, o: &ReaderLatency) {
        self.list.merge(&o.list);
        self.index.merge(&o.index);
        self.ns_list.merge(&o.ns_list);
        self.ops += o.ops;
        self.sched = match (self.sched, o.sched) {
            (Some(a), Some(b)) => Some(ThreadSched {
                cpu_ns: a.cpu_ns + b.cpu_ns,
                wait_ns: a.wait_ns + b.wait_ns,
                voluntary: a.voluntary + b.voluntary,
                involuntary: a.involuntary + b.involuntary,
            }),
            (a, b) => a.or(b),
        };
    }
}

/// How long the readers run before a timed phase starts, by default: long enough for the burst
/// of their first operations, which all begin at the same instant, to be over (it lasted about
/// 300 ms at 200,000 pods on 2026-12-03, see BENCHMARKS.md), so that the phase meets them in
/// their paced steady state, as the readers of a running controller manager are.
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(2);

/// How the readers space their operations (`store --reader-rate`).
///
/// The two answer different questions. [`Pacing::Duty`] gives every row's readers the same
/// share of the CPU: a cache whose reads are slower, or whose readers wait on its lock, gets
/// fewer reads (on 2026-12-04 client-go's readers completed 6.2 operations a second against
/// our informer's 14.5), and readers that wait on a lock use no CPU while they wait, which
/// leaves the writer that holds it more. [`Pacing::Rate`] gives every row the same reads, as
/// the same controllers would make whatever cache they read: what each read costs then shows
/// as CPU the readers take from the writer.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pacing {
    /// After an operation that took `d`, a reader sleeps `d x (readers - 1)` (at least 1 ms):
    /// together they keep about one core busy, whatever the cache (`--reader-rate duty`, and
    /// what every run before 2026-12-05 measured, hence the default of reports that do not name
    /// their pacing; `store`'s own default is one read a second per reader).
    #[default]
    Duty,
    /// `per_s` operations a second, all readers together, each begun at its slot: reader `r`
    /// takes slots `r`, `r + n`, `r + 2n`, ... of a schedule with one slot every `1 / per_s`
    /// seconds. A reader behind its schedule starts its next operation at once, so a row that
    /// cannot keep up shows it as fewer operations a second than `per_s`.
    Rate {
        /// Operations a second, all readers together.
        per_s: f64,
    },
}

impl Pacing {
    /// `--reader-rate`: `None` or 0 is [`Pacing::Duty`].
    pub fn from_rate(per_s: Option<f64>) -> Pacing {
        match per_s {
            Some(per_s) if per_s > 0.0 => Pacing::Rate { per_s },
            _ => Pacing::Duty,
        }
    }

    /// The rate, for `--reader-rate` (`None` for duty pacing).
    pub fn rate(self) -> Option<f64> {
        match self {
            Pacing::Duty => None,
            Pacing::Rate { per_s } => Some(per_s),
        }
    }

    /// How the text report names it.
    pub fn describe(self) -> String {
        match self {
            Pacing::Duty => "paced to about one core".into(),
            Pacing::Rate { per_s } => format!("at {per_s} operations/s together"),
        }
    }
}

/// Running reader threads.
pub struct Readers {
    stop: Arc<AtomicBool>,
    handles: Vec<thread::JoinHandle<ReaderLatency>>,
}

impl Readers {
    /// Starts `n` reader threads. Each repeats a namespace list with a label selector, a full
    /// list and an owner-UID lookup, every result owned (copied `Arc`s of the row's own objects,
    /// as client-go copies pointers), spaced as `pacing` says: with [`Pacing::Duty`], after
    /// each operation that took `d` it sleeps `d * (n - 1)` (at least 1 ms), so that together
    /// they keep at most about one core busy, whatever the cache; with [`Pacing::Rate`], each
    /// operation begins at its slot. When `core` is given they are also pinned to it.
    ///
    /// The readers start together and return after `warmup`: only what they do after it is
    /// recorded (latencies, operations, their threads' CPU and wait), so the phase that
    /// follows sees them paced and out of step with each other, not in the burst of their
    /// first operations.
    pub fn start(
        reader: Arc<dyn CacheReader>,
        n: usize,
        shape: &Shape,
        core: Option<core_affinity::CoreId>,
        warmup: Duration,
        pacing: Pacing,
    ) -> Readers {
        let stop = Arc::new(AtomicBool::new(false));
        let barrier = Arc::new(Barrier::new(n + 1));
        let handles = (0..n)
            .map(|r| {
                let (reader, stop, barrier) = (reader.clone(), stop.clone(), barrier.clone());
                let owners = shape.owners;
                thread::Builder::new()
                    .name(format!("reader-{r}"))
                    .spawn(move || {
                        pin(core);
                        let mut rng = pods::Rng::new(1000 + r as u64);
                        let mut lat = ReaderLatency::default();
                        barrier.wait();
                        let began = Instant::now();
                        let measure_from = began + warmup;
                        // Rate pacing: this reader's next slot, and the time between its slots.
                        let (mut slot, every) = match pacing {
                            Pacing::Duty => (began, Duration::ZERO),
                            Pacing::Rate { per_s } => (
                                began + Duration::from_secs_f64(r as f64 / per_s),
                                Duration::from_secs_f64(n as f64 / per_s),
                            ),
                        };
                        // Set when the warm-up ends: the threads' figures count from there.
                        let mut sched_start: Option<Option<ThreadSched>> = None;
                        let mut start_measuring = |now: Instant| {
                            if sched_start.is_none() && now >= measure_from {
                                sched_start = Some(ThreadSched::now());
                            }
                        };
                        let mut op = r;
                        if let Pacing::Rate { .. } = pacing {
                            sleep_until(slot, &stop, &mut start_measuring);
                        }
                        while !stop.load(Ordering::Relaxed) {
                            let owner = rng.below(owners);
                            let t = Instant::now();
                            start_measuring(t);
                            let measured = t >= measure_from;
                            let got = match op % 3 {
                                0 => reader.list_namespace_selector_owned(
                                    NAMESPACE,
                                    "app",
                                    &format!("web-{owner}"),
                                ),
                                1 => reader.list_all_owned(),
                                _ => reader.by_owner_owned(&pods::owner_uid(owner)),
                            };
                            let d = t.elapsed();
                            drop(std::hint::black_box(got));
                            if measured {
                                match op % 3 {
                                    0 => lat.ns_list.record(d),
                                    1 => lat.list.record(d),
                                    _ => lat.index.record(d),
                                }
                                lat.ops += 1;
                            }
                            op += 1;
                            let until = match pacing {
                                Pacing::Duty => {
                                    Instant::now()
                                        + (d * (n as u32).saturating_sub(1))
                                            .max(Duration::from_millis(1))
                                }
                                Pacing::Rate { .. } => {
                                    slot += every;
                                    slot
                                }
                            };
                            sleep_until(until, &stop, &mut start_measuring);
                        }
                        lat.sched =
                            sched_start.flatten().and_then(|s| Some(ThreadSched::now()?.since(&s)));
                        lat
                    })
                    .expect("spawn a reader thread")
            })
            .collect();
        barrier.wait();
        thread::sleep(warmup);
        Readers { stop, handles }
    }

    /// Stops the readers and returns their latencies.
    pub fn stop(self) -> ReaderLatency {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = ReaderLatency::default();
        for h in self.handles {
            all.merge(&h.join().expect("reader thread panicked"));
        }
        all
    }
}

/// Sleeps until `until` (not at all when it has passed), waking at least every 20 ms to check
/// `stop` and to call `tick`.
fn sleep_until(until: Instant, stop: &AtomicBool, tick: &mut impl FnMut(Instant)) {
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= until {
            break;
        }
        thread::sleep((until - now).min(Duration::from_millis(20)));
        tick(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use std::{any::Any, sync::atomic::AtomicU64};

    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    /// A cache with no pods that counts the reads it serves, each taking at least the given
    /// time.
    #[derive(Default)]
    struct Counting(AtomicU64, Duration);

    impl Counting {
        fn slow(each: Duration) -> Counting {
            Counting(AtomicU64::new(0), each)
        }

        fn read(&self) -> Vec<Arc<Pod>> {
            self.0.fetch_add(1, Ordering::Relaxed);
            if !self.1.is_zero() {
                thread::sleep(self.1);
            }
            Vec::new()
        }
    }

    impl CacheReader for Counting {
        fn list_all(&self) -> Vec<Arc<Pod>> {
            self.read()
        }
        fn list_namespace_selector(&self, _: &str, _: &str, _: &str) -> Vec<Arc<Pod>> {
            self.read()
        }
        fn by_owner(&self, _: &str) -> Vec<Arc<Pod>> {
            self.read()
        }
        fn by_node(&self, _: &str) -> Vec<Arc<Pod>> {
            self.read()
        }
        fn get(&self, _: &str) -> Option<Arc<Pod>> {
            None
        }
        fn hold(&self) -> Box<dyn Any + Send> {
            Box::new(())
        }
    }

    #[test]
    fn readers_read_through_their_warm_up_and_record_only_what_follows_it() {
        let cache = Arc::new(Counting::default());
        let shape = Shape::for_objects(10, 2);
        let warmup = Duration::from_millis(300);
        let began = Instant::now();
        let readers = Readers::start(cache.clone(), 2, &shape, None, warmup, Pacing::Duty);
        assert!(began.elapsed() >= warmup, "start returns after the warm-up");
        let during = cache.0.load(Ordering::Relaxed);
        assert!(during > 0, "the readers read during the warm-up");
        thread::sleep(Duration::from_millis(100));
        let lat = readers.stop();
        let total = cache.0.load(Ordering::Relaxed);
        assert!(lat.ops > 0, "the readers' operations after the warm-up are recorded");
        // The warm-up's reads are not (the slack is for reads begun between its end and the
        // count above, should this thread be descheduled there).
        assert!(
            lat.ops + during / 2 <= total,
            "{} recorded of {total} reads, {during} of them by the warm-up's end",
            lat.ops
        );
        assert!(lat.sched.is_some(), "the readers' threads are measured from the warm-up's end");
    }

    /// Reads `cache` with four readers paced by `pacing` for about `for_`, and returns the
    /// operations recorded and how long the readers ran at most.
    fn ops(cache: Counting, pacing: Pacing, for_: Duration) -> (u64, Duration) {
        let shape = Shape::for_objects(10, 2);
        let began = Instant::now();
        let readers = Readers::start(Arc::new(cache), 4, &shape, None, Duration::ZERO, pacing);
        thread::sleep(for_);
        let ops = readers.stop().ops;
        (ops, began.elapsed())
    }

    #[test]
    fn rate_paced_readers_make_the_same_reads_of_a_slow_cache_as_of_a_fast_one() {
        // 200 operations a second for 600 ms: 120 slots. A read of the slow cache takes 4 ms,
        // so four duty-paced readers each sleep 12 ms after it and make far fewer reads than
        // of the fast one, after whose reads they sleep 1 ms.
        let pacing = Pacing::Rate { per_s: 200.0 };
        let span = Duration::from_millis(600);
        for (what, cache) in
            [("fast", Counting::default()), ("slow", Counting::slow(Duration::from_millis(4)))]
        {
            let (got, ran) = ops(cache, pacing, span);
            // Never ahead of the schedule: at most one read per slot the readers lived through,
            // and the four begun as they stopped; behind it only by what a loaded machine
            // delays four threads.
            let slots = (ran.as_secs_f64() * 200.0).ceil() as u64 + 1;
            assert!(got <= slots + 4, "{got} reads of the {what} cache in {slots} slots");
            assert!(got >= 60, "{got} reads of the {what} cache in 120 slots");
        }
        let (duty_fast, _) = ops(Counting::default(), Pacing::Duty, span);
        let (duty_slow, _) = ops(Counting::slow(Duration::from_millis(4)), Pacing::Duty, span);
        assert!(
            duty_slow * 2 < duty_fast,
            "duty pacing reads a slow cache less: {duty_slow} against {duty_fast}"
        );
    }

    #[test]
    fn pacing_follows_the_reader_rate_flag() {
        assert_eq!(Pacing::from_rate(None), Pacing::Duty);
        assert_eq!(Pacing::from_rate(Some(0.0)), Pacing::Duty);
        assert_eq!(Pacing::from_rate(Some(10.0)), Pacing::Rate { per_s: 10.0 });
        assert_eq!(Pacing::from_rate(Some(10.0)).rate(), Some(10.0));
        assert_eq!(Pacing::Duty.rate(), None);
    }
}
