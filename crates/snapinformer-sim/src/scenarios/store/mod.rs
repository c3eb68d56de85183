//! The `store` scenario: one cache, one writer at full speed or open loop, paced readers.
//!
//! Each row runs in its own worker process (clean heap and RSS; see [`rows`] for the row
//! registry and the worker protocol). Phases, in order:
//! 1. **memory**: build the cache from `objects` pods; measure heap (objects and structure
//!    separately); then a reader holds a full read while every pod is updated once, and the
//!    structure is measured again while held and after release.
//! 2. **read costs**: each read alone on one thread, no writer: owned results for every row (in
//!    the row's own object form: `Arc<CompactPod>` clones for `snapshot-compact`), and borrowed
//!    ones beside them where the cache can lend, with a borrowed scan of two hot fields of every
//!    pod; and the cost of the `Arc` clones an owned result makes, against copying plain
//!    pointers (what Go's lists do).
//! 3. **saturation**: `updates` pod updates applied as fast as the writer can, in batches of up
//!    to 1000 (what a saturated queue hands over), with no readers, then again with the readers.
//! 4. **open loop**: updates *arrive* at `rate` per second on a fixed schedule whatever the writer
//!    does; the writer takes what has arrived (up to 1000 at a time) and applies it. Staleness is
//!    the time from an update's scheduled arrival to its visibility to readers; queue depth is
//!    arrived minus visible.
//! 5. **sweep** (with `--sweep`): the open loop again at each offered rate, shorter
//!    ([`sweep`]).
//!
//! Heap and RSS are sampled every 100 ms through every phase ([`MemoryTrace`]); the update
//! pools the harness generates are part of the heap, the same for every row. Pools and the
//! initial population are generated in the form the row holds pods ([`CacheKind::objects`]:
//! compact pods for `snapshot-compact`), from the same pods and update plans for every row.
//!
//! Placement ([`Placement`]): unpinned by default, writer and readers anywhere; pinned puts the
//! writer on the first core and the readers on the last. The writer's priority
//! ([`WriterPriority`]) in the open loop and the sweep is normal by default; real-time takes the
//! machine's other load out of the staleness figures (a diagnostic). Either way the open loop
//! records where the writer's time went ([`open_loop::WriterTime`]): applying, sleeping for
//! arrivals, on a CPU, waiting for a core.

pub mod command;
pub mod open_loop;
pub mod readers;
pub mod report;
pub mod rows;
pub mod sweep;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;

use crate::{
    harness::{
        PhaseLog,
        heap::{HeapMeter, MemorySampler, MemoryTrace, settled},
        placement::{Placement, WriterPriority, pin},
        sched::ThreadSched,
        stats::Summary,
    },
    pods::{self, NAMESPACE, Shape},
    rows::{CacheKind, CacheReader, CacheWriter, Objects},
};
use readers::Readers;
use snapinformer_compact::CompactPod;
use sweep::SweepPoint;

/// Largest batch the writer takes at once (client-go 1.35's batch limit).
pub const MAX_BATCH: usize = 1000;

/// Parameters of one run (all rows share them).
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
    /// Where writer and readers run.
    #[serde(default)]
    pub placement: Placement,
    /// How the writer is scheduled in the open loop and the sweep.
    #[serde(default)]
    pub writer_priority: WriterPriority,
    /// Offered rates of the sweep (empty: no sweep).
    #[serde(default)]
    pub sweep: Vec<u64>,
    /// Length of each sweep point in seconds.
    #[serde(default)]
    pub sweep_duration_s: f64,
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

/// Each read alone, single-threaded, no writer: medians in microseconds (nanoseconds for the
/// per-object figures).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ReadCosts {
    /// Full list, owned `Arc`s.
    pub list_us: f64,
    /// Full list, borrowed (ours only).
    pub list_borrowed_us: Option<f64>,
    /// Namespace list with a label selector, owned.
    pub ns_list_us: f64,
    /// Namespace list with a label selector, borrowed (ours only).
    pub ns_list_borrowed_us: Option<f64>,
    /// Owner-UID lookup of one owner's pods, owned.
    pub owner_us: f64,
    /// Owner-UID lookup, borrowed (ours only).
    pub owner_borrowed_us: Option<f64>,
    /// A scan of every pod reading its node name and phase (how many pods of one node run),
    /// borrowed (ours only).
    #[serde(default)]
    pub hot_scan_borrowed_us: Option<f64>,
    /// Cloning (and later dropping) the `Arc` of each object of a full list: the atomic
    /// increment and decrement an owned read pays per object and Go's pointer copy does not,
    /// nanoseconds per object.
    pub arc_clone_ns_per_object: f64,
    /// Copying plain pointers to the same objects into a vector (what a Go list does),
    /// nanoseconds per object.
    pub pointer_copy_ns_per_object: f64,
}

/// Everything measured for one row.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct StoreRowReport {
    /// Row name.
    pub name: String,
    /// Saturation throughput without readers (updates per second).
    pub apply_per_s: f64,
    /// Saturation throughput with the paced readers running.
    pub apply_per_s_with_readers: f64,
    /// The writer thread's CPU time per update in saturation without readers, microseconds
    /// (unlike the rate, not lowered by waiting for a core on a busy machine).
    #[serde(default)]
    pub apply_cpu_us_per_update: Option<f64>,
    /// The same with the paced readers running.
    #[serde(default)]
    pub apply_cpu_us_per_update_with_readers: Option<f64>,
    /// Open-loop staleness (scheduled arrival to visibility), microseconds.
    pub staleness_us: Summary,
    /// Largest queue depth in the open loop.
    pub queue_depth_max: u64,
    /// Open-loop updates that were still queued when the phase ended (a backlog).
    pub queue_depth_end: u64,
    /// Full list latency with the writer running, microseconds.
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
    /// Heap and RSS through the whole run, sampled every 100 ms.
    #[serde(default)]
    pub memory_trace: MemoryTrace,
    /// Single-threaded read costs, owned and borrowed.
    #[serde(default)]
    pub read_costs: Option<ReadCosts>,
    /// The sweep of the offered rate (empty without `--sweep`).
    #[serde(default)]
    pub sweep: Vec<SweepPoint>,
    /// Where the open loop's writer and readers spent their time (our process's rows).
    #[serde(default)]
    pub open_loop_time: Option<open_loop::WriterTime>,
}

/// Waits until the heap is steady and returns it.
fn heap_now(heap: &dyn HeapMeter) -> u64 {
    settled(heap)
}

/// Applies `pool` as a saturated queue hands it over: batches of up to [`MAX_BATCH`].
fn apply_all(store: &mut dyn CacheWriter, pool: Objects) {
    let mut pool = pool.into_batches();
    while pool.remaining() > 0 {
        store.apply_objects(pool.take(MAX_BATCH), &mut |_, _| {});
    }
}

/// [`pods::updates`] in the form row `kind` holds pods: `count` updates of random pods (the
/// same plan for every row) with resource versions from `first_rv`.
pub fn updates(kind: CacheKind, shape: &Shape, count: usize, first_rv: u64, seed: u64) -> Objects {
    let plan = pods::update_plan(shape, count, seed);
    kind.objects(count, |u| pods::make_pod(shape, plan[u].0, first_rv + u as u64, plan[u].1))
}

/// The calling thread's CPU time since `since`, in microseconds per one of `count` items.
fn cpu_us_per(since: Option<ThreadSched>, count: usize) -> Option<f64> {
    let used = ThreadSched::now()?.since(&since?);
    Some(used.cpu().as_secs_f64() * 1e6 / count.max(1) as f64)
}

/// Runs every phase for one in-process row.
pub fn run_row(
    kind: CacheKind,
    p: &StoreParams,
    heap: &'static dyn HeapMeter,
    log: PhaseLog<'_>,
) -> StoreRowReport {
    let sampler = MemorySampler::start(heap, Duration::from_millis(100));
    let shape = Shape::for_objects(p.objects, p.nodes).with_profile(p.pod_profile);
    let mut report = StoreRowReport { name: kind.name().to_string(), ..Default::default() };
    let (mut store, mut next_rv) = memory_phase(kind, &shape, heap, log, &mut report);
    let reader = store.reader();

    log("read costs: each read alone, owned and borrowed");
    report.read_costs = Some(read_costs(&*reader, &shape));

    // From here on the writer is this thread; with the pinned placement it gets the first core.
    let cores = p.placement.cores();
    pin(cores.writer);
    log("saturation: generating updates");
    let pool = updates(kind, &shape, p.updates, next_rv, 7);
    next_rv += p.updates as u64;
    log("saturation: applying without readers");
    let sched = ThreadSched::now();
    let t = Instant::now();
    apply_all(store.as_mut(), pool);
    report.apply_per_s = p.updates as f64 / t.elapsed().as_secs_f64();
    report.apply_cpu_us_per_update = cpu_us_per(sched, p.updates);

    log("saturation: generating updates");
    let pool = updates(kind, &shape, p.updates, next_rv, 11);
    next_rv += p.updates as u64;
    log("saturation: applying with readers");
    let readers = Readers::start(reader.clone(), p.readers, &shape, cores.readers);
    let sched = ThreadSched::now();
    let t = Instant::now();
    apply_all(store.as_mut(), pool);
    report.apply_per_s_with_readers = p.updates as f64 / t.elapsed().as_secs_f64();
    report.apply_cpu_us_per_update_with_readers = cpu_us_per(sched, p.updates);
    let mut lat = readers.stop();

    if p.open_loop {
        let count = (p.rate as f64 * p.duration_s) as usize;
        log(&format!("open loop: generating {count} updates"));
        let pool = updates(kind, &shape, count, next_rv, 13);
        next_rv += count as u64;
        log(&format!(
            "open loop: {} updates/s for {:.0}s with {} readers",
            p.rate, p.duration_s, p.readers
        ));
        let readers = Readers::start(reader.clone(), p.readers, &shape, cores.readers);
        let priority = p.writer_priority.enter();
        let ol = open_loop::run(store.as_mut(), pool, p.rate);
        p.writer_priority.leave();
        let rl = readers.stop();
        report.reader_ops_per_s = rl.ops as f64 / ol.elapsed_s;
        lat.merge(&rl);
        report.staleness_us = ol.staleness.summary();
        report.staleness_cdf = ol.staleness.cdf();
        report.queue_depth_max = ol.depth_max;
        report.queue_depth_end = ol.depth_end;
        report.depth_series = ol.series;
        let mut time = ol.writer;
        time.readers_cpu_s = rl.sched.map(|s| s.cpu().as_secs_f64());
        time.readers_runqueue_wait_s = rl.sched.map(|s| s.wait().as_secs_f64());
        time.writer_priority = priority;
        report.open_loop_time = Some(time);
    }
    report.list_us = lat.list.summary();
    report.index_us = lat.index.summary();
    report.ns_list_us = lat.ns_list.summary();

    for (i, &rate) in p.sweep.iter().enumerate() {
        let load = sweep::Load {
            kind,
            shape: &shape,
            readers: p.readers,
            duration_s: p.sweep_duration_s,
            reader_core: cores.readers,
            writer_priority: p.writer_priority,
            seed: 100 + i as u64,
        };
        let point = sweep::point(store.as_mut(), &reader, &load, rate, next_rv, log);
        next_rv += point.updates;
        report.sweep.push(point);
    }
    log("done");
    drop(reader);
    drop(store);
    report.memory_trace = sampler.finish();
    report
}

/// Phase 1: builds the cache and measures its memory, idle and while a reader holds an old
/// read. Returns the cache and the next free resource version.
fn memory_phase(
    kind: CacheKind,
    shape: &Shape,
    heap: &dyn HeapMeter,
    log: PhaseLog<'_>,
    report: &mut StoreRowReport,
) -> (Box<dyn CacheWriter>, u64) {
    let mut next_rv = shape.total() as u64 + 1;
    log("memory: generating pods");
    let h0 = heap.current();
    let initial =
        kind.objects(shape.total(), |i| pods::make_pod(shape, i, i as u64 + 1, i % shape.nodes));
    let h1 = heap.current();
    let sample = initial.len().min(100);
    let json_bytes: u64 = (0..sample)
        .map(|i| {
            let pod = pods::make_pod(shape, i, i as u64 + 1, i % shape.nodes);
            serde_json::to_vec(&pod).map(|v| v.len() as u64).unwrap_or(0)
        })
        .sum();
    report.memory.json_bytes_per_object = json_bytes / sample.max(1) as u64;
    log("memory: building the store");
    let mut store = kind.build();
    apply_all(store.as_mut(), initial);
    let h2 = heap_now(heap);
    report.rss_bytes = crate::harness::heap::rss_bytes();
    let n = shape.total() as f64;
    let objects = h1.saturating_sub(h0);
    report.memory.objects_bytes = objects;
    report.memory.bytes_per_object = objects / shape.total() as u64;
    report.memory.total_bytes = h2.saturating_sub(h0);
    report.memory.structure_per_entry_idle = h2.saturating_sub(h1) as f64 / n;

    log("memory: updating every pod while a reader holds an old read");
    let pool = kind.objects(shape.total(), |i| {
        pods::make_pod(shape, i, next_rv + i as u64, (i + 1) % shape.nodes)
    });
    next_rv += shape.total() as u64;
    let h3 = heap.current();
    let pool_bytes = h3.saturating_sub(h2);
    let reader = store.reader();
    let held = reader.hold();
    apply_all(store.as_mut(), pool);
    let h4 = heap_now(heap);
    report.memory.structure_per_entry_holding =
        (h4 as f64 - h0 as f64 - objects as f64 - pool_bytes as f64) / n;
    drop(held);
    let h5 = heap_now(heap);
    report.memory.structure_per_entry_released = (h5 as f64 - h0 as f64 - pool_bytes as f64) / n;
    report.peak_heap_bytes = heap.peak().saturating_sub(h0);
    (store, next_rv)
}

/// The median of `runs` timings of `f`, in microseconds.
fn median_us(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Phase 2: each read alone on this thread, owned (in the row's own object form) and, where
/// the cache can, borrowed; the borrowed hot-field scan; and the cost of an `Arc` clone against
/// a pointer copy.
pub fn read_costs(reader: &dyn CacheReader, shape: &Shape) -> ReadCosts {
    let owner = pods::owner_uid(shape.owners / 2);
    let set = format!("web-{}", shape.owners / 2);
    let node = pods::node_name(shape.nodes / 2);
    let list_runs = (2_000_000 / shape.total().max(1)).clamp(5, 200);
    let mut c = ReadCosts {
        list_us: median_us(list_runs, || drop(std::hint::black_box(reader.list_all_owned()))),
        ns_list_us: median_us(list_runs, || {
            drop(std::hint::black_box(reader.list_namespace_selector_owned(NAMESPACE, "app", &set)))
        }),
        owner_us: median_us(200, || drop(std::hint::black_box(reader.by_owner_owned(&owner)))),
        ..ReadCosts::default()
    };
    if let Some(b) = reader.borrowed() {
        c.list_borrowed_us = Some(median_us(list_runs, || {
            std::hint::black_box(b.list_all_refs());
        }));
        c.ns_list_borrowed_us = Some(median_us(list_runs, || {
            std::hint::black_box(b.list_namespace_selector_refs(NAMESPACE, "app", &set));
        }));
        c.owner_borrowed_us = Some(median_us(200, || {
            std::hint::black_box(b.by_owner_refs(&owner));
        }));
        // Short and sensitive to whatever else runs: three times as many runs as the lists.
        c.hot_scan_borrowed_us = Some(median_us(3 * list_runs, || {
            std::hint::black_box(b.hot_scan_refs(&node));
        }));
    }
    let (clone_us, copy_us, n) = match reader.list_all_owned() {
        Objects::Pods(all) => (
            median_us(list_runs, || {
                let copy: Vec<Arc<Pod>> = all.to_vec();
                drop(std::hint::black_box(copy));
            }),
            median_us(list_runs, || {
                let copy: Vec<&Pod> = all.iter().map(|p| &**p).collect();
                drop(std::hint::black_box(copy));
            }),
            all.len(),
        ),
        Objects::Compact(all) => (
            median_us(list_runs, || {
                let copy: Vec<Arc<CompactPod>> = all.to_vec();
                drop(std::hint::black_box(copy));
            }),
            median_us(list_runs, || {
                let copy: Vec<&CompactPod> = all.iter().map(|p| &**p).collect();
                drop(std::hint::black_box(copy));
            }),
            all.len(),
        ),
    };
    let n = n.max(1) as f64;
    c.arc_clone_ns_per_object = clone_us * 1000.0 / n;
    c.pointer_copy_ns_per_object = copy_us * 1000.0 / n;
    c
}
