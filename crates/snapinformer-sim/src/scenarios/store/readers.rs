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
    pub fn start(
        reader: Arc<dyn CacheReader>,
        n: usize,
        shape: &Shape,
        core: Option<core_affinity::CoreId>,
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
                        let sched_start = ThreadSched::now();
                        let mut op = r;
                        while !stop.load(Ordering::Relaxed) {
                            let owner = rng.below(owners);
                            let t = Instant::now();
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
                            match op % 3 {
                                0 => lat.ns_list.record(d),
                                1 => lat.list.record(d),
                                _ => lat.index.record(d),
                            }
                            lat.ops += 1;
                            op += 1;
                            let pause =
                                (d * (n as u32).saturating_sub(1)).max(Duration::from_millis(1));
                            let until = Instant::now() + pause;
                            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                                thread::sleep(
                                    (until - Instant::now()).min(Duration::from_millis(20)),
                                );
                            }
                        }
                        lat.sched = sched_start.and_then(|s| Some(ThreadSched::now()?.since(&s)));
                        lat
                    })
                    .expect("spawn a reader thread")
            })
            .collect();
        barrier.wait();
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
