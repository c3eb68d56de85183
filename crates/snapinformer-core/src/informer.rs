//! The shared informer: a delta queue, the processing loop that applies batches to the store and
//! publishes them, the distributor that feeds handlers, resync, and freshness waits.

use std::{
    collections::HashSet,
    fmt,
    sync::{
        Arc, Mutex, MutexGuard, OnceLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use prometheus_client::registry::Registry;
use snapinformer_store::{
    Backend, Chunked, Indexers, ObjectAccess, Reader, ReclaimPriority, Reclaimer, Snapshot,
    StoreBuilder, Writer,
};
use tokio::{sync::watch, task::JoinHandle};

use crate::{
    delta::{DeltaType, PoppedBatch},
    freshness::{self, Freshness, FreshnessPolicy, Progress, RvTracker, parse_resource_version},
    handler::{
        Buffer, EventHandler, HandlerExecution, HandlerOptions, HandlerReclaimer,
        HandlerRegistration, HandlerShared, Message, Notification, spawn_handler,
    },
    metrics::{HandlerLabels, InformerMetrics},
    queue::{DeltaFifo, KnownObjects, Queue, QueueConfig, RealFifo},
};

/// Errors of the informer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store rejected something (a duplicate index name, an object without a name).
    #[error(transparent)]
    Store(#[from] snapinformer_store::Error),
    /// [`Informer::start`] was called twice.
    #[error("the informer {0:?} is already started")]
    AlreadyStarted(String),
    /// [`Informer::start`] was called outside a Tokio runtime.
    #[error("the informer must be started from within a Tokio runtime")]
    NoRuntime,
    /// The informer was stopped.
    #[error("the informer {0:?} is stopped")]
    Stopped(String),
    /// No handler has this registration id (already removed?).
    #[error("no event handler with id {0} is registered")]
    UnknownHandler(u64),
    /// The registration was issued by another informer; nothing was removed.
    #[error("event handler {handler:?} belongs to another informer, not to {informer:?}")]
    ForeignHandler {
        /// The handler's name.
        handler: String,
        /// This informer's name.
        informer: String,
    },
    /// A handler with this name is already registered.
    #[error("an event handler named {0:?} is already registered")]
    DuplicateHandlerName(String),
    /// A handler asked to run as a task ([`HandlerExecution::Task`]) was registered outside a
    /// Tokio runtime; nothing was registered.
    #[error(
        "event handler {0:?} runs as a task (HandlerExecution::Task) and must be registered from within a Tokio runtime"
    )]
    NoRuntimeForHandler(String),
    /// The handler's thread could not be started.
    #[error("cannot start the handler thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The processing loop's own thread (see [`Processing::DedicatedThread`]) or its runtime
    /// could not be started; the informer stays unstarted.
    #[error("cannot start the processing thread of informer {informer:?}: {source}")]
    ProcessingThread {
        /// The informer's name.
        informer: String,
        /// What the operating system or Tokio said.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with the informer [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which delta queue an informer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueKind {
    /// [`RealFifo`]: every delta, in order (client-go's default since 1.33).
    #[default]
    Real,
    /// [`DeltaFifo`]: one entry per key with its deltas.
    Delta,
}

/// Where the processing loop runs (see [`InformerBuilder::processing`]).
///
/// The loop pops a batch, applies and publishes it, then hands its notifications to the
/// handlers; when the queue is empty it sleeps until a producer wakes it. Where it runs decides
/// what it waits behind when the machine is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Processing {
    /// A task on the Tokio runtime that calls [`Informer::start`] (the default). It shares that
    /// runtime's workers with the reflector and everything else spawned there: costs nothing
    /// extra, but a batch can wait for a worker, and a wake-up may go through another worker.
    #[default]
    Runtime,
    /// An OS thread of its own, named `informer-<name>` (Linux shows its first 15 bytes),
    /// running the loop on a single-threaded
    /// runtime of its own. It costs one thread and its stack. The loop never queues behind the
    /// caller's tasks: it publishes even while they block the runtime's threads, and the
    /// kernel schedules it like any thread. It does not make the machine's cores go further:
    /// on the project's 2-core machine, with ten reader threads keeping both busy, it kept the
    /// hop from the reflector to the queue under 11 ms at p99 (up to 208 ms as a task), but the
    /// deltas then waited in the queue instead and the staleness p99 did not change
    /// (BENCHMARKS.md, "The processing loop on a thread of its own"). The hook of
    /// [`InformerBuilder::on_publish`] runs on that thread, where no timers or I/O are
    /// available.
    DedicatedThread,
}

/// The processing loop's default [batch window](InformerBuilder::batch_window): 250 µs (1 ms
/// until 2026-12-07; see that method's "Why 250 µs").
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_micros(250);

/// Configures and builds an [`Informer`] around a store.
#[must_use = "a builder does nothing until `build` is called"]
pub struct InformerBuilder<T: Send + Sync + 'static, B: Backend = Chunked> {
    store: StoreBuilder<T, B>,
    name: String,
    queue_kind: QueueKind,
    queue_config: QueueConfig,
    max_batch: usize,
    slow_batch: Duration,
    batch_window: Duration,
    freshness: FreshnessPolicy,
    on_publish: Option<PublishHook<T>>,
    resync_period: Duration,
    processing: Processing,
}

/// A callback run by the processing loop after each publication.
type PublishHook<T> = Arc<dyn Fn(&Published<'_, T>) + Send + Sync>;

/// What one publication made visible, as passed to [`InformerBuilder::on_publish`].
#[derive(Debug)]
pub struct Published<'a, T> {
    /// The deltas of the batch, in the order they were applied; each knows when it was queued,
    /// so `published_at - delta.enqueued_at` is that event's staleness.
    pub deltas: &'a [crate::Delta<T>],
    /// The store's publication number of the new snapshot.
    pub publication: u64,
    /// The resource version the new snapshot includes.
    pub resource_version: Option<&'a str>,
    /// When the snapshot became visible to readers.
    pub published_at: Instant,
}

impl<T: Send + Sync + 'static, B: Backend> fmt::Debug for InformerBuilder<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerBuilder")
            .field("name", &self.name)
            .field("queue_kind", &self.queue_kind)
            .field("queue_config", &self.queue_config)
            .field("max_batch", &self.max_batch)
            .field("slow_batch", &self.slow_batch)
            .field("batch_window", &self.batch_window)
            .field("freshness", &self.freshness)
            .field("resync_period", &self.resync_period)
            .field("processing", &self.processing)
            .finish()
    }
}

impl<T: Send + Sync + 'static> InformerBuilder<T, Chunked> {
    /// An informer for objects read through `access`, on a store with the default backend and
    /// only the namespace index.
    pub fn new(access: ObjectAccess<T>) -> Self {
        Self::with_store(StoreBuilder::new(access))
    }
}

impl<T: Send + Sync + 'static, B: Backend> InformerBuilder<T, B> {
    /// An informer around the store `store` will build (indexes, backend).
    pub fn with_store(store: StoreBuilder<T, B>) -> Self {
        InformerBuilder {
            store,
            name: "informer".to_owned(),
            queue_kind: QueueKind::default(),
            queue_config: QueueConfig::default(),
            max_batch: 1000,
            slow_batch: Duration::from_millis(100),
            batch_window: DEFAULT_BATCH_WINDOW,
            freshness: FreshnessPolicy::default(),
            on_publish: None,
            resync_period: Duration::ZERO,
            processing: Processing::default(),
        }
    }

    /// Names the informer (metrics label, logs). Default `"informer"`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Chooses the delta queue (default [`QueueKind::Real`]).
    pub fn queue(mut self, kind: QueueKind) -> Self {
        self.queue_kind = kind;
        self
    }

    /// Configures the queue (depth bound).
    pub fn queue_config(mut self, config: QueueConfig) -> Self {
        self.queue_config = config;
        self
    }

    /// Most deltas applied in one batch, i.e. one publication (default 1000, as client-go).
    pub fn max_batch(mut self, max: usize) -> Self {
        self.max_batch = max.max(1);
        self
    }

    /// Under a stream of deltas faster than the loop publishes them one by one, publishes at
    /// most one batch per `window`, unless a batch is full. The default is
    /// [`DEFAULT_BATCH_WINDOW`] (250 µs); `Duration::ZERO` publishes a batch as soon as the loop
    /// is free.
    ///
    /// Each publication costs a fixed amount besides its deltas: the loop's wake-up, the
    /// copies of the map's path shared by its deltas, waking each handler's thread and the
    /// reclaimer. A stream of 20,000 deltas a second arrives one every 50 µs, so a loop that
    /// is free publishes batches of one to three and pays that cost every time. With a window,
    /// after a batch that was not full, **if deltas arrived while it was applied**, the loop
    /// waits until `window` has passed since that batch began, letting the deltas arriving
    /// meanwhile gather into the next one (producers do not wake it while it waits).
    ///
    /// - A loop that keeps up does not wait: when nothing is queued at the end of a batch, it
    ///   waits for the next delta and publishes it at once. A delta that arrives after a quiet
    ///   period, or in a stream slower than the loop, is published without delay. (Until
    ///   2026-12-04 the loop waited after every batch that was not full. At 5,000 updates a
    ///   second on the project's 2-core machine with ten busy readers, where it saved little,
    ///   the sleep's wake-ups took the staleness p99 to about 50 ms: BENCHMARKS.md, "The batch
    ///   window at low rates".)
    /// - A delta waits at most `window` longer than it would without one, plus the time the
    ///   operating system takes to wake a sleeping thread (tens of microseconds on an idle
    ///   machine, milliseconds when every core is busy).
    /// - A backlog is not slowed down: a full batch (`max_batch`) is published at once, and a
    ///   batch that took longer than the window to apply is followed by the next at once.
    /// - The window is real time, not the runtime's clock, so it needs no time driver. As a
    ///   task, the loop sleeps out the window on a thread of the runtime's blocking pool
    ///   (`spawn_blocking`); on [`Processing::DedicatedThread`] it sleeps on its own thread.
    ///   The sleep is not cut short: [`Informer::shutdown`] can wait up to one window longer.
    /// - **Under a paused Tokio clock** (`#[tokio::test(start_paused = true)]`,
    ///   `tokio::time::pause`) **the window is off**: the loop publishes as soon as it is free,
    ///   so a test's clock never holds back a publication and a test that waits for one with a
    ///   paused-clock timeout is not fooled by the clock advancing while the loop sleeps. (The
    ///   clock is that of the runtime the loop runs on: a [`Processing::DedicatedThread`] loop
    ///   has a runtime of its own, never paused, and keeps its window.)
    ///
    /// **Why 250 µs.** On the project's 2-core machine, with 20,000 pod updates a second and
    /// ten busy readers, a 1 ms window (the default from 2026-12-02) cut the pipeline's CPU per
    /// update by about 30% (22 against 31 µs; batches of tens of deltas instead of 2-3), and
    /// the staleness p99 and the controllers' time to converge in the field report's scenario
    /// fell with it. When saturated, batches are full and the window does not engage
    /// (BENCHMARKS.md, "The batch window"). Measured again on 2026-12-07, with readers made
    /// cheaper by label digests:
    /// - without the window the median staleness was two to five times lower (about 0.15
    ///   against 0.5 ms), but the p99 was not lower (higher at ten reads a second), and in the
    ///   field report's scenario on prefaulted memory the pipeline's CPU doubled (BENCHMARKS.md,
    ///   "The batch window off, at 1 to 20 reads a second and in `seed`");
    /// - with 250 µs, over four runs a side at each of 1, 3, 10 and 20 reads a second, the
    ///   median was about half of 1 ms's (0.25-0.42 against 0.49-1.23 ms), the p99's median
    ///   the same at one read a second and lower at the others, and the process's CPU at most
    ///   3% above it. What it costs is CPU under bursts: in the field report's scenario on
    ///   prefaulted memory the pipeline used 9.0 against 6.7 s (the whole process 4% more) for
    ///   the same p99 and the same convergence (BENCHMARKS.md, "A 250 µs batch window by
    ///   default").
    ///
    /// An informer that wants the fewest publications under bursts can set 1 ms or more; one
    /// whose every delta must be visible within microseconds of its arrival, on a machine with
    /// cores to spare, can set `Duration::ZERO`.
    #[doc(alias = "coalesce")]
    pub fn batch_window(mut self, window: Duration) -> Self {
        self.batch_window = window;
        self
    }

    /// Batches slower than this (apply + publish + distribute) are logged with their size,
    /// the queue depth and the time (default 100 ms).
    pub fn slow_batch_threshold(mut self, threshold: Duration) -> Self {
        self.slow_batch = threshold;
        self
    }

    /// Runs `hook` on the processing loop after each publication, before the notifications are
    /// distributed: for measuring per-event staleness (a simulator) or tracing. Keep it short:
    /// it delays the next batch.
    pub fn on_publish(mut self, hook: impl Fn(&Published<'_, T>) + Send + Sync + 'static) -> Self {
        self.on_publish = Some(Arc::new(hook));
        self
    }

    /// The informer-wide resync period (client-go's `defaultEventHandlerResyncPeriod`, the
    /// third argument of `NewSharedInformer`): the period of every handler that does not ask
    /// for its own, and the informer's initial resync check period. Zero (the default): no
    /// default resync and no check period. See
    /// [`Informer::add_event_handler_with`] for how handler periods are adjusted.
    #[doc(alias = "defaultEventHandlerResyncPeriod")]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// Where the processing loop runs: on the caller's Tokio runtime (the default) or on a
    /// thread of its own (see [`Processing`] for the trade-off).
    pub fn processing(mut self, processing: Processing) -> Self {
        self.processing = processing;
        self
    }

    /// The bound beyond which [`Freshness::Fresh`] reads wait.
    pub fn freshness_policy(mut self, policy: FreshnessPolicy) -> Self {
        self.freshness = policy;
        self
    }

    /// Builds the store and the informer (not started yet: see [`Informer::start`]).
    pub fn build(self) -> Result<Informer<T, B>> {
        let (writer, reader) = self.store.build()?;
        let access = writer.access();
        let handler_reclaim = writer.reclaim_priority();
        let known: Arc<dyn KnownObjects<T>> = Arc::new(reader.clone());
        // The queue keys deltas with the store's key function, so both agree on every key.
        let options = crate::QueueOptions::new()
            .config(self.queue_config)
            .key_fn(writer.key_fn().clone())
            .atomic_relist(true);
        let queue: Arc<dyn Queue<T>> = match self.queue_kind {
            QueueKind::Real => Arc::new(RealFifo::with_options(access, known, options)),
            QueueKind::Delta => Arc::new(DeltaFifo::with_options(access, known, options)),
        };
        let (progress, _) = watch::channel(Progress::initial());
        let shared = Arc::new(Shared {
            id: NEXT_INFORMER_ID.fetch_add(1, Ordering::Relaxed),
            name: self.name,
            access,
            queue,
            reader,
            writer: Mutex::new(writer),
            distributor: Mutex::new(Distributor {
                listeners: Vec::new(),
                syncing: HashSet::new(),
                sync_until: None,
                distributed_through: 0,
                started: false,
                default_resync: self.resync_period,
                check_period: self.resync_period,
            }),
            resync_changed: tokio::sync::Notify::new(),
            progress,
            synced: Arc::new(AtomicBool::new(false)),
            metrics: InformerMetrics::default(),
            max_batch: self.max_batch,
            slow_batch: self.slow_batch,
            batch_window: self.batch_window,
            freshness: self.freshness,
            on_publish: self.on_publish,
            processing: self.processing,
            tasks: Mutex::new(Tasks::default()),
            handler_reclaim,
            handler_reclaimer: OnceLock::new(),
        });
        let closer = shared.clone();
        let on_drop = move || {
            closer.queue.close();
            // A started processing loop winds down by itself once the queue is drained.
            if !lock(&closer.tasks).started {
                wind_down(&closer);
            }
        };
        Ok(Informer { shared, _handles: Arc::new(CloseOnDrop(Box::new(on_drop))) })
    }
}

/// A handler as the distributor sees it.
struct Listener<T: Send + Sync + 'static, B: Backend> {
    id: u64,
    name: Arc<str>,
    buffer: Arc<Buffer<T, B>>,
    shared: Arc<HandlerShared>,
    /// Publications up to this one are in the replay this handler got at registration.
    start_after: u64,
    /// The resync period the handler asked for (after the one-second floor); zero: none.
    requested_resync: Duration,
    /// The period in force (see [`effective_resync_period`]); zero: none.
    resync_period: Duration,
    next_resync: Option<tokio::time::Instant>,
    notifications: prometheus_client::metrics::counter::Counter,
}

/// The handlers, behind one small lock held only to push notifications, register or remove.
struct Distributor<T: Send + Sync + 'static, B: Backend> {
    listeners: Vec<Listener<T, B>>,
    /// Handlers due for a resync: only they receive resync updates (updates that keep the
    /// resource version), until the resync's deltas are applied.
    syncing: HashSet<u64>,
    /// The queue position of the last delta of the resync in progress: once a batch applies
    /// up to it, `syncing` is cleared. `Some(u64::MAX)` while the resync is being queued.
    sync_until: Option<u64>,
    /// The queue position the last distributed batch completed.
    distributed_through: u64,
    /// Whether the informer has started (handler periods are then raised to the check period
    /// instead of lowering it).
    started: bool,
    /// The period of handlers that do not ask for one (zero: none).
    default_resync: Duration,
    /// client-go's `resyncCheckPeriod`: the floor of handler periods once started.
    check_period: Duration,
}

/// The shortest resync period a handler gets (client-go's `minimumResyncPeriod`).
pub const MIN_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Registration ids, unique in the process so that a handle can never name another
/// informer's handler.
static NEXT_HANDLER_ID: AtomicU64 = AtomicU64::new(1);
static NEXT_INFORMER_ID: AtomicU64 = AtomicU64::new(1);

/// The resync period a handler that asked for `requested` gets under the check period
/// `check` (client-go's `determineResyncPeriod`, except that an informer without a check
/// period honours the handler's own period instead of ignoring it).
fn effective_resync_period(requested: Duration, check: Duration) -> Duration {
    if requested.is_zero() || check.is_zero() {
        return requested;
    }
    requested.max(check)
}

#[derive(Default)]
struct Tasks {
    started: bool,
    stopped: bool,
    process: Option<ProcessHandle>,
    resync: Option<JoinHandle<()>>,
}

/// How [`Informer::shutdown`] waits for the processing loop.
enum ProcessHandle {
    /// [`Processing::Runtime`]: the loop's task.
    Task(JoinHandle<()>),
    /// [`Processing::DedicatedThread`]: resolves when the loop has ended; an error means the
    /// thread unwound (the loop panicked) before it could say so.
    Thread(tokio::sync::oneshot::Receiver<()>),
}

struct Shared<T: Send + Sync + 'static, B: Backend> {
    /// Unique in the process: registrations carry it.
    id: u64,
    name: String,
    access: ObjectAccess<T>,
    queue: Arc<dyn Queue<T>>,
    reader: Reader<T, B>,
    /// Locked by the processing loop for each batch and by `add_indexers`; never by readers.
    writer: Mutex<Writer<T, B>>,
    distributor: Mutex<Distributor<T, B>>,
    resync_changed: tokio::sync::Notify,
    progress: watch::Sender<Progress>,
    synced: Arc<AtomicBool>,
    metrics: InformerMetrics,
    max_batch: usize,
    slow_batch: Duration,
    batch_window: Duration,
    freshness: FreshnessPolicy,
    on_publish: Option<PublishHook<T>>,
    processing: Processing,
    tasks: Mutex<Tasks>,
    /// The store's reclaimer priority when it frees in the background (`None`: it frees
    /// inline, and so do the handler threads).
    handler_reclaim: Option<ReclaimPriority>,
    /// The handler threads' reclaimer, started with the first handler.
    handler_reclaimer: OnceLock<Option<HandlerReclaimer<T>>>,
}

impl<T: Send + Sync + 'static, B: Backend> Shared<T, B> {
    /// The reclaimer the handler threads hand their handled notifications to: started with the
    /// first handler when the store frees in the background, at its reclaimer's priority.
    /// Where the thread cannot start, handlers free what they hold themselves.
    fn handler_reclaimer(&self) -> Option<HandlerReclaimer<T>> {
        self.handler_reclaimer
            .get_or_init(|| {
                let priority = self.handler_reclaim?;
                // Named apart from the store's `snapinformer-reclaim` in its first 15 bytes (all
                // that Linux keeps), so that `top -H` and per-thread CPU tell the two apart.
                match Reclaimer::start("snapinformer-handler-reclaim", priority) {
                    Ok(r) => Some(Arc::new(Mutex::new(r))),
                    Err(e) => {
                        tracing::warn!(informer = %self.name, error = %e, "no reclaimer thread for the handlers; they free superseded objects themselves");
                        None
                    }
                }
            })
            .clone()
    }
}

impl<T: Send + Sync + 'static, B: Backend> Drop for Shared<T, B> {
    /// The last reference is gone (for example the runtime that ran the processing loop was
    /// dropped, or the processing thread ended): let handler threads deliver what they hold
    /// and end.
    fn drop(&mut self) {
        let dist = self.distributor.get_mut().unwrap_or_else(|e| e.into_inner());
        for l in &dist.listeners {
            l.buffer.close(true);
        }
    }
}

pub(crate) fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A shared informer (client-go's `SharedIndexInformer`): a delta queue feeding a snapshot
/// store, with any number of handlers.
///
/// - Producers feed the [`queue`](Informer::queue) (a reflector, or a simulator directly).
/// - The processing loop pops batches of up to `max_batch` deltas, applies each to the store's
///   writer in one [`Batch`](snapinformer_store::Batch) (one publication), then pushes the
///   resulting notifications into every handler's own buffer. No queue lock is held meanwhile,
///   and readers never take any lock. With a
///   [`batch_window`](InformerBuilder::batch_window) it publishes at most one batch per window
///   while deltas arrive faster than it publishes them one at a time.
/// - Readers take [`snapshot`](Informer::snapshot)s (or use a [`Lister`](crate::Lister)); they
///   can wait for a resource version ([`wait_for`](Informer::wait_for)) or read under the
///   freshness policy ([`read`](Informer::read)).
///
/// Cloning is cheap: clones share everything.
#[doc(alias = "SharedIndexInformer")]
#[doc(alias = "SharedInformer")]
pub struct Informer<T: Send + Sync + 'static, B: Backend = Chunked> {
    shared: Arc<Shared<T, B>>,
    /// Shared by the clones handed to users (not by the informer's own tasks): when the last
    /// one is dropped, the queue closes and the tasks wind down.
    _handles: Arc<CloseOnDrop>,
}

/// Closes the queue when the last user handle of an informer is dropped.
struct CloseOnDrop(Box<dyn Fn() + Send + Sync>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        (self.0)();
    }
}

impl<T: Send + Sync + 'static, B: Backend> Clone for Informer<T, B> {
    fn clone(&self) -> Self {
        Informer { shared: self.shared.clone(), _handles: self._handles.clone() }
    }
}

impl<T: Send + Sync + 'static, B: Backend> fmt::Debug for Informer<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Informer")
            .field("name", &self.shared.name)
            .field("queue", &self.shared.queue)
            .field("progress", &*self.shared.progress.borrow())
            .finish()
    }
}

/// A notification with what decides who gets it.
struct Note<T> {
    notification: Notification<T>,
    /// A resync (re-delivery of an unchanged object): only handlers due a resync get it.
    sync: bool,
    /// Counts towards handlers' `has_synced`.
    initial: bool,
}

impl<T: Send + Sync + 'static> Informer<T, Chunked> {
    /// A builder for an informer on a store with the default backend (see
    /// [`InformerBuilder`]; use [`InformerBuilder::with_store`] for indexes or another
    /// backend).
    pub fn builder(access: ObjectAccess<T>) -> InformerBuilder<T, Chunked> {
        InformerBuilder::new(access)
    }
}

impl<T: Send + Sync + 'static, B: Backend> Informer<T, B> {
    /// The informer's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The delta queue: feed it with `add`, `update`, `delete`, `replace`, `bookmark`.
    pub fn queue(&self) -> &Arc<dyn Queue<T>> {
        &self.shared.queue
    }

    /// A reader of the store: take snapshots with it, never waiting.
    pub fn reader(&self) -> Reader<T, B> {
        self.shared.reader.clone()
    }

    /// The latest published snapshot, in O(1), never waiting.
    pub fn snapshot(&self) -> Snapshot<T, B> {
        self.shared.reader.snapshot()
    }

    /// A typed lister over this informer's snapshots.
    pub fn lister(&self) -> crate::Lister<T, B> {
        crate::Lister::new(self.reader())
    }

    /// The metrics this informer maintains.
    pub fn metrics(&self) -> &InformerMetrics {
        &self.shared.metrics
    }

    /// Registers the informer's metrics in `registry` (prefix `snapinformer`, label
    /// `informer="<name>"`; see [`metrics`](crate::metrics)).
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.shared.metrics.register(
            registry,
            &self.shared.name,
            self.shared.queue.clone(),
            self.shared.progress.subscribe(),
        );
    }

    /// What the published snapshot includes now.
    pub fn progress(&self) -> Progress {
        self.shared.progress.borrow().clone()
    }

    /// A channel that is updated after every publication.
    pub fn subscribe(&self) -> watch::Receiver<Progress> {
        self.shared.progress.subscribe()
    }

    /// Registers more index functions on the store (client-go's `AddIndexers`): existing
    /// objects are indexed at once, in one publication.
    pub fn add_indexers(&self, indexers: Indexers<T>) -> Result<()> {
        lock(&self.shared.writer).add_indexers(indexers)?;
        Ok(())
    }

    /// Starts the processing loop and the resync timer on the current Tokio runtime (the loop
    /// on a thread of its own with [`Processing::DedicatedThread`]).
    pub fn start(&self) -> Result<()> {
        let rt = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let mut tasks = lock(&self.shared.tasks);
        if tasks.stopped {
            return Err(Error::Stopped(self.shared.name.clone()));
        }
        if tasks.started {
            return Err(Error::AlreadyStarted(self.shared.name.clone()));
        }
        let process = match self.shared.processing {
            Processing::Runtime => ProcessHandle::Task(rt.spawn(process_loop(self.shared.clone()))),
            Processing::DedicatedThread => self.spawn_processing_thread()?,
        };
        tasks.started = true;
        lock(&self.shared.distributor).started = true;
        tasks.process = Some(process);
        tasks.resync = Some(rt.spawn(resync_loop(self.shared.clone())));
        Ok(())
    }

    /// Starts the processing loop on a thread of its own, on a single-threaded runtime built
    /// here, so that a failure leaves the informer as it was.
    fn spawn_processing_thread(&self) -> Result<ProcessHandle> {
        let failed =
            |source| Error::ProcessingThread { informer: self.shared.name.clone(), source };
        // The loop needs no timer: it sleeps out its batch window on this thread.
        let runtime = tokio::runtime::Builder::new_current_thread().build().map_err(failed)?;
        let (done, ended) = tokio::sync::oneshot::channel();
        let shared = self.shared.clone();
        std::thread::Builder::new()
            // A NUL byte would make the spawn panic; Linux keeps the first 15 bytes.
            .name(format!("informer-{}", self.shared.name.replace('\0', "")))
            .spawn(move || {
                runtime.block_on(process_loop(shared));
                // The receiver is gone if nobody waits in `shutdown`; nothing to tell then.
                let _ = done.send(());
            })
            .map_err(failed)?;
        Ok(ProcessHandle::Thread(ended))
    }

    /// Whether [`start`](Informer::start) was called (it stays true after a shutdown, as
    /// client-go's `HasStarted`).
    #[doc(alias = "HasStarted")]
    pub fn is_started(&self) -> bool {
        lock(&self.shared.tasks).started
    }

    /// Whether the informer has stopped: its processing loop has ended (after
    /// [`shutdown`](Informer::shutdown), or once the last clone is dropped). A stopped informer
    /// takes no new handler.
    #[doc(alias = "IsStopped")]
    pub fn is_stopped(&self) -> bool {
        self.shared.progress.borrow().stopped
    }

    /// The resync check period (client-go's `resyncCheckPeriod`): the informer's
    /// [`resync_period`](InformerBuilder::resync_period), lowered by handlers registered
    /// before the start that asked for less. Zero: the informer has no default resync period
    /// and no handler lowered it.
    pub fn resync_check_period(&self) -> Duration {
        lock(&self.shared.distributor).check_period
    }

    /// The resync period in force for a handler of this informer (zero: it is not resynced),
    /// after client-go's adjustments (see
    /// [`add_event_handler_with`](Informer::add_event_handler_with)).
    pub fn handler_resync_period(&self, registration: &HandlerRegistration) -> Result<Duration> {
        self.check_owner(registration)?;
        let dist = lock(&self.shared.distributor);
        dist.listeners
            .iter()
            .find(|l| l.id == registration.id)
            .map(|l| l.resync_period)
            .ok_or(Error::UnknownHandler(registration.id))
    }

    /// Whether `registration` names a handler registered with this informer now (false for
    /// another informer's registration and for a removed one).
    pub fn is_registered(&self, registration: &HandlerRegistration) -> bool {
        registration.informer_id == self.shared.id
            && lock(&self.shared.distributor).listeners.iter().any(|l| l.id == registration.id)
    }

    /// Fails unless `registration` was issued by this informer.
    fn check_owner(&self, registration: &HandlerRegistration) -> Result<()> {
        if registration.informer_id != self.shared.id {
            return Err(Error::ForeignHandler {
                handler: registration.name.to_string(),
                informer: self.shared.name.clone(),
            });
        }
        Ok(())
    }

    /// Stops the informer: closes the queue (producers fail from now on), lets the processing
    /// loop apply what is queued, then lets every handler deliver what it has buffered, and
    /// waits for the processing loop to end. Waits in progress fail with
    /// [`freshness::Error::Stopped`].
    ///
    /// Dropping the last clone of an informer closes its queue too, so its tasks and handler
    /// threads end by themselves.
    pub async fn shutdown(&self) {
        self.shared.queue.close();
        let (process, resync) = {
            let mut tasks = lock(&self.shared.tasks);
            tasks.stopped = true;
            (tasks.process.take(), tasks.resync.take())
        };
        if let Some(resync) = resync {
            resync.abort();
        }
        let panicked = match process {
            Some(ProcessHandle::Task(task)) => matches!(task.await, Err(e) if e.is_panic()),
            // The sender is dropped without a word only if the thread unwound.
            Some(ProcessHandle::Thread(ended)) => ended.await.is_err(),
            None => {
                wind_down(&self.shared);
                false
            }
        };
        if panicked {
            tracing::error!(informer = %self.shared.name, "processing loop panicked");
            wind_down(&self.shared);
        }
    }

    /// Whether the informer has synced: the first list is applied, published and handed to
    /// every handler's buffer (client-go's `HasSynced`).
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// Waits until the informer has synced or `timeout` passes; returns whether it synced.
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_sync(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.progress.subscribe();
        matches!(tokio::time::timeout(timeout, rx.wait_for(|p| p.synced)).await, Ok(Ok(_)))
    }

    /// Registers a handler with default options (see
    /// [`add_event_handler_with`](Informer::add_event_handler_with)).
    #[doc(alias = "AddEventHandler")]
    pub fn add_event_handler(&self, handler: impl EventHandler<T>) -> Result<HandlerRegistration> {
        self.add_event_handler_with(handler, HandlerOptions::default())
    }

    /// Registers a handler, before or after the informer started.
    ///
    /// The handler first receives every object of the current snapshot as an add
    /// (`is_in_initial_list = true`), then every change published after that snapshot: no
    /// gap, no duplicate. It runs on its own thread (or, with [`HandlerExecution::Task`], as a
    /// task on the calling Tokio runtime) and has its own unbounded buffer.
    ///
    /// **Resync periods** follow client-go's rules. The handler's period is its
    /// [`HandlerOptions::resync_period`], or else the informer's
    /// [`resync_period`](InformerBuilder::resync_period). A period under
    /// [`MIN_RESYNC_PERIOD`] (one second) is raised to it. A period under the informer's
    /// [`resync_check_period`](Informer::resync_check_period) lowers the check period if the
    /// informer has not started (and every registered handler's period is raised to at least
    /// the new check period); once it has started, the handler's period is raised to the check
    /// period instead. Unlike client-go, an informer built without a resync period honours a
    /// handler's own period (client-go ignores it), and each handler is resynced exactly when
    /// its period elapses (client-go checks every check period, so a period is in effect
    /// rounded up to a multiple of it).
    #[doc(alias = "AddEventHandlerWithResyncPeriod")]
    #[doc(alias = "AddEventHandlerWithOptions")]
    pub fn add_event_handler_with(
        &self,
        handler: impl EventHandler<T>,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration> {
        let mut dist = lock(&self.shared.distributor);
        if self.shared.progress.borrow().stopped {
            return Err(Error::Stopped(self.shared.name.clone()));
        }
        let id = NEXT_HANDLER_ID.fetch_add(1, Ordering::Relaxed);
        let name: Arc<str> = options.name.unwrap_or_else(|| format!("handler-{id}")).into();
        if dist.listeners.iter().any(|l| l.name == name) {
            return Err(Error::DuplicateHandlerName(name.to_string()));
        }
        let mut requested = options.resync_period.unwrap_or(dist.default_resync);
        if !requested.is_zero() {
            if requested < MIN_RESYNC_PERIOD {
                tracing::info!(informer = %self.shared.name, handler = %name, ?requested, "resync period raised to the minimum of one second");
                requested = MIN_RESYNC_PERIOD;
            }
            if requested < dist.check_period {
                if dist.started {
                    tracing::info!(informer = %self.shared.name, handler = %name, ?requested, check_period = ?dist.check_period, "resync period raised to the started informer's check period");
                    requested = dist.check_period;
                } else {
                    dist.check_period = requested;
                    let now = tokio::time::Instant::now();
                    for l in &mut dist.listeners {
                        let period = effective_resync_period(l.requested_resync, requested);
                        if period != l.resync_period {
                            l.resync_period = period;
                            l.next_resync = (!period.is_zero()).then(|| now + period);
                        }
                    }
                }
            }
        }
        let runtime = match options.execution {
            HandlerExecution::Thread => None,
            HandlerExecution::Task => Some(
                tokio::runtime::Handle::try_current()
                    .map_err(|_| Error::NoRuntimeForHandler(name.to_string()))?,
            ),
        };
        let resync_period = effective_resync_period(requested, dist.check_period);
        let labels = HandlerLabels { handler: name.to_string() };
        let depth = self.shared.metrics.handler_buffer_depth.get_or_create(&labels).clone();
        let notifications =
            self.shared.metrics.handler_notifications.get_or_create(&labels).clone();
        let hshared = Arc::new(HandlerShared::default());
        let buffer: Arc<Buffer<T, B>> = spawn_handler(
            &name,
            handler,
            depth.clone(),
            hshared.clone(),
            options.panic_delay,
            self.shared.handler_reclaimer(),
            runtime,
        )
        .map_err(Error::Thread)?;
        // The snapshot is taken under the distributor lock: every publication after it is
        // distributed after this handler is in the list, and every publication it includes is
        // skipped for this handler (see `start_after`).
        let snapshot = self.shared.reader.snapshot();
        let start_after = snapshot.publication();
        if !snapshot.is_empty() {
            hshared.pending_initial.fetch_add(1, Ordering::SeqCst);
            notifications.inc();
            buffer.push_all([Message::Replay(snapshot)]);
        }
        dist.listeners.push(Listener {
            id,
            name: name.clone(),
            buffer,
            shared: hshared.clone(),
            start_after,
            requested_resync: requested,
            resync_period,
            next_resync: (!resync_period.is_zero())
                .then(|| tokio::time::Instant::now() + resync_period),
            notifications,
        });
        drop(dist);
        self.shared.resync_changed.notify_one();
        Ok(HandlerRegistration {
            id,
            informer_id: self.shared.id,
            name,
            shared: hshared,
            informer_synced: self.shared.synced.clone(),
            progress: self.shared.progress.subscribe(),
            depth,
        })
    }

    /// Removes a handler: it receives nothing more; notifications still in its buffer are
    /// dropped and its thread ends once the call in progress, if any, returns. Returns at once
    /// (see [`shutdown_event_handler`](Informer::shutdown_event_handler) to wait for the
    /// thread).
    ///
    /// Fails with [`Error::ForeignHandler`] for another informer's registration (client-go
    /// ignores it) and with [`Error::UnknownHandler`] for one already removed (client-go
    /// ignores that too); neither removes anything.
    #[doc(alias = "RemoveEventHandler")]
    pub fn remove_event_handler(&self, registration: &HandlerRegistration) -> Result<()> {
        self.check_owner(registration)?;
        let mut dist = lock(&self.shared.distributor);
        let pos = dist
            .listeners
            .iter()
            .position(|l| l.id == registration.id)
            .ok_or(Error::UnknownHandler(registration.id))?;
        let listener = dist.listeners.remove(pos);
        dist.syncing.remove(&listener.id);
        drop(dist);
        listener.buffer.close(false);
        let labels = HandlerLabels { handler: listener.name.to_string() };
        self.shared.metrics.handler_buffer_depth.remove(&labels);
        self.shared.metrics.handler_notifications.remove(&labels);
        self.shared.resync_changed.notify_one();
        Ok(())
    }

    /// Removes a handler (see [`remove_event_handler`](Informer::remove_event_handler)) and
    /// waits until its thread has ended, so that the handler is called no more and everything
    /// it captured can be torn down (client-go's `ShutDownEventHandler`).
    ///
    /// Never call it from the handler's own callback: it would wait for itself.
    #[doc(alias = "ShutDownEventHandler")]
    pub async fn shutdown_event_handler(&self, registration: &HandlerRegistration) -> Result<()> {
        self.remove_event_handler(registration)?;
        registration.wait_stopped().await;
        Ok(())
    }

    /// Number of registered handlers.
    pub fn handler_count(&self) -> usize {
        lock(&self.shared.distributor).listeners.len()
    }

    /// Waits until the published snapshot includes `resource_version` (numeric comparison),
    /// then returns a snapshot that does: read-your-writes for a controller that just wrote an
    /// object and got this version back (the KEP-5647 idea).
    ///
    /// Versions that are not decimal numbers cannot be ordered: they fail at once with
    /// [`freshness::Error::Unordered`]. Fails with [`freshness::Error::Timeout`] after
    /// `timeout`, and with [`freshness::Error::Stopped`] once the informer is shut down.
    pub async fn wait_for(
        &self,
        resource_version: &str,
        timeout: Duration,
    ) -> freshness::Result<Snapshot<T, B>> {
        let target = parse_resource_version(resource_version)
            .ok_or_else(|| freshness::Error::Unordered(resource_version.to_owned()))?;
        let mut rx = self.shared.progress.subscribe();
        let start = tokio::time::Instant::now();
        match tokio::time::timeout(timeout, rx.wait_for(|p| p.includes(target) || p.stopped)).await
        {
            Ok(Ok(p)) if p.includes(target) => Ok(self.shared.reader.snapshot()),
            Ok(_) => Err(freshness::Error::Stopped),
            Err(_) => Err(freshness::Error::Timeout {
                target: resource_version.to_owned(),
                published: self.shared.progress.borrow().resource_version.clone(),
                waited: start.elapsed(),
            }),
        }
    }

    /// A snapshot under a freshness requirement.
    ///
    /// [`Freshness::AcceptStale`] never waits. [`Freshness::Fresh`] checks the writer's lag
    /// (deltas queued or in flight, age of the oldest): within the informer's
    /// [`FreshnessPolicy`] it returns at once; past it, it waits until everything queued at the
    /// time of the call is published, at most the policy's `max_wait`
    /// ([`freshness::Error::StillStale`]).
    pub async fn read(&self, freshness: Freshness) -> freshness::Result<Snapshot<T, B>> {
        if freshness == Freshness::AcceptStale {
            return Ok(self.shared.reader.snapshot());
        }
        let policy = &self.shared.freshness;
        let stats = self.shared.queue.stats();
        if !policy.exceeded(stats.lag_deltas(), stats.lag_time(Instant::now())) {
            return Ok(self.shared.reader.snapshot());
        }
        let target = stats.last_id;
        let mut rx = self.shared.progress.subscribe();
        let start = tokio::time::Instant::now();
        let caught_up = |p: &Progress| p.applied_through >= target;
        match tokio::time::timeout(policy.max_wait, rx.wait_for(|p| caught_up(p) || p.stopped))
            .await
        {
            Ok(Ok(p)) if caught_up(&p) => Ok(self.shared.reader.snapshot()),
            Ok(_) => Err(freshness::Error::Stopped),
            Err(_) => {
                let stats = self.shared.queue.stats();
                Err(freshness::Error::StillStale {
                    lag_deltas: stats.lag_deltas(),
                    lag: stats.lag_time(Instant::now()),
                    waited: start.elapsed(),
                })
            }
        }
    }

    /// [`read`](Informer::read) with [`Freshness::Fresh`].
    pub async fn fresh_snapshot(&self) -> freshness::Result<Snapshot<T, B>> {
        self.read(Freshness::Fresh).await
    }
}

/// Applies one batch to the store in one publication and builds the notifications.
fn apply_batch<T: Send + Sync + 'static, B: Backend>(
    writer: &mut Writer<T, B>,
    access: ObjectAccess<T>,
    batch: &PoppedBatch<T>,
    rv: &mut RvTracker,
    informer: &str,
) -> (Vec<Note<T>>, u64) {
    let mut notes = Vec::with_capacity(batch.deltas.len());
    let mut wb = writer.batch();
    for delta in &batch.deltas {
        if delta.kind == DeltaType::Deleted {
            wb.delete_key(&delta.key);
            notes.push(Note {
                notification: Notification::Delete { obj: delta.object.clone() },
                sync: false,
                initial: false,
            });
            continue;
        }
        let Some(obj) = delta.object.object() else { continue };
        // The object the upsert replaced is the update's old object: no lookup of its own.
        let old = match wb.upsert(obj.clone()) {
            Ok(old) => old,
            Err(e) => {
                tracing::error!(informer, key = %delta.key, error = %e, "cannot apply delta");
                continue;
            }
        };
        let new_rv = (access.resource_version)(obj).filter(|v| !v.is_empty());
        let note = match old {
            Some(old) => {
                let same_rv = new_rv.is_some() && (access.resource_version)(&old) == new_rv;
                Note {
                    notification: Notification::Update { old, new: obj.clone() },
                    sync: delta.kind == DeltaType::Sync || same_rv,
                    initial: false,
                }
            }
            None => Note {
                notification: Notification::Add {
                    obj: obj.clone(),
                    is_in_initial_list: batch.is_in_initial_list,
                },
                sync: false,
                initial: batch.is_in_initial_list,
            },
        };
        notes.push(note);
    }
    if let Some(marker) = &batch.resource_version {
        rv.offer(marker);
    }
    if let Some(text) = &rv.text {
        wb.set_resource_version(text.clone());
    }
    wb.commit();
    (notes, writer.snapshot().publication())
}

impl<T: Send + Sync + 'static, B: Backend> Distributor<T, B> {
    /// Pushes a batch's notifications to every handler; `applied_through` is the queue
    /// position the batch completes (a resync window closes once it is reached).
    fn distribute(&mut self, publication: u64, applied_through: u64, notes: &[Note<T>]) {
        for l in &self.listeners {
            if publication <= l.start_after {
                continue;
            }
            let syncing = self.syncing.contains(&l.id);
            let mut initial = 0;
            let msgs: Vec<Message<T, B>> = notes
                .iter()
                .filter(|n| !n.sync || syncing)
                .map(|n| {
                    if n.initial {
                        initial += 1;
                    }
                    Message::Notify(n.notification.clone(), n.initial)
                })
                .collect();
            if msgs.is_empty() {
                continue;
            }
            if initial > 0 {
                l.shared.pending_initial.fetch_add(initial, Ordering::AcqRel);
            }
            l.notifications.inc_by(msgs.len() as u64);
            l.buffer.push_all(msgs);
        }
        self.distributed_through = self.distributed_through.max(applied_through);
        if self.sync_until.is_some_and(|until| applied_through >= until) {
            // The resync's deltas are all delivered: updates that keep the resource version
            // (from a later relist, say) no longer reach these handlers.
            self.syncing.clear();
            self.sync_until = None;
        }
    }
}

async fn process_loop<T: Send + Sync + 'static, B: Backend>(shared: Arc<Shared<T, B>>) {
    let mut rv = RvTracker::default();
    let mut deltas_applied: u64 = 0;
    loop {
        let batch = match shared.queue.pop_batch(shared.max_batch).await {
            Ok(batch) => batch,
            Err(_) => break,
        };
        let started = Instant::now();
        // Tokio's clock, read only to see whether a test has paused it (then it stands still
        // while this batch is applied).
        let tokio_began = (!shared.batch_window.is_zero()).then(tokio::time::Instant::now);
        let (notes, publication) = {
            let mut writer = lock(&shared.writer);
            apply_batch(&mut writer, shared.access, &batch, &mut rv, &shared.name)
        };
        let published_at = Instant::now();
        let applied = published_at - started;
        deltas_applied += batch.deltas.len() as u64;
        shared.progress.send_modify(|p| {
            p.resource_version = rv.text.clone();
            p.resource_version_num = rv.num;
            p.publication = publication;
            p.applied_through = batch.applied_through;
            p.deltas_applied = deltas_applied;
            p.published_at = published_at;
        });
        for d in &batch.deltas {
            let staleness = published_at.saturating_duration_since(d.enqueued_at);
            shared.metrics.staleness.observe(staleness.as_secs_f64());
        }
        if let Some(hook) = &shared.on_publish {
            hook(&Published {
                deltas: &batch.deltas,
                publication,
                resource_version: rv.text.as_deref(),
                published_at,
            });
        }
        lock(&shared.distributor).distribute(publication, batch.applied_through, &notes);
        drop(notes);
        shared.queue.done(&batch);
        if !shared.synced.load(Ordering::Acquire) && shared.queue.has_synced() {
            shared.synced.store(true, Ordering::Release);
            shared.progress.send_modify(|p| p.synced = true);
        }
        let elapsed = started.elapsed();
        let m = &shared.metrics;
        m.batch_size.observe(batch.deltas.len() as f64);
        m.batch_duration.observe(elapsed.as_secs_f64());
        m.publications.inc();
        m.deltas_applied.inc_by(batch.deltas.len() as u64);
        if elapsed > shared.slow_batch {
            let depth = shared.queue.len();
            tracing::warn!(
                informer = %shared.name,
                batch_size = batch.deltas.len(),
                queue_depth = depth,
                depth_at_pop = batch.depth_after,
                apply_ms = applied.as_secs_f64() * 1e3,
                total_ms = elapsed.as_secs_f64() * 1e3,
                "slow informer batch: apply, publish and distribute took longer than the threshold"
            );
        }
        if let Some(tokio_began) = tokio_began
            && batch.deltas.len() < shared.max_batch
            && !shared.queue.is_empty()
        {
            // Deltas came in while this batch was applied: the stream is faster than the loop
            // publishes them one at a time, so let the next ones gather until the window that
            // began with this batch ends (deltas that fill a batch meanwhile wait for its end
            // too: the delay stays within the window). A loop that keeps up (nothing queued
            // when it finishes a batch) waits for the next delta and publishes it at once: a
            // sleep costs a wake-up, which on a busy machine can take milliseconds, and saves
            // nothing where publications are few. After a full batch a backlog is waiting: no
            // pause then. A clock that did not move while the batch was applied is paused: no
            // window then.
            let left = shared.batch_window.saturating_sub(started.elapsed());
            if !left.is_zero() && tokio::time::Instant::now() != tokio_began {
                shared.metrics.batch_window_waits.inc();
                sleep_real_time(shared.processing, left).await;
                continue;
            }
        }
        // Let other tasks on this runtime run between batches under sustained load (a thread
        // of its own has none to let run).
        if shared.processing == Processing::Runtime {
            tokio::task::yield_now().await;
        }
    }
    wind_down(&shared);
    tracing::debug!(informer = %shared.name, "processing loop ended: queue closed and drained");
}

/// Sleeps for `duration` of real time, whatever the runtime's clock does and whether or not it
/// has a time driver: on a thread of its own the loop simply sleeps; as a task it hands the
/// sleep to the runtime's blocking pool (if that fails, the runtime is shutting down and the
/// loop goes on at once).
async fn sleep_real_time(processing: Processing, duration: Duration) {
    match processing {
        Processing::DedicatedThread => std::thread::sleep(duration),
        Processing::Runtime => {
            let _ = tokio::task::spawn_blocking(move || std::thread::sleep(duration)).await;
        }
    }
}

/// After the last publication: handlers deliver what they have buffered and end, waiters
/// learn that nothing more comes, the resync timer ends.
fn wind_down<T: Send + Sync + 'static, B: Backend>(shared: &Shared<T, B>) {
    shared.progress.send_modify(|p| p.stopped = true);
    for l in &lock(&shared.distributor).listeners {
        l.buffer.close(true);
    }
    shared.resync_changed.notify_one();
}

async fn resync_loop<T: Send + Sync + 'static, B: Backend>(shared: Arc<Shared<T, B>>) {
    loop {
        if shared.queue.is_closed() {
            return;
        }
        let next = {
            let dist = lock(&shared.distributor);
            dist.listeners.iter().filter_map(|l| l.next_resync).min()
        };
        let changed = shared.resync_changed.notified();
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = changed => continue,
                }
            }
            None => {
                changed.await;
                continue;
            }
        }
        let now = tokio::time::Instant::now();
        let due = {
            let mut dist = lock(&shared.distributor);
            let mut due = HashSet::new();
            for l in &mut dist.listeners {
                if let Some(at) = l.next_resync
                    && at <= now
                    && !l.resync_period.is_zero()
                {
                    due.insert(l.id);
                    l.next_resync = Some(now + l.resync_period);
                }
            }
            if !due.is_empty() {
                dist.syncing = due.clone();
                // Until the resync is queued, no batch closes the window.
                dist.sync_until = Some(u64::MAX);
            }
            due
        };
        if due.is_empty() {
            continue;
        }
        if let Err(e) = shared.queue.resync() {
            tracing::debug!(informer = %shared.name, error = %e, "resync skipped");
            return;
        }
        let until = shared.queue.stats().last_id;
        let mut dist = lock(&shared.distributor);
        if dist.sync_until.is_some() {
            if dist.distributed_through >= until {
                // Nothing was queued, or it is already delivered: the window closes now.
                dist.syncing.clear();
                dist.sync_until = None;
            } else {
                dist.sync_until = Some(until);
            }
        }
    }
}

/// The state of all informers a factory starts, for `wait_for_cache_sync`.
pub(crate) trait Control: Send + Sync {
    fn name(&self) -> &str;
    fn start(&self) -> Result<()>;
    fn is_started(&self) -> bool;
    fn has_synced(&self) -> bool;
    fn subscribe(&self) -> watch::Receiver<Progress>;
    fn shutdown(&self) -> crate::queue::BoxFuture<'_, ()>;
}

impl<T: Send + Sync + 'static, B: Backend> Control for Informer<T, B> {
    fn name(&self) -> &str {
        Informer::name(self)
    }
    fn start(&self) -> Result<()> {
        Informer::start(self)
    }
    fn is_started(&self) -> bool {
        Informer::is_started(self)
    }
    fn has_synced(&self) -> bool {
        Informer::has_synced(self)
    }
    fn subscribe(&self) -> watch::Receiver<Progress> {
        Informer::subscribe(self)
    }
    fn shutdown(&self) -> crate::queue::BoxFuture<'_, ()> {
        Box::pin(Informer::shutdown(self))
    }
}

#[cfg(test)]
mod tests {
    //! `apply_batch` cannot fail through the public API (the queue and the store key objects
    //! with the same accessors, and index functions cannot fail), so the cases of client-go's
    //! `TestProcessDeltasInBatch` where the store refuses some objects are ported here, on a
    //! hand-built batch whose refused object has no name.

    use std::time::Instant;

    use snapinformer_store::{Object, ObjectAccess, StoreBuilder};

    use super::*;
    use crate::delta::Delta;

    struct ConfigMap {
        name: Option<&'static str>,
        /// Which test object this is, even when it has no name.
        id: u32,
    }

    impl Object for ConfigMap {
        fn name(&self) -> Option<&str> {
            self.name
        }
        fn namespace(&self) -> Option<&str> {
            Some("testnamespace")
        }
        fn resource_version(&self) -> Option<&str> {
            None
        }
    }

    /// An `Added` delta for config map `id`; `refused` ones have no name, so the store refuses
    /// them.
    fn added(id: u32, refused: bool) -> Delta<ConfigMap> {
        let name = ["testname1", "testname2", "testname3"][id as usize - 1];
        let obj = Arc::new(ConfigMap { name: (!refused).then_some(name), id });
        let key: Arc<str> = format!("testnamespace/{name}").into();
        Delta::new(DeltaType::Added, key, obj, Instant::now())
    }

    fn batch(deltas: Vec<Delta<ConfigMap>>) -> PoppedBatch<ConfigMap> {
        PoppedBatch {
            entries: deltas.len(),
            deltas,
            is_in_initial_list: true,
            resource_version: None,
            applied_through: 0,
            depth_after: 0,
        }
    }

    /// Applies the batch; returns the ids the store holds and the ids handlers are told of.
    fn apply(deltas: Vec<Delta<ConfigMap>>) -> (Vec<u32>, Vec<u32>) {
        let (mut writer, reader) =
            StoreBuilder::new(ObjectAccess::<ConfigMap>::of()).build().unwrap();
        let access = writer.access();
        let (notes, _) =
            apply_batch(&mut writer, access, &batch(deltas), &mut RvTracker::default(), "test");
        let mut stored: Vec<u32> = reader.snapshot().iter().map(|c| c.id).collect();
        stored.sort_unstable();
        let notified = notes
            .iter()
            .map(|n| match &n.notification {
                Notification::Add { obj, .. } => obj.id,
                other => panic!("only adds expected, got {other:?}"),
            })
            .collect();
        (stored, notified)
    }

    #[test]
    fn process_deltas_in_batch_all_transactions_succeeding_reach_the_listener() {
        assert_eq!(apply(vec![added(1, false)]), (vec![1], vec![1]));
    }

    #[test]
    fn process_deltas_in_batch_all_transactions_failing_trigger_no_listener() {
        assert_eq!(apply(vec![added(1, true)]), (vec![], vec![]));
    }

    #[test]
    fn process_deltas_in_batch_partial_failure_notifies_only_the_successful_events_1() {
        assert_eq!(apply(vec![added(1, false), added(2, true)]), (vec![1], vec![1]));
    }

    #[test]
    fn process_deltas_in_batch_partial_failure_notifies_only_the_successful_events_2() {
        let got = apply(vec![added(1, false), added(2, true), added(3, false)]);
        assert_eq!(got, (vec![1, 3], vec![1, 3]));
    }

    #[test]
    fn handler_periods_are_raised_to_the_check_period_and_zero_means_none() {
        let s = Duration::from_secs;
        assert_eq!(effective_resync_period(s(0), s(10)), s(0));
        assert_eq!(effective_resync_period(s(5), s(10)), s(10));
        assert_eq!(effective_resync_period(s(30), s(10)), s(30));
        // Without a check period the handler's own period holds (client-go would ignore it).
        assert_eq!(effective_resync_period(s(30), s(0)), s(30));
    }
}
