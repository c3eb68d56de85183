//! The `store` scenario: one store, one writer at full speed or open loop, paced readers.
//!
//! Each backend runs in its own process (see `main.rs`) so heap and RSS figures are its own.
//! Phases, in order:
//! 1. **memory**: build the store from `objects` pods; measure heap (objects and structure
//!    separately), RSS; then a reader holds a full read while every pod is updated once, and the
//!    structure is measured again while held and after release.
//! 2. **saturation**: `updates` pod updates applied as fast as the writer can, in batches of up
//!    to 1000 (what a saturated queue hands over), with no readers, then again with the readers.
//! 3. **open loop**: updates *arrive* at `rate` per second on a fixed schedule whatever the writer
//!    does; the writer takes what has arrived (up to 1000 at a time) and applies it. Staleness is
//!    the time from an update's scheduled arrival to its visibility to readers; queue depth is
//!    arrived minus visible.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;

use crate::{
    backends::{BackendKind, SimReader, SimStore},
    pods::{self, NAMESPACE, Shape},
    stats::{Latency, Summary},
};

/// Largest batch the writer takes at once (client-go 1.35's batch limit).
pub const MAX_BATCH: usize = 1000;

/// Parameters of one run (all backends share them).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoreParams {
    /// Pods in the store.
    pub objects: usize,
    /// Nodes pods are spread over.
    pub nodes: usize,
    /// Reader threads.
    pub readers: usize,
    /// Length of the open-loop phase in seconds.
    pub duration_s: f64,
    /// Open-loop arrival rate in updates per second.
    pub rate: u64,
    /// Updates applied in each saturation phase.
    pub updates: usize,
    /// Whether the open-loop phase runs (`--rate 0` runs saturation only).
    pub open_loop: bool,
    /// How much of each pod is filled in.
    #[serde(default)]
    pub pod_profile: pods::PodProfile,
}

/// Bytes measured in the memory phase.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MemoryReport {
    /// Heap of the pods themselves.
    pub objects_bytes: u64,
    /// Average heap bytes per pod object (a `k8s_openapi` `Pod` in memory).
    pub bytes_per_object: u64,
    /// Average size of a pod as JSON, as it comes over the wire.
    pub json_bytes_per_object: u64,
    /// Heap of objects plus store structure after the build.
    pub total_bytes: u64,
    /// Structure bytes per entry beyond the objects, nobody holding an old version.
    pub structure_per_entry_idle: f64,
    /// Structure bytes per entry while a reader holds a full read taken before every pod was
    /// updated once (for a snapshot: the old version; for the baselines: the copied list).
    pub structure_per_entry_holding: f64,
    /// Structure bytes per entry after that reader let go.
    pub structure_per_entry_released: f64,
}

/// Everything measured for one backend.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct BackendReport {
    /// Backend name.
    pub name: String,
    /// Saturation throughput without readers (updates per second).
    pub apply_per_s: f64,
    /// Saturation throughput with the paced readers running.
    pub apply_per_s_with_readers: f64,
    /// Open-loop staleness (arrival to visibility), microseconds.
    pub staleness_us: Summary,
    /// Largest queue depth in the open loop.
    pub queue_depth_max: u64,
    /// Open-loop updates that were still queued when the phase ended (a backlog).
    pub queue_depth_end: u64,
    /// Full list latency, microseconds.
    pub list_us: Summary,
    /// Owner-UID index lookup of one owner's pods, microseconds.
    pub index_us: Summary,
    /// Namespace list with a label selector, microseconds.
    pub ns_list_us: Summary,
    /// Reader operations completed per second in the open-loop phase.
    pub reader_ops_per_s: f64,
    /// Peak heap in the memory phase (objects, structure, held reads).
    pub peak_heap_bytes: u64,
    /// Resident set size after the build.
    pub rss_bytes: u64,
    /// Memory phase details.
    pub memory: MemoryReport,
    /// `(seconds since open-loop start, queue depth)` samples.
    pub depth_series: Vec<(f64, u64)>,
    /// `(staleness us, cumulative fraction)` points.
    pub staleness_cdf: Vec<(u64, f64)>,
}

/// Where progress messages go (the worker writes them to stderr for the parent's progress bar).
pub type Progress<'a> = &'a dyn Fn(&str);

/// Heap counters (the simulator's global allocator).
pub trait HeapMeter {
    /// Bytes allocated now.
    fn current(&self) -> u64;
    /// Largest `current` since the process started (each backend runs in a fresh process and the
    /// memory phase comes first, so this is that phase's peak).
    fn peak(&self) -> u64;
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// Waits (at most 2 s) until the heap stops shrinking, so that versions a background reclaimer
/// has not dropped yet are not counted; a no-op wait for backends that drop inline.
fn settled(heap: &dyn HeapMeter) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut last = heap.current();
    loop {
        thread::sleep(Duration::from_millis(20));
        let now = heap.current();
        if now + now / 1000 >= last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

fn apply_all(store: &mut dyn SimStore, pool: Vec<Arc<Pod>>) {
    let mut pool: VecDeque<Arc<Pod>> = pool.into();
    while !pool.is_empty() {
        let n = pool.len().min(MAX_BATCH);
        store.apply(pool.drain(..n).collect(), &mut |_, _| {});
    }
}

/// Cores for the writer and the readers: with two or more cores, the writer gets the first and
/// the readers share the last, so that readers together use at most one core (the scenario's
/// rule) and the scheduler never puts a burst of readers on the writer's core. Same placement for
/// every backend. `None` where cores cannot be listed (then nothing is pinned).
pub(crate) fn placement() -> Option<(core_affinity::CoreId, core_affinity::CoreId)> {
    let cores = core_affinity::get_core_ids()?;
    if cores.len() < 2 {
        return None;
    }
    Some((cores[0], cores[cores.len() - 1]))
}

/// Runs every phase for one backend.
pub fn run_backend(
    kind: BackendKind,
    p: &StoreParams,
    heap: &dyn HeapMeter,
    progress: Progress<'_>,
) -> BackendReport {
    let shape = Shape::for_objects(p.objects, p.nodes).with_profile(p.pod_profile);
    let mut report = BackendReport { name: kind.name().to_string(), ..Default::default() };
    let mut next_rv = shape.total() as u64 + 1;

    // 1. Memory.
    progress("memory: generating pods");
    let h0 = heap.current();
    let initial = pods::initial_pods(&shape);
    let h1 = heap.current();
    let sample = initial.len().min(100);
    let json_bytes: u64 = initial[..sample]
        .iter()
        .map(|p| serde_json::to_vec(&**p).map(|v| v.len() as u64).unwrap_or(0))
        .sum();
    report.memory.json_bytes_per_object = json_bytes / sample.max(1) as u64;
    progress("memory: building the store");
    let mut store = kind.build();
    apply_all(store.as_mut(), initial);
    let h2 = settled(heap);
    report.rss_bytes = rss_bytes();
    let n = shape.total() as f64;
    let objects = h1.saturating_sub(h0);
    report.memory.objects_bytes = objects;
    report.memory.bytes_per_object = objects / shape.total() as u64;

    report.memory.total_bytes = h2.saturating_sub(h0);
    report.memory.structure_per_entry_idle = h2.saturating_sub(h1) as f64 / n;
    progress("memory: updating every pod while a reader holds an old read");
    let pool: Vec<Arc<Pod>> = (0..shape.total())
        .map(|i| Arc::new(pods::make_pod(&shape, i, next_rv + i as u64, (i + 1) % shape.nodes)))
        .collect();
    next_rv += shape.total() as u64;
    let h3 = heap.current();
    let pool_bytes = h3.saturating_sub(h2);
    let reader = store.reader();
    let held = reader.hold();
    apply_all(store.as_mut(), pool);
    let h4 = settled(heap);
    report.memory.structure_per_entry_holding =
        (h4 as f64 - h0 as f64 - objects as f64 - pool_bytes as f64) / n;
    drop(held);
    let h5 = settled(heap);
    report.memory.structure_per_entry_released = (h5 as f64 - h0 as f64 - pool_bytes as f64) / n;
    report.peak_heap_bytes = heap.peak().saturating_sub(h0);

    // 2. Saturation without and with readers. From here on the writer (this thread) has a core.
    let cores = placement();
    if let Some((writer_core, _)) = cores {
        core_affinity::set_for_current(writer_core);
    }
    let reader_core = cores.map(|(_, r)| r);
    progress("saturation: generating updates");
    let pool = pods::updates(&shape, p.updates, next_rv, 7);
    next_rv += p.updates as u64;
    progress("saturation: applying without readers");
    let t = Instant::now();
    apply_all(store.as_mut(), pool);
    report.apply_per_s = p.updates as f64 / t.elapsed().as_secs_f64();

    progress("saturation: generating updates");
    let pool = pods::updates(&shape, p.updates, next_rv, 11);
    next_rv += p.updates as u64;
    progress("saturation: applying with readers");
    let readers = Readers::start(&*reader, p.readers, &shape, reader_core);
    let t = Instant::now();
    apply_all(store.as_mut(), pool);
    report.apply_per_s_with_readers = p.updates as f64 / t.elapsed().as_secs_f64();
    let mut lat = readers.stop();

    // 3. Open loop with readers.
    if p.open_loop {
        let count = (p.rate as f64 * p.duration_s) as usize;
        progress(&format!("open loop: generating {count} updates"));
        let pool = pods::updates(&shape, count, next_rv, 13);
        progress(&format!(
            "open loop: {} updates/s for {:.0}s with {} readers",
            p.rate, p.duration_s, p.readers
        ));
        let readers = Readers::start(&*reader, p.readers, &shape, reader_core);
        let ol = open_loop(store.as_mut(), pool, p.rate);
        let rl = readers.stop();
        report.reader_ops_per_s = rl.ops as f64 / ol.elapsed_s;
        lat.merge(&rl);
        report.staleness_us = ol.staleness.summary();
        report.staleness_cdf = ol.staleness.cdf();
        report.queue_depth_max = ol.depth_max;
        report.queue_depth_end = ol.depth_end;
        report.depth_series = ol.series;
    }
    report.list_us = lat.list.summary();
    report.index_us = lat.index.summary();
    report.ns_list_us = lat.ns_list.summary();
    progress("done");
    drop(store);
    report
}

struct OpenLoop {
    staleness: Latency,
    depth_max: u64,
    depth_end: u64,
    series: Vec<(f64, u64)>,
    elapsed_s: f64,
}

/// Applies `pool` as it arrives at `rate` per second. Update `i` arrives at `start + i / rate`,
/// whether or not the writer kept up (open loop).
fn open_loop(store: &mut dyn SimStore, pool: Vec<Arc<Pod>>, rate: u64) -> OpenLoop {
    let total = pool.len();
    let mut pool: VecDeque<Arc<Pod>> = pool.into();
    let ns_per = 1e9 / rate as f64;
    let arrival =
        |start: Instant, i: usize| start + Duration::from_nanos((i as f64 * ns_per) as u64);
    let mut staleness = Latency::default();
    let (mut depth_max, mut series) = (0u64, Vec::new());
    let mut visible = 0usize;
    let mut last_sample = 0.0f64;
    let start = Instant::now();
    let end = arrival(start, total);
    while visible < total {
        let now = Instant::now();
        let arrived = ((now - start).as_nanos() as f64 / ns_per) as usize;
        let arrived = (arrived + 1).min(total); // update 0 arrives at `start`
        let depth = (arrived - visible) as u64;
        depth_max = depth_max.max(depth);
        let t = (now - start).as_secs_f64();
        if t - last_sample >= 0.05 {
            series.push((t, depth));
            last_sample = t;
        }
        if arrived == visible {
            let next = arrival(start, visible);
            if next > now {
                thread::sleep(next - now);
            }
            continue;
        }
        let n = (arrived - visible).min(MAX_BATCH);
        let first = visible;
        let mut recorded = 0;
        store.apply(pool.drain(..n).collect(), &mut |done, at| {
            for i in recorded..done {
                staleness.record(at.saturating_duration_since(arrival(start, first + i)));
            }
            recorded = done;
        });
        visible += n;
    }
    let elapsed = start.elapsed();
    let depth_end = {
        // Whatever had arrived by the scheduled end but was not yet visible then.
        let finished_late = Instant::now().saturating_duration_since(end);
        (finished_late.as_secs_f64() * rate as f64).min(total as f64) as u64
    };
    series.push((elapsed.as_secs_f64(), 0));
    OpenLoop { staleness, depth_max, depth_end, series, elapsed_s: elapsed.as_secs_f64() }
}

/// Reader latencies by operation.
#[derive(Default)]
pub(crate) struct ReaderLatency {
    pub(crate) list: Latency,
    pub(crate) index: Latency,
    pub(crate) ns_list: Latency,
    pub(crate) ops: u64,
}

impl ReaderLatency {
    fn merge(&mut self, o: &ReaderLatency) {
        self.list.merge(&o.list);
        self.index.merge(&o.index);
        self.ns_list.merge(&o.ns_list);
        self.ops += o.ops;
    }
}

pub(crate) struct Readers {
    stop: Arc<AtomicBool>,
    handles: Vec<thread::JoinHandle<ReaderLatency>>,
}

impl Readers {
    /// Starts `n` reader threads. Each repeats a namespace list with a label selector, a full list
    /// and an owner-UID lookup, and after each operation that took `d` sleeps `d * (n - 1)` (at
    /// least 1 ms), so that together they keep at most one core busy, whatever the backend; when
    /// `core` is given they are also pinned to it.
    pub(crate) fn start(
        reader: &dyn SimReader,
        n: usize,
        shape: &Shape,
        core: Option<core_affinity::CoreId>,
    ) -> Readers {
        let stop = Arc::new(AtomicBool::new(false));
        let barrier = Arc::new(Barrier::new(n + 1));
        let handles = (0..n)
            .map(|r| {
                let reader = reader.boxed_clone();
                let stop = stop.clone();
                let barrier = barrier.clone();
                let owners = shape.owners;
                thread::spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    let mut rng = pods::Rng::new(1000 + r as u64);
                    let mut lat = ReaderLatency::default();
                    barrier.wait();
                    let mut op = r;
                    while !stop.load(Ordering::Relaxed) {
                        let owner = rng.below(owners);
                        let t = Instant::now();
                        let got = match op % 3 {
                            0 => reader.list_namespace_selector(
                                NAMESPACE,
                                "app",
                                &format!("web-{owner}"),
                            ),
                            1 => reader.list_all(),
                            _ => reader.by_owner(&pods::owner_uid(owner)),
                        };
                        let d = t.elapsed();
                        std::hint::black_box(got);
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
                            thread::sleep((until - Instant::now()).min(Duration::from_millis(20)));
                        }
                    }
                    lat
                })
            })
            .collect();
        barrier.wait();
        Readers { stop, handles }
    }

    pub(crate) fn stop(self) -> ReaderLatency {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = ReaderLatency::default();
        for h in self.handles {
            all.merge(&h.join().expect("reader thread panicked"));
        }
        all
    }
}
