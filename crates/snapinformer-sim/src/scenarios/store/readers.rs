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

/// Running reader threads.
pub struct Readers {
    stop: Arc<AtomicBool>,
    handles: Vec<thread::JoinHandle<ReaderLatency>>,
}

impl Readers {
    /// Starts `n` reader threads. Each repeats a namespace list with a label selector, a full
    /// list and an owner-UID lookup, every result owned (copied `Arc`s of the row's own objects,
    /// as client-go copies pointers), and after each operation that took `d` sleeps `d * (n - 1)` (at least 1 ms),
    /// so that together they keep at most about one core busy, whatever the cache; when `core`
    /// is given they are also pinned to it.
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
                        let measure_from = Instant::now() + warmup;
                        // Set when the warm-up ends: the threads' figures count from there.
                        let mut sched_start: Option<Option<ThreadSched>> = None;
                        let mut start_measuring = |now: Instant| {
                            if sched_start.is_none() && now >= measure_from {
                                sched_start = Some(ThreadSched::now());
                            }
                        };
                        let mut op = r;
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
                            let pause =
                                (d * (n as u32).saturating_sub(1)).max(Duration::from_millis(1));
                            let until = Instant::now() + pause;
                            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                                thread::sleep(
                                    (until - Instant::now()).min(Duration::from_millis(20)),
                                );
                                start_measuring(Instant::now());
                            }
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

#[cfg(test)]
mod tests {
    use std::{any::Any, sync::atomic::AtomicU64};

    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    /// A cache with no pods that counts the reads it serves.
    #[derive(Default)]
    struct Counting(AtomicU64);

    impl Counting {
        fn read(&self) -> Vec<Arc<Pod>> {
            self.0.fetch_add(1, Ordering::Relaxed);
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
        let readers = Readers::start(cache.clone(), 2, &shape, None, warmup);
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
}
