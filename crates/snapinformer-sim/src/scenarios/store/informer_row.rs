//! The `snapinformer` row: our whole informer pipeline, measured exactly as the Go `client-go`
//! row measures client-go's.
//!
//! The pipeline is the product as a user runs it: a [`snapinformer_core::Informer`] with its
//! defaults (a `RealFifo` queue, batches of up to 1000 deltas, our chunked store with the pod
//! indexes) started on a multi-threaded Tokio runtime with one worker per core (as Go runs
//! client-go's goroutines on `GOMAXPROCS` = cores threads), and one registered
//! [`EventHandler`] on the handler thread the informer gives it.
//!
//! The source stands in for a reflector over an API server, shaped like the Go row's
//! `ListerWatcher`: the initial list goes to the queue's `replace`; after that a *feeder*
//! thread sends each update into an unbounded channel (the watch stream) at its scheduled slot
//! (`start + i / rate`), and a *reflector* task on the runtime reads the channel and calls the
//! queue's `update`, as the reflector does for a `MODIFIED` event. The channel never throttles
//! the feeder, so arrivals keep to their schedule whatever the informer does (open loop).
//!
//! **Visibility** is when the registered handler's `on_update` receives the update: after the
//! queue, the batched apply and publication, and the hop to the handler's thread, the moment a
//! controller's event handler (and so its work queue) learns of the change. That is the Go
//! `client-go` row's visibility point; the store rows (`snapshot`, `client-go-indexer`, ...)
//! measure at publication instead. Staleness is measured from each update's scheduled slot,
//! queue depth is arrived minus received.
//!
//! In the open loop the row also splits each update's staleness at the pipeline's inner points
//! (`open_loop_stages` in the report): slot to sent (the feeder's own lateness), slot to queued
//! (feeder, watch channel, reflector task), queued to published (queue wait, the batch's apply
//! and publication; recorded by the informer's `on_publish` hook) and published to the
//! handler. With the run-queue wait of each thread group over the same phase
//! (`open_loop_threads`), it tells a tail made by the store from one made by the scheduler. The
//! hook takes only locks of its own (`PublishLog`), once or twice per publication.
//!
//! Readers read the informer's snapshots with owned results (copied `Arc`s), as they read the
//! `snapshot` row.
//!
//! The same pipeline caching compact pods ([`snapinformer_compact::CompactPod`], the product's
//! `pods_compact` informer's objects and indexes) is the `snapinformer-compact` row: not one of
//! the pairs, since its readers get compact pods where client-go's get typed ones, but the
//! measure of what compact objects buy the whole informer. Its pools are built in compact form
//! before each phase, as the `snapshot-compact` row's are (decoding is not measured in any row).
//!
//! Two more rows run the same pipeline over `k8s_openapi` pods: `snapinformer-arena`, each pod
//! built in an arena of its own, and `snapinformer-covering`, a control whose owner-UID index is
//! covering (its buckets hold the pods, so owner lookups read them without resolving keys, and
//! every update writes its owner's bucket too). Every other row's indexes hold keys, as
//! client-go's and the product's pod informer's do.

use std::{
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_compact::CompactPod;
use snapinformer_core::{
    DEFAULT_BATCH_WINDOW, DeltaObject, EventHandler, HandlerOptions, Informer, InformerBuilder,
    Published, QueueKind, parse_resource_version,
};
use snapinformer_store::{Reader, StoreBuilder};

use super::{
    RowDriver, Updates,
    open_loop::{OpenLoop, PipelineStages, WriterTime},
};
use crate::{
    harness::{
        placement::{
            Cores, InformerHandler, InformerProcessing, ReclaimerPriority, WriterPriority, pin,
        },
        sched::{GroupTime, ThreadSched},
        stats::Latency,
    },
    pods::{NODE_NAME_INDEX, OWNER_UID_INDEX, access, pod_indexers_with},
    rows::{
        CacheReader, Objects,
        compact::{CompactReader, to_compact},
        snapshot::SnapshotReader,
    },
};

/// Report name of the row.
pub const NAME: &str = "snapinformer";

/// Report name of the row whose informer caches compact pods.
pub const COMPACT_NAME: &str = "snapinformer-compact";

/// Report name of the row whose informer caches `k8s_openapi` pods each built in an arena of
/// its own ([`snapinformer_arena::build`]), as a reflector would right after decoding.
pub const ARENA_NAME: &str = "snapinformer-arena";

/// Report name of the row whose informer's owner-UID index is covering (a control, as
/// `snapshot-bg-covering` is for the store alone; the product's default until 70aaa9b):
/// owner lookups read the pods from the bucket, and every update writes the bucket too.
pub const COVERING_NAME: &str = "snapinformer-covering";

/// What the row needs of the objects its informer caches: `k8s_openapi` pods for
/// [`NAME`], compact pods for [`COMPACT_NAME`].
pub trait RowObject: Send + Sync + 'static {
    /// The store the informer is built around: the object's accessors and the pod indexes
    /// (owner UID, of keys as the product's pod informer builds it, or covering when
    /// `covering_owner` is true; node name).
    fn store(reclaim: ReclaimerPriority, covering_owner: bool) -> StoreBuilder<Self>
    where
        Self: Sized;
    /// The object's resource version.
    fn resource_version(&self) -> Option<&str>;
    /// A phase's objects in this form.
    fn take(objects: Objects) -> Vec<Arc<Self>>
    where
        Self: Sized;
    /// Owned reads of the informer's snapshots.
    fn reader(reader: Reader<Self>) -> Arc<dyn CacheReader>
    where
        Self: Sized;
}

impl RowObject for Pod {
    fn store(reclaim: ReclaimerPriority, covering_owner: bool) -> StoreBuilder<Self> {
        StoreBuilder::new(access::<Pod>())
            .indexers(pod_indexers_with(covering_owner))
            .reclaim_priority(reclaim.store())
    }
    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
    fn take(objects: Objects) -> Vec<Arc<Self>> {
        objects.into_pods()
    }
    fn reader(reader: Reader<Self>) -> Arc<dyn CacheReader> {
        Arc::new(SnapshotReader(reader))
    }
}

impl RowObject for CompactPod {
    fn store(reclaim: ReclaimerPriority, covering_owner: bool) -> StoreBuilder<Self> {
        let store = StoreBuilder::new(snapinformer_compact::access());
        let owner = snapinformer_compact::owner_uid_index();
        let store = if covering_owner {
            store.covering_index(OWNER_UID_INDEX, owner)
        } else {
            store.index(OWNER_UID_INDEX, owner)
        };
        store
            .index(NODE_NAME_INDEX, snapinformer_compact::node_name_index())
            .reclaim_priority(reclaim.store())
    }
    fn resource_version(&self) -> Option<&str> {
        CompactPod::resource_version(self)
    }
    fn take(objects: Objects) -> Vec<Arc<Self>> {
        match objects {
            Objects::Compact(pods) => pods,
            Objects::Pods(pods) => pods.iter().map(|p| Arc::new(to_compact(p))).collect(),
        }
    }
    fn reader(reader: Reader<Self>) -> Arc<dyn CacheReader> {
        Arc::new(CompactReader(reader))
    }
}

/// How long a phase may take beyond its schedule before the row gives up.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

/// The open loop's schedule: update `i` arrives at `start + i / rate`.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    start: Instant,
    ns_per: f64,
    total: usize,
}

impl Schedule {
    fn slot(&self, i: usize) -> Instant {
        self.start + Duration::from_nanos((i as f64 * self.ns_per) as u64)
    }
    /// Updates arrived by `now` (update 0 arrives at `start`).
    fn arrived(&self, now: Instant) -> usize {
        let a =
            (now.saturating_duration_since(self.start).as_nanos() as f64 / self.ns_per) as usize;
        (a + 1).min(self.total)
    }
    fn end(&self) -> Instant {
        self.slot(self.total)
    }
}

/// One batch of updates the row sends and waits for.
struct Phase {
    first_rv: u64,
    count: usize,
    /// The open loop's schedule; `None` in a saturation phase.
    schedule: Option<Schedule>,
    staleness: Latency,
    depth_max: u64,
    visible: usize,
    last: Option<Instant>,
    /// Open loop only: what the `on_publish` hook records.
    log: Option<Arc<PublishLog>>,
    /// Open loop only: published to the handler's `on_update` (distribution to the handler's
    /// thread).
    delivery: Latency,
    /// Open loop only: scheduled slot to sent by the feeder (how late the source's thread ran).
    sent: Latency,
    /// Open loop only: the feeder thread's CPU and run-queue wait (it exits with the phase).
    feeder: Option<ThreadSched>,
    /// Open loop only: the feeder's wall time building one update at its slot, microseconds
    /// (`None` for a pool).
    build_us_per_update: Option<f64>,
    /// Open loop with `--writer-priority realtime` only: what the pipeline's threads got.
    priority: Option<String>,
}

/// The phase's index of an object with resource version `rv`, if it is one of the phase's.
fn index_of(first_rv: u64, count: usize, rv: Option<&str>) -> Option<usize> {
    rv.and_then(parse_resource_version)
        .and_then(|rv| rv.checked_sub(first_rv))
        .map(|i| i as usize)
        .filter(|i| *i < count)
}

/// What the informer's `on_publish` hook records in an open-loop phase. It is kept apart from
/// the row's state so that the processing loop never waits for a lock the handler's thread
/// takes (a handler preempted while holding it would stall the pipeline being measured): the
/// handler reads the publication times lock-free, and the hook's own lock is the hook's alone
/// until the phase ends.
struct PublishLog {
    first_rv: u64,
    schedule: Schedule,
    /// When each update was published: nanoseconds after the schedule's start, plus one (0: not
    /// yet).
    published: Box<[AtomicU64]>,
    stages: Mutex<PublishStages>,
}

/// The hook's share of the open loop's staleness split.
#[derive(Default)]
struct PublishStages {
    /// Scheduled slot to queued: the feeder, the watch channel and the reflector task.
    arrival: Latency,
    /// Queued to published: waiting in the queue, then the batch's apply and publication.
    queued: Latency,
    /// Publications that carried the phase's updates.
    batches: u64,
}

impl PublishLog {
    fn new(first_rv: u64, schedule: Schedule) -> PublishLog {
        PublishLog {
            first_rv,
            schedule,
            published: (0..schedule.total).map(|_| AtomicU64::new(0)).collect(),
            stages: Mutex::new(PublishStages::default()),
        }
    }

    /// Records a publication's deltas (the informer's `on_publish` hook).
    fn record<T: RowObject>(&self, published: &Published<'_, T>) {
        let sched = &self.schedule;
        let at = published.published_at;
        let mark = at.saturating_duration_since(sched.start).as_nanos() as u64 + 1;
        let mut stages = self.stages.lock().unwrap_or_else(|e| e.into_inner());
        let mut counted = false;
        for d in published.deltas {
            let DeltaObject::Object(obj) = &d.object else { continue };
            let Some(i) = index_of(self.first_rv, sched.total, obj.resource_version()) else {
                continue;
            };
            stages.arrival.record(d.enqueued_at.saturating_duration_since(sched.slot(i)));
            stages.queued.record(at.saturating_duration_since(d.enqueued_at));
            self.published[i].store(mark, Ordering::Release);
            counted = true;
        }
        stages.batches += u64::from(counted);
    }

    /// When update `i` was published, if it was.
    fn published_at(&self, i: usize) -> Option<Instant> {
        let mark = self.published.get(i)?.load(Ordering::Acquire);
        (mark > 0).then(|| self.schedule.start + Duration::from_nanos(mark - 1))
    }
}

impl Phase {
    fn new(first_rv: u64, count: usize, schedule: Option<Schedule>) -> Phase {
        Phase {
            first_rv,
            count,
            schedule,
            staleness: Latency::default(),
            depth_max: 0,
            visible: 0,
            last: None,
            log: schedule.map(|sched| Arc::new(PublishLog::new(first_rv, sched))),
            delivery: Latency::default(),
            sent: Latency::default(),
            feeder: None,
            build_us_per_update: None,
            priority: None,
        }
    }
}

/// What the handler and the row share.
#[derive(Default)]
struct State {
    phase: Option<Phase>,
    initial_adds: usize,
    unexpected: u64,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// The open-loop phase's publication log, for the `on_publish` hook (which takes this
    /// lock once per publication; only the row's thread takes it otherwise, twice a phase).
    publish: Mutex<Option<Arc<PublishLog>>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The registered handler: marks each update visible when it receives it.
struct VisibilityHandler {
    shared: Arc<Shared>,
    /// The writer side's core with the pinned placement; the handler's thread pins itself on
    /// its first notification.
    core: Option<core_affinity::CoreId>,
    pinned: bool,
}

impl VisibilityHandler {
    fn pin_once(&mut self) {
        if !self.pinned {
            pin(self.core);
            self.pinned = true;
        }
    }
}

impl<T: RowObject> EventHandler<T> for VisibilityHandler {
    fn on_add(&mut self, _obj: &Arc<T>, is_in_initial_list: bool) {
        self.pin_once();
        let mut s = self.shared.lock();
        if is_in_initial_list {
            s.initial_adds += 1;
            self.shared.changed.notify_all();
        } else {
            s.unexpected += 1;
        }
    }

    fn on_update(&mut self, _old: &Arc<T>, new: &Arc<T>) {
        let now = Instant::now();
        self.pin_once();
        let mut guard = self.shared.lock();
        let s = &mut *guard;
        let Some(p) = s.phase.as_mut() else {
            s.unexpected += 1;
            return;
        };
        let Some(i) = index_of(p.first_rv, p.count, new.resource_version()) else {
            s.unexpected += 1;
            return;
        };
        if let Some(sched) = &p.schedule {
            p.staleness.record(now.saturating_duration_since(sched.slot(i)));
            p.depth_max = p.depth_max.max(sched.arrived(now).saturating_sub(p.visible) as u64);
            if let Some(at) = p.log.as_ref().and_then(|log| log.published_at(i)) {
                p.delivery.record(now.saturating_duration_since(at));
            }
        }
        p.visible += 1;
        p.last = Some(now);
        if p.visible == p.count {
            self.shared.changed.notify_all();
        }
    }

    fn on_delete(&mut self, _obj: &DeltaObject<T>) {
        self.shared.lock().unexpected += 1;
    }
}

/// Our informer pipeline as a row of the `store` scenario (see the module docs), caching `T`.
pub struct InformerRow<T: RowObject> {
    /// Report name.
    name: &'static str,
    informer: Informer<T>,
    /// The watch stream the reflector task reads.
    watch: tokio::sync::mpsc::UnboundedSender<Arc<T>>,
    shared: Arc<Shared>,
    writer_core: Option<core_affinity::CoreId>,
    runtime: tokio::runtime::Runtime,
    /// The batch window the informer was built with.
    batch_window: Duration,
    /// How the pipeline's threads are scheduled in the open loop (`--writer-priority`).
    priority: WriterPriority,
    /// Set while the open loop runs at `priority`: a runtime thread that starts then (the
    /// blocking pool's, which sleeps out the batch window) takes it too.
    prioritized: Arc<AtomicBool>,
}

/// The names (prefixes) of the threads on an update's path in the informer rows, which
/// `--writer-priority` schedules in the open loop: the runtime's workers and blocking threads
/// (reflector task, processing loop, the window's sleep), a processing thread of its own, and
/// the handler's thread. The feeder, which stands in for decoding, sets its own. The
/// reclaimers are not on the path and keep their policy.
const PIPELINE_THREADS: &[&str] = &["informer-", "handler-"];

impl<T: RowObject> InformerRow<T> {
    /// Builds the informer, registers the handler and starts the pipeline (empty until
    /// [`RowDriver::build`]). With the pinned placement the runtime's workers, the feeder and
    /// the handler's thread run on the writer's core. `covering_owner` picks the owner-UID
    /// index's kind ([`RowObject::store`]).
    #[allow(clippy::too_many_arguments)] // one per `store` flag the row honours
    pub fn start(
        name: &'static str,
        cores: Cores,
        reclaim: ReclaimerPriority,
        processing: InformerProcessing,
        handler: InformerHandler,
        batch_window: Option<Duration>,
        covering_owner: bool,
        priority: WriterPriority,
    ) -> Result<Self, String> {
        let writer_core = cores.writer;
        let batch_window = batch_window.unwrap_or(DEFAULT_BATCH_WINDOW);
        let workers = thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let prioritized = Arc::new(AtomicBool::new(false));
        let starting = prioritized.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("informer-rt")
            .on_thread_start(move || {
                pin(writer_core);
                if starting.load(Ordering::Acquire) {
                    priority.enter();
                }
            })
            .enable_all()
            .build()
            .map_err(|e| format!("starting the informer's runtime: {e}"))?;
        let shared = Arc::new(Shared::default());
        let hook = Arc::downgrade(&shared);
        // A processing thread of its own cannot be pinned from here: the hook, which runs on
        // it, pins it on its first call (as the handler's thread pins itself).
        let hook_pinned = AtomicBool::new(processing == InformerProcessing::Runtime);
        let informer: Informer<T> = InformerBuilder::with_store(T::store(reclaim, covering_owner))
            .name("pods")
            .queue(QueueKind::Real)
            .processing(processing.informer())
            .batch_window(batch_window)
            // Splits the open loop's staleness at publication.
            .on_publish(move |published| {
                if !hook_pinned.swap(true, Ordering::Relaxed) {
                    pin(writer_core);
                }
                let Some(shared) = hook.upgrade() else { return };
                let log = shared.publish.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some(log) = log {
                    log.record(published);
                }
            })
            .build()
            .map_err(|e| format!("building the informer: {e}"))?;
        {
            // A handler task runs on the runtime's workers, which are pinned already (if at
            // all): it has no thread of its own to pin.
            let _entered = runtime.enter();
            let core = if handler == InformerHandler::Task { None } else { writer_core };
            informer
                .add_event_handler_with(
                    VisibilityHandler { shared: shared.clone(), core, pinned: false },
                    HandlerOptions::new().name("visibility").execution(handler.execution()),
                )
                .map_err(|e| format!("registering the handler: {e}"))?;
        }
        let (watch, mut stream) = tokio::sync::mpsc::unbounded_channel::<Arc<T>>();
        {
            let _entered = runtime.enter();
            informer.start().map_err(|e| format!("starting the informer: {e}"))?;
        }
        let queue = informer.queue().clone();
        runtime.spawn(async move {
            // The reflector: every watch event becomes a queue update, in order.
            while let Some(pod) = stream.recv().await {
                if queue.update(pod).is_err() {
                    break;
                }
            }
        });
        Ok(InformerRow {
            name,
            informer,
            watch,
            shared,
            writer_core,
            runtime,
            batch_window,
            priority,
            prioritized,
        })
    }

    /// Sends `pool` (at once, or on `rate`'s schedule from a feeder thread) and waits until the
    /// handler received every update; returns the phase and the schedule's depth samples.
    fn run(
        &mut self,
        pool: Updates,
        rate: Option<u64>,
    ) -> Result<(Phase, Vec<(f64, u64)>), String> {
        let count = pool.len();
        if count == 0 {
            return Ok((Phase::new(0, 0, None), Vec::new()));
        }
        let first_rv =
            pool.first_resource_version().ok_or("an update without a numeric resource version")?;
        // The feeder thread exists before the schedule starts, so that starting it is not
        // counted as the first updates' staleness.
        let mut pool = Some(pool);
        let (start_feeder, feeder) = match rate {
            None => (None, None),
            Some(_) => {
                let pool = pool.take().ok_or("the phase's updates were taken twice")?;
                let (tx, rx) = std::sync::mpsc::channel::<Schedule>();
                let (watch, core, priority) = (self.watch.clone(), self.writer_core, self.priority);
                let handle = thread::Builder::new()
                    .name("feeder".into())
                    .spawn(move || {
                        pin(core);
                        // The source stands in for the reflector's decoding, which runs on the
                        // informer's runtime in a real one: it is on the update's path.
                        priority.enter();
                        let sched = rx.recv().ok()?;
                        let began = ThreadSched::now();
                        let (late, build) = feed::<T>(&sched, pool, &watch);
                        let time = ThreadSched::now().zip(began).map(|(n, b)| n.since(&b));
                        Some((late, time, build))
                    })
                    .map_err(|e| format!("spawning the feeder: {e}"))?;
                (Some(tx), Some(handle))
            }
        };
        let schedule = rate.map(|rate| Schedule {
            start: Instant::now(),
            ns_per: 1e9 / rate.max(1) as f64,
            total: count,
        });
        let mut phase = Phase::new(first_rv, count, schedule);
        if schedule.is_some() && self.priority != WriterPriority::Normal {
            self.prioritized.store(true, Ordering::Release);
            phase.priority = Some(self.priority.apply_to_threads(PIPELINE_THREADS, false));
        }
        *self.shared.publish.lock().unwrap_or_else(|e| e.into_inner()) = phase.log.clone();
        self.shared.lock().phase = Some(phase);
        match (start_feeder, schedule) {
            (Some(tx), Some(sched)) => tx.send(sched).map_err(|_| "the feeder ended early")?,
            _ => {
                if let Some(mut pool) = pool {
                    let all = pool.remaining();
                    for pod in T::take(pool.take(all)) {
                        self.watch.send(pod).map_err(|_| "the reflector task ended")?;
                    }
                }
            }
        }
        let deadline = Instant::now()
            + PHASE_LIMIT
            + schedule.map_or(Duration::ZERO, |s| s.end().saturating_duration_since(s.start));
        let mut series = Vec::new();
        let mut guard = self.shared.lock();
        loop {
            let p = guard.phase.as_ref().expect("the phase stays until taken");
            if p.visible == p.count {
                break;
            }
            let now = Instant::now();
            if let Some(sched) = &p.schedule {
                // The depth series: arrived minus received, about every 50 ms.
                let depth = sched.arrived(now).saturating_sub(p.visible) as u64;
                series.push((now.saturating_duration_since(sched.start).as_secs_f64(), depth));
            }
            if now > deadline {
                let (visible, unexpected) = (p.visible, guard.unexpected);
                return Err(format!(
                    "only {visible} of {count} updates reached the handler in time ({unexpected} unexpected notifications)"
                ));
            }
            guard = self
                .shared
                .changed
                .wait_timeout(guard, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let mut phase = guard.phase.take().expect("the phase stays until taken");
        drop(guard);
        if self.prioritized.swap(false, Ordering::AcqRel) {
            self.priority.apply_to_threads(PIPELINE_THREADS, true);
        }
        *self.shared.publish.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if let Some(feeder) = feeder {
            let (late, time, build) = feeder
                .join()
                .map_err(|_| "the feeder panicked")?
                .ok_or("the feeder got no schedule")?;
            phase.sent = late;
            phase.feeder = time;
            phase.build_us_per_update = build;
        }
        Ok((phase, series))
    }
}

/// The feeder thread's loop: sends each update into the watch channel at its slot (building it
/// first, when updates are built at their slots, as a reflector decodes each event before
/// queueing it); returns how late it sent each one, and how long building one took.
fn feed<T: RowObject>(
    sched: &Schedule,
    mut pool: Updates,
    watch: &tokio::sync::mpsc::UnboundedSender<Arc<T>>,
) -> (Latency, Option<f64>) {
    let mut late = Latency::default();
    let mut sent = 0;
    while sent < sched.total {
        let now = Instant::now();
        let arrived = sched.arrived(now);
        while sent < arrived {
            let Some(pod) = T::take(pool.take(1)).pop() else {
                return (late, pool.build_us_per_update());
            };
            if watch.send(pod).is_err() {
                return (late, pool.build_us_per_update());
            }
            late.record(Instant::now().saturating_duration_since(sched.slot(sent)));
            sent += 1;
        }
        if sent < sched.total {
            let next = sched.slot(sent);
            let now = Instant::now();
            if next > now {
                thread::sleep(next - now);
            }
        }
    }
    (late, pool.build_us_per_update())
}

impl<T: RowObject> RowDriver for InformerRow<T> {
    fn build(&mut self, initial: Objects) -> Result<(), String> {
        let initial = T::take(initial);
        let n = initial.len();
        let rv = initial
            .iter()
            .filter_map(|p| p.resource_version().and_then(parse_resource_version))
            .max()
            .unwrap_or(0);
        self.informer.queue().replace(initial, &rv.to_string()).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + PHASE_LIMIT;
        let mut guard = self.shared.lock();
        while guard.initial_adds < n {
            if Instant::now() > deadline {
                return Err(format!(
                    "the handler received {} of {n} initial adds in time",
                    guard.initial_adds
                ));
            }
            guard = self
                .shared
                .changed
                .wait_timeout(guard, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if guard.unexpected > 0 {
            return Err(format!("{} unexpected notifications", guard.unexpected));
        }
        Ok(())
    }

    fn apply_all(&mut self, pool: Objects) -> Result<(), String> {
        self.run(Updates::prebuilt(pool), None).map(drop)
    }

    fn open_loop(&mut self, updates: Updates, rate: u64) -> Result<OpenLoop, String> {
        let waits_before = self.informer.metrics().batch_window_waits.get();
        let (p, mut series) = self.run(updates, Some(rate))?;
        let window_waits = self.informer.metrics().batch_window_waits.get() - waits_before;
        let Some(sched) = p.schedule else {
            return Ok(OpenLoop {
                staleness: p.staleness,
                depth_max: 0,
                depth_end: 0,
                series,
                elapsed_s: 0.0,
                writer: WriterTime::default(),
                stages: None,
                exited_threads: Vec::new(),
                build_us_per_update: None,
            });
        };
        let last = p.last.unwrap_or(sched.start);
        let elapsed_s = last.saturating_duration_since(sched.start).as_secs_f64();
        // Whatever had arrived by the scheduled end but was not yet visible then.
        let late = last.saturating_duration_since(sched.end()).as_secs_f64();
        let depth_end = (late * rate as f64).min(p.count as f64) as u64;
        let depth_max = series.iter().map(|s| s.1).max().unwrap_or(0).max(p.depth_max);
        series.push((elapsed_s, 0));
        let stages = p.log.as_ref().map(|log| {
            let st = log.stages.lock().unwrap_or_else(|e| e.into_inner());
            PipelineStages {
                sent_us: p.sent.summary(),
                arrival_us: st.arrival.summary(),
                queued_us: st.queued.summary(),
                delivery_us: p.delivery.summary(),
                batches: st.batches,
                batch_window_us: self.batch_window.as_micros() as u64,
                window_waits,
                pipeline_priority: p.priority.clone(),
            }
        });
        // The writer here is the informer's processing thread, not this one: its time is not
        // recorded (`WriterTime` is the cache rows'); the stages say where staleness went.
        Ok(OpenLoop {
            staleness: p.staleness,
            depth_max,
            depth_end,
            series,
            elapsed_s,
            writer: WriterTime::default(),
            stages,
            exited_threads: p
                .feeder
                .map(|f| ("feeder".to_string(), GroupTime { cpu: f.cpu(), wait: f.wait() }))
                .into_iter()
                .collect(),
            build_us_per_update: p.build_us_per_update,
        })
    }

    fn reader(&self) -> Arc<dyn CacheReader> {
        T::reader(self.informer.reader())
    }

    fn finish(self: Box<Self>) -> Vec<String> {
        let unexpected = self.shared.lock().unexpected;
        let m = self.informer.metrics();
        let notes = vec![format!(
            "{}: {} deltas applied in {} publications, {unexpected} unexpected notifications",
            self.name,
            m.deltas_applied.get(),
            m.publications.get(),
        )];
        let InformerRow { informer, watch, runtime, .. } = *self;
        drop(watch);
        runtime.block_on(async {
            let _ = tokio::time::timeout(Duration::from_secs(30), informer.shutdown()).await;
        });
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::store::InProcessRow;

    /// Whether the store a row builds has a covering owner-UID index (beside a key node-name
    /// index, and no other).
    fn owner_index_covers<T: RowObject>(covering_owner: bool) -> bool {
        let store = T::store(ReclaimerPriority::Normal, covering_owner);
        let indexers = store.configured_indexers();
        assert_eq!(indexers.len(), 2, "one owner index and one node-name index");
        assert_eq!(indexers.is_covering(NODE_NAME_INDEX), Some(false));
        indexers.is_covering(OWNER_UID_INDEX).expect("an owner-UID index")
    }

    #[test]
    fn the_covering_row_builds_a_covering_owner_index_and_the_others_one_of_keys() {
        assert!(owner_index_covers::<Pod>(true));
        assert!(!owner_index_covers::<Pod>(false));
        assert!(owner_index_covers::<CompactPod>(true));
        assert!(!owner_index_covers::<CompactPod>(false));
        assert_eq!(InProcessRow::parse(COVERING_NAME), Some(InProcessRow::InformerCovering));
        assert!(InProcessRow::InformerCovering.is_informer());
    }
}
