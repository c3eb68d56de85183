//! The `store` scenario: one cache, one writer at full speed or open loop, paced readers.
//!
//! Each row runs in its own worker process (clean heap and RSS; see [`rows`] for the row
//! registry and the worker protocol). Rows come in two kinds, compared in pairs:
//! - **informer pipelines**: our `snapinformer` row ([`informer_row`]) against real client-go's
//!   `client-go` row (the Go worker in `baselines/client-go`): source, queue, batched apply,
//!   handler; an update is visible when the registered event handler receives it. The
//!   `snapinformer-compact` row is the same informer caching compact pods, outside the pairs
//!   (its readers get compact pods, client-go's typed ones);
//! - **stores alone**: `snapshot` and `snapshot-bg` against client-go's bare indexer,
//!   `client-go-indexer`, with our Rust baselines (`locked` and its variants, `kube-rs`) as
//!   controls; an update is visible when the store publishes it.
//!
//! Every row applies the same workload (byte-identical pods, the same update stream and
//! schedule) and reports a digest of it ([`pods::WorkloadDigest`]); the parent refuses a run
//! whose rows disagree. Phases, in order:
//! 1. **memory**: build the cache from `objects` pods; measure heap (objects and structure
//!    separately); then a reader holds a full read while every pod is updated once, and the
//!    structure is measured again while held and after release.
//! 2. **read costs**: each read alone on one thread, no writer: owned results for every row (in
//!    the row's own object form: `Arc<CompactPod>` clones for the compact rows), and borrowed
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
//! pools the harness generates are part of the heap, the same for every row. Pools and the initial population are generated in
//! the form the row holds pods ([`InProcessRow::objects`]: compact pods for `snapshot-compact`
//! and `snapinformer-compact`),
//! from the same pods and update plans for every row. Before each timed
//! phase the worker waits (untimed) until the heap stops shrinking, so that a background
//! reclaimer's leftovers from the previous phase do not run into it; the Go worker runs a
//! collection at the same points, for the same reason.
//!
//! Placement ([`Placement`]): unpinned by default, writer and readers anywhere; pinned puts the
//! writer on the first core and the readers on the last. The writer's priority
//! ([`WriterPriority`]) in the open loop and the sweep is normal by default; real-time takes the
//! machine's other load out of the staleness figures (a diagnostic). Either way the open loop
//! records where the writer's time went ([`open_loop::WriterTime`]): applying, sleeping for
//! arrivals, on a CPU, waiting for a core. Our process's rows also count the process's page
//! faults over the loop and its first two seconds ([`LoopFaults`]): major faults there would
//! be the program read back from disk after a benchmark script dropped the page cache.

pub mod command;
pub mod informer_row;
pub mod open_loop;
pub mod readers;
pub mod report;
pub mod rows;
pub mod source;
pub mod sweep;

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;

use crate::{
    harness::{
        PhaseLog,
        heap::{HeapMeter, MemorySampler, MemoryTrace, freed_at, settled},
        placement::{
            InformerHandler, InformerProcessing, Placement, ReclaimerPriority, WriterPriority, pin,
        },
        sched::{ProcessUsage, ThreadSched, ThreadsCpu, UsageAfter, process_cpu},
        stats::Summary,
    },
    pods::{self, NAMESPACE, Shape, WorkloadDigest},
    rows::{CacheKind, CacheReader, CacheWriter, Objects, client_go::GoRuntimeReport},
};
use open_loop::OpenLoop;
use readers::{Pacing, Readers};
use snapinformer_compact::CompactPod;
pub use source::{OpenLoopUpdates, Updates};
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
    /// How the rows' reclaimer threads are scheduled.
    #[serde(default)]
    pub reclaim_priority: ReclaimerPriority,
    /// Where the informer rows run their processing loop.
    #[serde(default)]
    pub informer_processing: InformerProcessing,
    /// Where the informer rows run their registered handler.
    #[serde(default)]
    pub informer_handler: InformerHandler,
    /// The informer rows' batch window in seconds (`None`: the informer's default; 0: none).
    #[serde(default)]
    pub informer_batch_window_s: Option<f64>,
    /// Offered rates of the sweep (empty: no sweep).
    #[serde(default)]
    pub sweep: Vec<u64>,
    /// Length of each sweep point in seconds.
    #[serde(default)]
    pub sweep_duration_s: f64,
    /// Seconds the parent waited before starting each row's worker, so that no row grows its
    /// heap on memory the previous row just freed (`--rest`; 0 in reports from before it).
    #[serde(default)]
    pub rest_s: f64,
    /// Seconds the readers ran before each phase with readers, unrecorded, so that the phase
    /// meets them paced rather than in the burst of their first operations (`--reader-warmup`;
    /// 0 in reports from before it).
    #[serde(default)]
    pub reader_warmup_s: f64,
    /// How the readers space their operations (`--reader-rate`, by default one read a second
    /// per reader; duty pacing in reports from before the flag existed).
    #[serde(default)]
    pub reader_pacing: Pacing,
    /// How the open loop and the sweep get their updates: built at their slots (the default)
    /// or from a pool built before the phase (`--open-loop-updates`; `prebuilt` in reports from
    /// before it existed).
    #[serde(default = "OpenLoopUpdates::before_the_field")]
    pub open_loop_updates: OpenLoopUpdates,
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
    /// For rows whose pods are built in arenas: the arena slots' bytes per pod (whole pages),
    /// where `bytes_per_object` counts what the pods asked for; absent for the others.
    #[serde(default)]
    pub arena_slot_bytes_per_object: Option<u64>,
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
    /// nanoseconds per object (`None` for the Go rows, which have no `Arc`).
    #[serde(default)]
    pub arc_clone_ns_per_object: Option<f64>,
    /// Copying plain pointers to the same objects into a new vector (what a Go list does; the Go
    /// rows measure Go's own copy of `[]*v1.Pod`), nanoseconds per object.
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
    /// Saturation without readers, freeing counted: the phase's updates over the time from its
    /// start until what it replaced was freed (the Rust rows: until the heap stops shrinking,
    /// polled every 10 ms; the Go rows: until the full collection after the phase returns). A
    /// phase replays pods generated before it, so a Go row's phase allocates too little to start
    /// a collection and [`apply_per_s`](Self::apply_per_s) leaves its freeing out, where a Rust
    /// row's reclaimer frees during the phase: this figure counts both.
    #[serde(default)]
    pub apply_freed_per_s: Option<f64>,
    /// The same with the paced readers running: the freeing starts as the phase ends, while the
    /// readers finish their last reads, and the time runs until both are done.
    #[serde(default)]
    pub apply_freed_per_s_with_readers: Option<f64>,
    /// The writer thread's CPU time per update in saturation without readers, microseconds
    /// (unlike the rate, not lowered by waiting for a core on a busy machine). `None` for the
    /// informer rows, whose writer is a thread of the pipeline (see the two fields below).
    #[serde(default)]
    pub apply_cpu_us_per_update: Option<f64>,
    /// The whole process's CPU time per update in saturation without readers, microseconds:
    /// every thread that did the phase's work (writer or processing loop, source, handler,
    /// reclaimer; for the Go rows every goroutine and the garbage collector's work in the
    /// phase). The cost of an update, like against like, whatever the machine's other load
    /// did to the wall time.
    #[serde(default)]
    pub apply_process_cpu_us_per_update: Option<f64>,
    /// The whole process's CPU time per update of that phase spent after it, until the garbage
    /// it left (the pods it replaced) was reclaimed, microseconds: a background reclaimer's
    /// leftovers (until the heap stops shrinking) for the Rust rows, one full garbage
    /// collection for the Go rows, whose phase allocates too little to start one (in a
    /// cluster, where each update decodes a new pod, one cycle runs per live heap's worth of
    /// updates at `GOGC=100`, about a phase's worth here).
    #[serde(default)]
    pub apply_reclaim_cpu_us_per_update: Option<f64>,
    /// The kernel's part of the two figures above (the phase and its reclamation together),
    /// microseconds per update: mostly page faults on memory the process touches for the first
    /// time, which on a virtual machine whose host takes freed memory back costs far more than
    /// on warm memory (`/proc/self/stat`'s system time for the Rust rows, `getrusage`'s for Go).
    #[serde(default)]
    pub apply_kernel_cpu_us_per_update: Option<f64>,
    /// The phase's and its reclamation's CPU split by thread group (a thread's name without its
    /// number, truncated by the kernel to 15 bytes; the Go rows: the garbage collector and the
    /// rest); threads that exited meanwhile are only in the process totals.
    #[serde(default)]
    pub apply_thread_cpu_us_per_update: BTreeMap<String, f64>,
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
    /// Digest of every pod the row applied, phase by phase ([`WorkloadDigest`]): the same for
    /// every row of a run that got the same workload. Empty in reports from before it existed.
    #[serde(default)]
    pub workload_digest: String,
    /// Go rows only: the Go runtime's view of memory and collection, and the row's
    /// configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_runtime: Option<GoRuntimeReport>,
    /// How the row maps the scenario onto what it measures, and its own counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Where the open loop's writer and readers spent their time (our process's rows).
    #[serde(default)]
    pub open_loop_time: Option<open_loop::WriterTime>,
    /// Wall time of building one open-loop update at its slot (the stand-in for decoding),
    /// microseconds; `None` when the updates came from a pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop_build_us_per_update: Option<f64>,
    /// The informer rows: their open-loop staleness split at the pipeline's inner points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop_stages: Option<open_loop::PipelineStages>,
    /// Our process's rows: CPU time and run-queue wait of each thread group over the open
    /// loop (grouped as in `apply_thread_cpu_us_per_update`), seconds. A staleness tail with
    /// long waits on the pipeline's threads is the scheduler's, not the cache's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub open_loop_threads: BTreeMap<String, ThreadTime>,
    /// Our process's rows: the whole process's page faults over the open loop, and over its
    /// first seconds apart (`None` for the Go rows and without `/proc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop_faults: Option<LoopFaults>,
    /// How fast the machine was just before the row's worker started, measured in the parent
    /// with the same fixed work for every row (`None` in reports written before 2026-12-08,
    /// and for a worker run on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_speed: Option<crate::harness::speed::MachineSpeed>,
}

/// The whole process's page faults around the open loop (`/proc/self/stat`). Major faults wait
/// for the disk (the executable's pages after the page cache was dropped); minor faults are
/// first touches of memory, which this machine charges for. A stall at the loop's start that
/// comes with either shows in [`first_s`](Self::first_s)'s counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopFaults {
    /// Major faults from the worker process's start to the loop's start.
    pub major_before: u64,
    /// The length of the loop's first part counted apart, seconds.
    pub first_s: u64,
    /// Minor faults in the loop's first `first_s` seconds (`None` when the loop was shorter).
    pub minor_first: Option<u64>,
    /// Major faults in the loop's first `first_s` seconds (`None` when the loop was shorter).
    pub major_first: Option<u64>,
    /// Minor faults over the whole loop.
    pub minor: u64,
    /// Major faults over the whole loop.
    pub major: u64,
}

impl LoopFaults {
    /// How long the loop's first part counted apart lasts: the stalls seen at a loop's start
    /// (2026-12-07) were over within two seconds.
    pub const FIRST: Duration = Duration::from_secs(2);

    /// The counts from readings at the loop's start, `FIRST` into it and at its end.
    pub fn between(
        start: &ProcessUsage,
        first: Option<&ProcessUsage>,
        end: &ProcessUsage,
    ) -> LoopFaults {
        LoopFaults {
            major_before: start.major_faults,
            first_s: Self::FIRST.as_secs(),
            minor_first: first.map(|f| f.minor_faults_since(start)),
            major_first: first.map(|f| f.major_faults_since(start)),
            minor: end.minor_faults_since(start),
            major: end.major_faults_since(start),
        }
    }
}

/// One thread group's time over a phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ThreadTime {
    /// CPU time, seconds.
    pub cpu_s: f64,
    /// Runnable but waiting for a core, seconds.
    pub wait_s: f64,
}

/// How the phases drive a row: a cache alone ([`CacheDriver`]) or our whole informer pipeline
/// ([`informer_row::InformerRow`]).
pub trait RowDriver {
    /// Fills the row with the initial pods and returns once they are visible.
    fn build(&mut self, initial: Objects) -> Result<(), String>;
    /// Applies `pool` as fast as the row takes it (a saturated source) and returns once every
    /// update is visible.
    fn apply_all(&mut self, pool: Objects) -> Result<(), String>;
    /// Lets `updates` arrive at `rate` per second whatever the row does (open loop) and returns
    /// once the last update is visible.
    fn open_loop(&mut self, updates: Updates, rate: u64) -> Result<OpenLoop, String>;
    /// A read handle, shared by any number of threads.
    fn reader(&self) -> Arc<dyn CacheReader>;
    /// Stops the row; returns its notes for the report.
    fn finish(self: Box<Self>) -> Vec<String>;
}

/// A cache alone, written by the calling thread in batches of up to [`MAX_BATCH`].
pub struct CacheDriver(Box<dyn CacheWriter>);

impl CacheDriver {
    /// An empty cache of this kind, its reclaimer (if it has one) at `reclaim`.
    pub fn new(kind: CacheKind, reclaim: ReclaimerPriority) -> Self {
        CacheDriver(kind.build_with(reclaim.store()))
    }
}

impl RowDriver for CacheDriver {
    fn build(&mut self, initial: Objects) -> Result<(), String> {
        apply_all(self.0.as_mut(), initial);
        Ok(())
    }
    fn apply_all(&mut self, pool: Objects) -> Result<(), String> {
        apply_all(self.0.as_mut(), pool);
        Ok(())
    }
    fn open_loop(&mut self, updates: Updates, rate: u64) -> Result<OpenLoop, String> {
        Ok(open_loop::run(self.0.as_mut(), updates, rate))
    }
    fn reader(&self) -> Arc<dyn CacheReader> {
        self.0.reader()
    }
    fn finish(self: Box<Self>) -> Vec<String> {
        Vec::new()
    }
}

/// An in-process row: a cache alone or our informer pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InProcessRow {
    /// One of the caches of [`crate::rows`].
    Cache(CacheKind),
    /// The `snapinformer` row ([`informer_row`]).
    Informer,
    /// The `snapinformer-compact` row: the same informer caching compact pods.
    InformerCompact,
    /// The `snapinformer-arena` row: the same informer caching the same `k8s_openapi` pods,
    /// each built in an arena of its own ([`snapinformer_arena`]).
    InformerArena,
    /// The `snapinformer-covering` row: the same informer with a covering owner-UID index (a
    /// control).
    InformerCovering,
}

impl InProcessRow {
    /// Report name.
    pub fn name(self) -> &'static str {
        match self {
            InProcessRow::Cache(kind) => kind.name(),
            InProcessRow::Informer => informer_row::NAME,
            InProcessRow::InformerCompact => informer_row::COMPACT_NAME,
            InProcessRow::InformerArena => informer_row::ARENA_NAME,
            InProcessRow::InformerCovering => informer_row::COVERING_NAME,
        }
    }

    /// Whether the row is one of our whole informers (its writer is the informer's processing
    /// task, not the scenario's thread).
    pub fn is_informer(self) -> bool {
        matches!(
            self,
            InProcessRow::Informer
                | InProcessRow::InformerCompact
                | InProcessRow::InformerArena
                | InProcessRow::InformerCovering
        )
    }

    /// The row named `name`, if this executable runs it.
    pub fn parse(name: &str) -> Option<Self> {
        if name == informer_row::NAME {
            return Some(InProcessRow::Informer);
        }
        if name == informer_row::COMPACT_NAME {
            return Some(InProcessRow::InformerCompact);
        }
        if name == informer_row::ARENA_NAME {
            return Some(InProcessRow::InformerArena);
        }
        if name == informer_row::COVERING_NAME {
            return Some(InProcessRow::InformerCovering);
        }
        CacheKind::parse(name).map(InProcessRow::Cache)
    }

    /// `count` pods `make(i)` in the form this row holds them ([`CacheKind::objects`]; the
    /// informer row takes `k8s_openapi` pods).
    pub fn objects(self, count: usize, make: impl Fn(usize) -> Pod + Sync) -> Objects {
        match self {
            InProcessRow::Cache(kind) => kind.objects(count, make),
            InProcessRow::Informer | InProcessRow::InformerCovering => {
                Objects::Pods(pods::generate(count, make))
            }
            InProcessRow::InformerArena => Objects::Pods(pods::generate_in_arenas(count, make)),
            InProcessRow::InformerCompact => {
                Objects::Compact(crate::rows::compact::generate(count, &make))
            }
        }
    }

    fn start(self, p: &StoreParams) -> Result<Box<dyn RowDriver>, String> {
        let reclaim = p.reclaim_priority;
        Ok(match self {
            InProcessRow::Cache(kind) => Box::new(CacheDriver::new(kind, reclaim)),
            InProcessRow::Informer
            | InProcessRow::InformerArena
            | InProcessRow::InformerCovering => Box::new(informer_row::InformerRow::<Pod>::start(
                self.name(),
                p.placement.cores(),
                reclaim,
                p.informer_processing,
                p.informer_handler,
                p.informer_batch_window_s.map(Duration::from_secs_f64),
                self == InProcessRow::InformerCovering,
                p.writer_priority,
            )?),
            InProcessRow::InformerCompact => {
                Box::new(informer_row::InformerRow::<CompactPod>::start(
                    informer_row::COMPACT_NAME,
                    p.placement.cores(),
                    reclaim,
                    p.informer_processing,
                    p.informer_handler,
                    p.informer_batch_window_s.map(Duration::from_secs_f64),
                    false,
                    p.writer_priority,
                )?)
            }
        })
    }
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

/// [`pods::updates`] in the form `row` holds pods: `count` updates of random pods (the same
/// plan for every row) with resource versions from `first_rv`.
pub fn updates(
    row: InProcessRow,
    shape: &Shape,
    count: usize,
    first_rv: u64,
    seed: u64,
) -> Objects {
    let plan = pods::update_plan(shape, count, seed);
    row.objects(count, |u| pods::make_pod(shape, plan[u].0, first_rv + u as u64, plan[u].1))
}

/// [`updates`] for a phase of a run: waits first for the garbage of the phase before to be
/// freed ([`settled`]), since a reclaimer at idle priority gets no CPU while the generator
/// threads run, and the new pool and the old garbage together could exceed the machine's
/// memory.
pub fn phase_updates(
    row: InProcessRow,
    shape: &Shape,
    count: usize,
    first_rv: u64,
    seed: u64,
    heap: &dyn HeapMeter,
) -> Objects {
    settled(heap);
    updates(row, shape, count, first_rv, seed)
}

/// The updates of an open-loop phase (the open loop, a sweep point) as `mode` hands them over:
/// [`phase_updates`] in a pool, or a plan built at each update's slot (after waiting, as
/// [`phase_updates`] does, for the phase before to be freed).
pub fn open_loop_updates(
    row: InProcessRow,
    shape: &Shape,
    count: usize,
    first_rv: u64,
    seed: u64,
    mode: OpenLoopUpdates,
    heap: &dyn HeapMeter,
) -> Updates {
    match mode {
        OpenLoopUpdates::Prebuilt => {
            Updates::prebuilt(phase_updates(row, shape, count, first_rv, seed, heap))
        }
        OpenLoopUpdates::AtSlot => {
            settled(heap);
            Updates::at_slot(row, shape, count, first_rv, seed)
        }
    }
}

/// Adds the pods of one phase to `digest`, in either form: a compact pod adds exactly what the
/// `k8s_openapi` pod it was decoded from adds.
pub fn add_to_digest(digest: &mut WorkloadDigest, phase: &str, pool: &Objects) {
    match pool {
        Objects::Pods(pods) => digest.add(phase, pods),
        Objects::Compact(pods) => {
            for p in pods {
                digest.add_fields(
                    phase,
                    p.namespace().unwrap_or_default(),
                    p.name().unwrap_or_default(),
                    p.resource_version().unwrap_or_default(),
                    p.node_name().unwrap_or_default(),
                );
            }
        }
    }
}

/// `count` items over `elapsed`, per second.
fn rate(count: usize, elapsed: Duration) -> Option<f64> {
    (count > 0 && !elapsed.is_zero()).then(|| count as f64 / elapsed.as_secs_f64())
}

/// The calling thread's CPU time since `since`, in microseconds per one of `count` items.
fn cpu_us_per(since: Option<ThreadSched>, count: usize) -> Option<f64> {
    let used = ThreadSched::now()?.since(&since?);
    Some(used.cpu().as_secs_f64() * 1e6 / count.max(1) as f64)
}

/// Runs every phase for one in-process row.
pub fn run_row(
    row: InProcessRow,
    p: &StoreParams,
    heap: &'static dyn HeapMeter,
    log: PhaseLog<'_>,
) -> Result<StoreRowReport, String> {
    let sampler = MemorySampler::start(heap, Duration::from_millis(100));
    let shape = Shape::for_objects(p.objects, p.nodes).with_profile(p.pod_profile);
    let mut report = StoreRowReport { name: row.name().to_string(), ..Default::default() };
    let mut digest = WorkloadDigest::default();
    // The row exists before the first measurement (an empty cache, or the informer with its
    // runtime and handler thread), as the Go rows create theirs.
    let mut driver = row.start(p)?;
    let mut next_rv =
        memory_phase(row, driver.as_mut(), &shape, heap, log, &mut report, &mut digest)?;
    let reader = driver.reader();

    log("read costs: each read alone, owned and borrowed");
    report.read_costs = Some(read_costs(&*reader, &shape));

    // From here on the writer is this thread (for the informer row: the source feeding it);
    // with the pinned placement it gets the first core.
    let cores = p.placement.cores();
    pin(cores.writer);
    log("saturation: generating updates");
    let pool = phase_updates(row, &shape, p.updates, next_rv, 7, heap);
    add_to_digest(&mut digest, "saturation", &pool);
    next_rv += p.updates as u64;
    log("saturation: applying without readers");
    settled(heap);
    let (sched, usage, threads) = (ThreadSched::now(), ProcessUsage::now(), ThreadsCpu::now());
    let process = usage.map(|u| u.cpu());
    let t = Instant::now();
    driver.apply_all(pool)?;
    report.apply_per_s = p.updates as f64 / t.elapsed().as_secs_f64();
    let per_update = |d: Duration| d.as_secs_f64() * 1e6 / p.updates.max(1) as f64;
    if !row.is_informer() {
        report.apply_cpu_us_per_update = cpu_us_per(sched, p.updates);
    }
    let applied = process_cpu();
    // The phase left garbage (the pods it replaced) to a reclaimer or, in Go, to the next
    // collection: its cost is the CPU spent until the heap stops shrinking.
    report.apply_freed_per_s = rate(p.updates, freed_at(heap).duration_since(t));
    let reclaimed_usage = ProcessUsage::now();
    let reclaimed = reclaimed_usage.map(|u| u.cpu());
    if let (Some(before), Some(after)) = (usage, reclaimed_usage) {
        report.apply_kernel_cpu_us_per_update = Some(per_update(after.system_since(&before)));
    }
    if let (Some(before), Some(applied), Some(reclaimed)) = (process, applied, reclaimed) {
        report.apply_process_cpu_us_per_update = Some(per_update(applied.saturating_sub(before)));
        report.apply_reclaim_cpu_us_per_update =
            Some(per_update(reclaimed.saturating_sub(applied)));
    }
    if let (Some(before), Some(after)) = (threads, ThreadsCpu::now()) {
        report.apply_thread_cpu_us_per_update =
            after.since(&before).into_iter().map(|(group, cpu)| (group, per_update(cpu))).collect();
    }

    log("saturation: generating updates");
    let pool = phase_updates(row, &shape, p.updates, next_rv, 11, heap);
    add_to_digest(&mut digest, "saturation-readers", &pool);
    next_rv += p.updates as u64;
    log("saturation: applying with readers");
    settled(heap);
    let warmup = Duration::from_secs_f64(p.reader_warmup_s);
    let readers =
        Readers::start(reader.clone(), p.readers, &shape, cores.readers, warmup, p.reader_pacing);
    let sched = ThreadSched::now();
    let t = Instant::now();
    let applied = driver.apply_all(pool);
    report.apply_per_s_with_readers = p.updates as f64 / t.elapsed().as_secs_f64();
    if !row.is_informer() {
        report.apply_cpu_us_per_update_with_readers = cpu_us_per(sched, p.updates);
    }
    let mut lat = readers.stop();
    applied?;
    // The reclaimers went on freeing while the readers finished; the heap is watched once they
    // have (their lists come and go in it).
    report.apply_freed_per_s_with_readers = rate(p.updates, freed_at(heap).duration_since(t));

    if p.open_loop {
        let count = (p.rate as f64 * p.duration_s) as usize;
        let mode = p.open_loop_updates;
        log(&match mode {
            OpenLoopUpdates::Prebuilt => format!("open loop: generating {count} updates"),
            OpenLoopUpdates::AtSlot => format!("open loop: planning {count} updates"),
        });
        let pool = open_loop_updates(row, &shape, count, next_rv, 13, mode, heap);
        pool.add_to_digest(&mut digest, "open-loop");
        next_rv += count as u64;
        log(&format!(
            "open loop: {} updates/s for {:.0}s with {} readers",
            p.rate, p.duration_s, p.readers
        ));
        settled(heap);
        let readers = Readers::start(
            reader.clone(),
            p.readers,
            &shape,
            cores.readers,
            warmup,
            p.reader_pacing,
        );
        let threads = ThreadsCpu::now();
        let usage = ProcessUsage::now();
        let first = UsageAfter::start(LoopFaults::FIRST)
            .map_err(|e| format!("start the page-fault reader: {e}"))?;
        let priority = p.writer_priority.enter();
        let ol = driver.open_loop(pool, p.rate);
        p.writer_priority.leave();
        let (first, usage_end) = (first.finish(), ProcessUsage::now());
        let mut times = match (threads, ThreadsCpu::now()) {
            (Some(before), Some(after)) => after.times_since(&before),
            _ => BTreeMap::new(),
        };
        if let (Some(start), Some(end)) = (usage, usage_end) {
            report.open_loop_faults = Some(LoopFaults::between(&start, first.as_ref(), &end));
        }
        let rl = readers.stop();
        let ol = ol?;
        for (group, t) in &ol.exited_threads {
            let sum = times.entry(group.clone()).or_default();
            sum.cpu += t.cpu;
            sum.wait += t.wait;
        }
        report.open_loop_threads = times
            .into_iter()
            .map(|(group, t)| {
                (group, ThreadTime { cpu_s: t.cpu.as_secs_f64(), wait_s: t.wait.as_secs_f64() })
            })
            .collect();
        report.open_loop_stages = ol.stages;
        report.open_loop_build_us_per_update = ol.build_us_per_update;
        report.reader_ops_per_s = rl.ops as f64 / ol.elapsed_s.max(1e-9);
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
        // Rows whose writer is not this thread (the informer row) record none.
        report.open_loop_time = (time.batches > 0).then_some(time);
    }
    report.list_us = lat.list.summary();
    report.index_us = lat.index.summary();
    report.ns_list_us = lat.ns_list.summary();

    for (i, &rate) in p.sweep.iter().enumerate() {
        let load = sweep::Load {
            row,
            shape: &shape,
            readers: p.readers,
            duration_s: p.sweep_duration_s,
            reader_core: cores.readers,
            reader_warmup: warmup,
            reader_pacing: p.reader_pacing,
            writer_priority: p.writer_priority,
            seed: 100 + i as u64,
            heap,
            updates: p.open_loop_updates,
        };
        let point = sweep::point(driver.as_mut(), &reader, &load, rate, next_rv, &mut digest, log)?;
        next_rv += point.updates;
        report.sweep.push(point);
    }
    report.workload_digest = digest.hex();
    log("done");
    drop(reader);
    report.notes = driver.finish();
    report.memory_trace = sampler.finish();
    Ok(report)
}

/// Phase 1: builds the row and measures its memory, idle and while a reader holds an old
/// read. Returns the next free resource version.
fn memory_phase(
    row: InProcessRow,
    driver: &mut dyn RowDriver,
    shape: &Shape,
    heap: &dyn HeapMeter,
    log: PhaseLog<'_>,
    report: &mut StoreRowReport,
    digest: &mut WorkloadDigest,
) -> Result<u64, String> {
    let mut next_rv = shape.total() as u64 + 1;
    log("memory: generating pods");
    let h0 = heap_now(heap);
    let slots0 = snapinformer_arena::stats().slot_bytes;
    let initial =
        row.objects(shape.total(), |i| pods::make_pod(shape, i, i as u64 + 1, i % shape.nodes));
    let h1 = heap.current();
    let slot_bytes = snapinformer_arena::stats().slot_bytes.saturating_sub(slots0);
    report.memory.arena_slot_bytes_per_object =
        (slot_bytes > 0).then(|| slot_bytes / shape.total() as u64);
    add_to_digest(digest, "initial", &initial);
    let sample = initial.len().min(100);
    let json_bytes: u64 = (0..sample)
        .map(|i| {
            let pod = pods::make_pod(shape, i, i as u64 + 1, i % shape.nodes);
            serde_json::to_vec(&pod).map(|v| v.len() as u64).unwrap_or(0)
        })
        .sum();
    report.memory.json_bytes_per_object = json_bytes / sample.max(1) as u64;
    log("memory: building the store");
    driver.build(initial)?;
    let h2 = heap_now(heap);
    report.rss_bytes = crate::harness::heap::rss_bytes();
    let n = shape.total() as f64;
    let objects = h1.saturating_sub(h0);
    report.memory.objects_bytes = objects;
    report.memory.bytes_per_object = objects / shape.total() as u64;
    report.memory.total_bytes = h2.saturating_sub(h0);
    report.memory.structure_per_entry_idle = h2.saturating_sub(h1) as f64 / n;

    log("memory: updating every pod while a reader holds an old read");
    let pool = row.objects(shape.total(), |i| {
        pods::make_pod(shape, i, next_rv + i as u64, (i + 1) % shape.nodes)
    });
    add_to_digest(digest, "memory", &pool);
    next_rv += shape.total() as u64;
    let h3 = heap.current();
    let pool_bytes = h3.saturating_sub(h2);
    let reader = driver.reader();
    let held = reader.hold();
    driver.apply_all(pool)?;
    let h4 = heap_now(heap);
    report.memory.structure_per_entry_holding =
        (h4 as f64 - h0 as f64 - objects as f64 - pool_bytes as f64) / n;
    drop(held);
    let h5 = heap_now(heap);
    report.memory.structure_per_entry_released = (h5 as f64 - h0 as f64 - pool_bytes as f64) / n;
    report.peak_heap_bytes = heap.peak().saturating_sub(h0);
    Ok(next_rv)
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
    c.arc_clone_ns_per_object = Some(clone_us * 1000.0 / n);
    c.pointer_copy_ns_per_object = copy_us * 1000.0 / n;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(minor_faults: u64, major_faults: u64) -> ProcessUsage {
        ProcessUsage { minor_faults, major_faults, ..ProcessUsage::default() }
    }

    #[test]
    fn loop_faults_count_from_the_loops_start_and_keep_what_came_before_apart() {
        let (start, first, end) = (usage(1_000, 40), usage(1_500, 43), usage(9_000, 45));
        let faults = LoopFaults::between(&start, Some(&first), &end);
        assert_eq!(
            faults,
            LoopFaults {
                major_before: 40,
                first_s: 2,
                minor_first: Some(500),
                major_first: Some(3),
                minor: 8_000,
                major: 5,
            }
        );
        let short = LoopFaults::between(&start, None, &end);
        assert_eq!((short.minor_first, short.major_first), (None, None), "a loop under 2 s");
    }
}
