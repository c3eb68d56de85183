//! The controller: sources of keys, the work queue, the workers, the reconcile context, the
//! outcomes, graceful shutdown.

use std::{
    any::TypeId,
    fmt,
    future::Future,
    panic::AssertUnwindSafe,
    pin::Pin,
    sync::{Arc, RwLock},
    time::Duration,
};

use futures::FutureExt;
use kube::Resource;
use prometheus_client::registry::Registry;
use snapinformer_core::{
    HandlerExecution, HandlerOptions, HandlerRegistration, Informer, Notification, WorkQueue,
    workqueue::{TokioClock, WorkQueueConfig, default_controller_rate_limiter},
};
use snapinformer_store::Backend;
use tokio::{sync::watch, task::JoinSet, time::Instant};

use crate::{
    ObjectKey, Tracked, Writes,
    cache::VersionedCache,
    expectations::{Expectations, Pending},
    metrics::{Metrics, WriteOutcome},
    shared::{Caches, OwnerMatch, Shared},
};

/// Errors of a controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An event handler could not be registered on an informer.
    #[error("cannot register the controller's event handler: {0}")]
    Handler(#[from] snapinformer_core::informer::Error),
    /// [`Controller::run`] was called outside a Tokio runtime.
    #[error("a controller runs inside a Tokio runtime")]
    NoRuntime,
}

/// `Result` with the controller [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the runtime does when a read-your-writes wait times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnTimeout {
    /// Reconcile anyway (the context says the wait timed out) and forget the versions waited
    /// for: a cache that never catches up delays each reconcile of the key by the timeout once,
    /// never blocks it.
    #[default]
    Reconcile,
    /// Do not reconcile now: requeue the key through the queue's rate limiter (its backoff
    /// grows with each timeout) and wait again next time.
    Requeue,
}

/// A controller's settings.
#[derive(Debug, Clone)]
#[must_use]
pub struct Config {
    /// Workers reconciling at once (distinct keys; one key is never reconciled twice at once).
    pub workers: usize,
    /// Read-your-writes: before reconciling a key, wait until the caches show the versions the
    /// key's last writes produced. On by default.
    pub read_your_writes: bool,
    /// The longest a reconcile waits for its last writes to become visible.
    pub ryw_timeout: Duration,
    /// What happens when that wait times out.
    pub ryw_timeout_policy: OnTimeout,
    /// How long unobserved expectations of a key count before they expire (client-go's
    /// `ExpectationsTimeout`: 5 minutes).
    pub expectations_timeout: Duration,
    /// The longest a graceful shutdown waits for running reconciles; then they are cancelled.
    pub shutdown_timeout: Duration,
    /// Where the controller's event handlers run (they look at the object and queue keys, and
    /// never block): a thread each (the default) or a task each on the runtime the controller
    /// runs on ([`HandlerExecution::Task`]).
    pub handler_execution: HandlerExecution,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: 2,
            read_your_writes: true,
            ryw_timeout: Duration::from_secs(5),
            ryw_timeout_policy: OnTimeout::Reconcile,
            expectations_timeout: Duration::from_secs(300),
            shutdown_timeout: Duration::from_secs(30),
            handler_execution: HandlerExecution::Thread,
        }
    }
}

impl Config {
    /// Sets the number of workers (at least 1).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Turns read-your-writes on or off.
    pub fn read_your_writes(mut self, on: bool) -> Self {
        self.read_your_writes = on;
        self
    }

    /// Sets the read-your-writes timeout.
    pub fn ryw_timeout(mut self, timeout: Duration) -> Self {
        self.ryw_timeout = timeout;
        self
    }

    /// Sets what a read-your-writes timeout does.
    pub fn ryw_timeout_policy(mut self, policy: OnTimeout) -> Self {
        self.ryw_timeout_policy = policy;
        self
    }

    /// Sets how long unobserved expectations count.
    pub fn expectations_timeout(mut self, timeout: Duration) -> Self {
        self.expectations_timeout = timeout;
        self
    }

    /// Sets the graceful-shutdown bound.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Sets where the controller's event handlers run.
    pub fn handler_execution(mut self, execution: HandlerExecution) -> Self {
        self.handler_execution = execution;
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Requeue {
    After(Duration),
    Backoff,
    Never,
}

/// What to do with a key after its reconcile (kube-runtime's `Action`, plus rate-limited
/// backoff through the work queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Action(Requeue);

impl Action {
    /// Reconcile the key again after `after`, even without an event.
    pub const fn requeue(after: Duration) -> Self {
        Action(Requeue::After(after))
    }

    /// Reconcile the key again only when an event queues it.
    pub const fn await_change() -> Self {
        Action(Requeue::Never)
    }

    /// Reconcile the key again after the queue's rate limiter's delay for it (per-key
    /// exponential backoff, 5 ms doubling to 1000 s, and an overall 10 per second by default).
    /// The default outcome of a failed reconcile.
    pub const fn backoff() -> Self {
        Action(Requeue::Backoff)
    }

    /// The delay of [`requeue`](Action::requeue), if that is what this is.
    pub fn requeue_after(&self) -> Option<Duration> {
        match self.0 {
            Requeue::After(d) => Some(d),
            _ => None,
        }
    }
}

/// How read-your-writes went before a reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadYourWrites {
    /// Read-your-writes is off ([`Config::read_your_writes`]).
    Off,
    /// The key had no recorded writes to wait for.
    NothingWritten,
    /// The caches already showed the key's last writes.
    AlreadyVisible,
    /// The reconcile waited `waited` until the caches showed the key's last writes.
    CaughtUp {
        /// How long it waited.
        waited: Duration,
    },
    /// The wait gave up: the cache `cache` did not show `version` within the timeout (or
    /// stopped). The reconcile runs on a cache that may not show its own last write.
    TimedOut {
        /// How long it waited.
        waited: Duration,
        /// The cache that lagged.
        cache: String,
        /// The version it did not show.
        version: u64,
        /// Whether the cache stopped rather than timed out.
        stopped: bool,
    },
}

impl ReadYourWrites {
    /// Whether the caches are known to show every write the key made (or nothing was to be
    /// waited for).
    pub fn is_fresh(&self) -> bool {
        !matches!(self, ReadYourWrites::TimedOut { .. } | ReadYourWrites::Off)
    }
}

/// What a reconcile gets from the runtime: the key, the primary object as the cache shows it
/// after the read-your-writes wait, a way to write that records versions, and the key's
/// expectations.
pub struct Context<P> {
    key: ObjectKey,
    object: Option<Arc<P>>,
    ryw: ReadYourWrites,
    shared: Arc<Shared>,
}

impl<P> fmt::Debug for Context<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("key", &self.key)
            .field("object", &self.object.is_some())
            .field("read_your_writes", &self.ryw)
            .finish_non_exhaustive()
    }
}

impl<P> Context<P> {
    /// The key being reconciled.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The primary object, as the primary cache shows it (read after the read-your-writes
    /// wait); `None` if the cache does not have it (deleted) or no primary cache is set.
    pub fn object(&self) -> Option<&Arc<P>> {
        self.object.as_ref()
    }

    /// How the read-your-writes wait went.
    pub fn read_your_writes(&self) -> &ReadYourWrites {
        &self.ryw
    }

    /// Wraps `writes` (a `kube::Api<K>`, or any [`Writes`]) so that the writes it makes count
    /// for this key: their versions are waited for before the key's next reconcile, and
    /// creates and deletes of owned objects are expected until observed.
    pub fn track<K: Resource + 'static, W: Writes<K>>(&self, writes: W) -> Tracked<K, W> {
        Tracked::new(writes, self.key.clone(), self.shared.clone())
    }

    /// Creates and deletes this key made that its owned caches have not shown yet.
    pub fn expectations(&self) -> Pending {
        self.shared.pending(&self.key)
    }

    /// Whether every create and delete this key made has been observed (or expired): the
    /// moment a controller that counts objects may act on the count (client-go's
    /// `SatisfiedExpectations`).
    pub fn expectations_satisfied(&self) -> bool {
        self.expectations().is_empty()
    }
}

/// Counts of what a controller did, for tests and status pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Reconciles that returned `Ok`.
    pub successes: u64,
    /// Reconciles that returned `Err`.
    pub errors: u64,
    /// Reconciles that panicked.
    pub panics: u64,
    /// Reconciles that waited for their last writes.
    pub ryw_waits: u64,
    /// Read-your-writes waits that timed out.
    pub ryw_timeouts: u64,
    /// Reconciles put off after a timeout ([`OnTimeout::Requeue`]).
    pub ryw_requeues: u64,
    /// Writes of a type no registered cache shows.
    pub untracked_writes: u64,
    /// Expected creates not observed yet, over all keys.
    pub expected_adds: i64,
    /// Expected deletes not observed yet, over all keys.
    pub expected_deletes: i64,
    /// Keys whose expectations expired.
    pub expectations_expired: u64,
    /// Creates through [`Tracked`] that succeeded.
    pub created: u64,
    /// Deletes through [`Tracked`] that succeeded.
    pub deleted: u64,
    /// Writes through [`Tracked`] that succeeded, every verb.
    pub writes: u64,
    /// Creates answered 409 AlreadyExists: the object existed, but the cache the decision was
    /// made on did not show it.
    pub already_exists: u64,
    /// Other writes answered 409 Conflict (an update on an outdated resource version).
    pub write_conflicts: u64,
    /// Writes answered 404 Not Found.
    pub not_found: u64,
    /// Writes that failed otherwise (network, 5xx, 429, invalid, ...).
    pub write_errors: u64,
}

/// A handle to a controller, to feed it from custom event sources and to stop it. Cheap to
/// clone.
pub struct Handle<P> {
    shared: Arc<Shared>,
    _primary: std::marker::PhantomData<fn() -> P>,
}

impl<P> Clone for Handle<P> {
    fn clone(&self) -> Self {
        Handle { shared: self.shared.clone(), _primary: std::marker::PhantomData }
    }
}

impl<P> fmt::Debug for Handle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle").field("controller", &self.shared.name).finish()
    }
}

impl<P> Handle<P> {
    /// Queues `key` for a reconcile.
    pub fn enqueue(&self, key: ObjectKey) {
        self.shared.queue.add(key);
    }

    /// Queues `key` after `delay`.
    pub fn enqueue_after(&self, key: ObjectKey, delay: Duration) {
        self.shared.queue.add_after(key, delay);
    }

    /// An owned object appeared (a custom source's add event): lowers its owner's expected
    /// creates and queues the owner.
    pub fn owned_added<C: Resource>(&self, obj: &C) {
        self.shared.owned_added(obj);
    }

    /// An owned object changed: queues its owner(s); a newly terminating object counts as an
    /// observed delete.
    pub fn owned_updated<C: Resource>(&self, old: &C, new: &C) {
        self.shared.owned_updated(old, new);
    }

    /// An owned object was added or changed, and its previous state is unknown (a source that
    /// gives no old object, such as kube-rs' watcher, or a cache that does not look it up):
    /// queues its owner; a terminating object counts as an observed delete (once per object,
    /// however often it is seen). It does not lower expected creates: use
    /// [`owned_added`](Handle::owned_added) for an object known to be new.
    pub fn owned_changed<C: Resource>(&self, obj: &C) {
        self.shared.owned_changed(obj);
    }

    /// An owned object is gone: its expected delete is observed and its owner queued.
    pub fn owned_deleted<C: Resource>(&self, obj: &C) {
        self.shared.owned_deleted(Some(obj), None);
    }

    /// The owner key an owned object maps to: its controller owner reference, if of the
    /// primary kind.
    pub fn owner_of<C: Resource>(&self, obj: &C) -> Option<ObjectKey> {
        self.shared.owner.owner(obj.meta())
    }

    /// Begins a graceful shutdown: workers take no more keys, running reconciles finish
    /// (bounded by [`Config::shutdown_timeout`]), then [`Controller::run`] returns.
    pub fn shutdown(&self) {
        self.shared.shutdown();
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &WorkQueue<ObjectKey> {
        &self.shared.queue
    }

    /// What the controller did so far.
    pub fn stats(&self) -> Stats {
        let m = &self.shared.metrics;
        let result =
            |r| m.reconciles.get_or_create(&crate::metrics::ResultLabel { result: r }).get();
        Stats {
            successes: result("success"),
            errors: result("error"),
            panics: result("panic"),
            ryw_waits: m.ryw_waits.get(),
            ryw_timeouts: m.ryw_timeouts.get(),
            ryw_requeues: m.ryw_requeues.get(),
            untracked_writes: m.ryw_untracked_writes.get(),
            expected_adds: m.expectations.adds.get(),
            expected_deletes: m.expectations.deletes.get(),
            expectations_expired: m.expectations.expired.get(),
            created: m.writes_with(Some("create"), WriteOutcome::Success),
            deleted: m.writes_with(Some("delete"), WriteOutcome::Success),
            writes: m.writes_with(None, WriteOutcome::Success),
            already_exists: m.writes_with(None, WriteOutcome::AlreadyExists),
            write_conflicts: m.writes_with(None, WriteOutcome::Conflict),
            not_found: m.writes_with(None, WriteOutcome::NotFound),
            write_errors: m.writes_with(None, WriteOutcome::Error),
        }
    }

    /// The versions `key`'s last writes produced and its next reconcile will wait for, per
    /// cache name.
    pub fn pending_writes(&self, key: &ObjectKey) -> Vec<(String, u64)> {
        let written = self.shared.written_by(key);
        let caches = self.shared.caches.read().unwrap_or_else(|e| e.into_inner());
        written.into_iter().map(|(i, v)| (caches.all[i].name().to_owned(), v)).collect()
    }

    /// What `key` still expects to observe.
    pub fn expectations(&self, key: &ObjectKey) -> Pending {
        self.shared.pending(key)
    }
}

/// Registers an event handler on an informer when the controller starts; returns how to
/// remove it.
type Wiring = Box<dyn FnOnce(&Arc<Shared>) -> Result<Unwire> + Send>;
type Unwire = Box<dyn FnOnce() + Send>;
type Lookup<P> = Arc<dyn Fn(&ObjectKey) -> Option<Arc<P>> + Send + Sync>;
type ShutdownTrigger = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A controller in the spirit of kube-runtime's `Controller`, on snapinformer's informers and
/// work queue, with read-your-writes built in. See the [crate documentation](crate).
///
/// Build it with [`new`](Controller::new), add sources ([`for_informer`](Controller::for_informer),
/// [`owns`](Controller::owns), [`watches`](Controller::watches), or custom caches with
/// [`for_cache`](Controller::for_cache), [`owns_cache`](Controller::owns_cache),
/// [`cache_for`](Controller::cache_for) and events through a [`Handle`]), then
/// [`run`](Controller::run) it.
pub struct Controller<P> {
    shared: Arc<Shared>,
    wirings: Vec<Wiring>,
    lookup: Option<Lookup<P>>,
    shutdown_on: Option<ShutdownTrigger>,
}

impl<P> fmt::Debug for Controller<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.shared.name)
            .field("config", &self.shared.config())
            .field("sources", &self.wirings.len())
            .finish_non_exhaustive()
    }
}

/// Whether `P` is a cluster-scoped kind (its owned objects' owner keys have no namespace).
fn cluster_scoped<P: Resource>() -> bool
where
    P::Scope: 'static,
{
    TypeId::of::<P::Scope>() == TypeId::of::<kube::core::ClusterResourceScope>()
}

/// What the handlers do with each informer event.
#[derive(Clone, Copy)]
enum Role {
    Primary,
    Owned,
}

impl<P> Controller<P>
where
    P: Resource<DynamicType = ()> + Send + Sync + 'static,
    P::Scope: 'static,
{
    /// A controller named `name` (metrics, logs, the work queue's name) for primary objects of
    /// kind `P`, with the default [`Config`] and the default controller rate limiter, on
    /// Tokio's clock.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Self::with_queue(
            WorkQueueConfig::new(name)
                .rate_limiter(default_controller_rate_limiter::<ObjectKey>())
                .clock(TokioClock),
        )
    }

    /// A controller whose work queue is built from `queue` (its name names the controller; its
    /// rate limiter drives [`Action::backoff`]; its clock should be Tokio's for tests with a
    /// paused clock).
    pub fn with_queue(queue: WorkQueueConfig<ObjectKey>) -> Self {
        let name = queue.name().to_owned();
        let config = Config::default();
        let metrics = Metrics::default();
        let shared = Arc::new(Shared {
            queue: WorkQueue::new(queue),
            expectations: Expectations::new(metrics.expectations.clone()),
            config: RwLock::new(config),
            caches: RwLock::new(Caches::default()),
            owner: OwnerMatch {
                kind: P::kind(&()).into_owned(),
                api_version: P::api_version(&()).into_owned(),
                cluster_scoped: cluster_scoped::<P>(),
            },
            written: Default::default(),
            metrics,
            stop: watch::Sender::new(false),
            name,
        });
        Controller { shared, wirings: Vec::new(), lookup: None, shutdown_on: None }
    }

    /// Uses `config`.
    pub fn config(self, config: Config) -> Self {
        let workers = config.workers;
        let config = config.workers(workers);
        *self.shared.config.write().unwrap_or_else(|e| e.into_inner()) = config;
        self
    }

    /// Sets the number of workers.
    pub fn workers(self, workers: usize) -> Self {
        let config = self.shared.config().workers(workers);
        self.config(config)
    }

    /// A handle to feed and stop the controller.
    pub fn handle(&self) -> Handle<P> {
        Handle { shared: self.shared.clone(), _primary: std::marker::PhantomData }
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Registers the controller's metrics and its work queue's in `registry` (see
    /// [`crate::metrics`]).
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.shared.metrics.register(registry, &self.shared.name);
        self.shared.queue.register_metrics(registry);
    }

    /// Stops gracefully (as [`Handle::shutdown`]) once `trigger` completes.
    pub fn graceful_shutdown_on(
        mut self,
        trigger: impl Future<Output = ()> + Send + 'static,
    ) -> Self {
        self.shutdown_on = Some(Box::pin(trigger));
        self
    }

    /// The primary informer: its events queue the object's own key, writes of `P` wait for
    /// it, and [`Context::object`] reads the object from it.
    pub fn for_informer<B: Backend>(mut self, informer: &Informer<P, B>) -> Self {
        self.shared.register_cache(TypeId::of::<P>(), Arc::new(informer.clone()), false);
        let reader = informer.reader();
        self.lookup = Some(Arc::new(move |key: &ObjectKey| {
            reader.snapshot().get_by_key(key.as_str()).cloned()
        }));
        self.wire(informer, Role::Primary);
        self
    }

    /// A custom primary cache: writes of `P` wait for `cache`, and [`Context::object`] reads
    /// with `lookup`. Its events reach the controller through [`Handle::enqueue`].
    pub fn for_cache(
        mut self,
        cache: impl VersionedCache,
        lookup: impl Fn(&ObjectKey) -> Option<Arc<P>> + Send + Sync + 'static,
    ) -> Self {
        self.shared.register_cache(TypeId::of::<P>(), Arc::new(cache), false);
        self.lookup = Some(Arc::new(lookup));
        self
    }

    /// An informer of objects the primary objects control: an event of an object queues the
    /// key of its controller (the owner reference with `controller: true`, if it is a `P`),
    /// adds and deletes lower that key's expectations, and writes of `C` wait for it.
    pub fn owns<C, B>(mut self, informer: &Informer<C, B>) -> Self
    where
        C: Resource + Send + Sync + 'static,
        B: Backend,
    {
        self.shared.register_cache(TypeId::of::<C>(), Arc::new(informer.clone()), true);
        self.wire(informer, Role::Owned);
        self
    }

    /// A custom cache of owned objects of type `C`: writes of `C` wait for it and count as
    /// expectations; its events reach the controller through [`Handle::owned_added`],
    /// [`Handle::owned_updated`] and [`Handle::owned_deleted`].
    pub fn owns_cache<C: Resource + 'static>(self, cache: impl VersionedCache) -> Self {
        self.shared.register_cache(TypeId::of::<C>(), Arc::new(cache), true);
        self
    }

    /// A custom cache showing objects of type `C`: writes of `C` wait for it (no events, no
    /// expectations).
    pub fn cache_for<C: Resource + 'static>(self, cache: impl VersionedCache) -> Self {
        self.shared.register_cache(TypeId::of::<C>(), Arc::new(cache), false);
        self
    }

    /// Any other informer: each event queues the keys `mapper` returns for the object (for a
    /// delete with an unknown final state, nothing). Writes of `C` wait for it.
    pub fn watches<C, B>(
        mut self,
        informer: &Informer<C, B>,
        mapper: impl Fn(&C) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        C: Resource + Send + Sync + 'static,
        B: Backend,
    {
        self.shared.register_cache(TypeId::of::<C>(), Arc::new(informer.clone()), false);
        let informer = informer.clone();
        let mapper = Arc::new(mapper);
        self.wirings.push(Box::new(move |shared: &Arc<Shared>| {
            let execution = shared.config().handler_execution;
            let shared = shared.clone();
            let handler = move |n: &Notification<C>| {
                let obj = match n {
                    Notification::Add { obj, .. } => Some(obj),
                    Notification::Update { new, .. } => Some(new),
                    Notification::Delete { obj } => obj.object(),
                };
                for key in obj.map(|o| mapper(o)).unwrap_or_default() {
                    shared.queue.add(key);
                }
            };
            register(&informer, handler, "watches", execution)
        }));
        self
    }

    fn wire<C, B>(&mut self, informer: &Informer<C, B>, role: Role)
    where
        C: Resource + Send + Sync + 'static,
        B: Backend,
    {
        let informer = informer.clone();
        self.wirings.push(Box::new(move |shared: &Arc<Shared>| {
            let execution = shared.config().handler_execution;
            let shared = shared.clone();
            let handler = move |n: &Notification<C>| match (role, n) {
                (Role::Primary, n) => {
                    let obj = match n {
                        Notification::Add { obj, .. } => Some(obj.as_ref()),
                        Notification::Update { new, .. } => Some(new.as_ref()),
                        Notification::Delete { obj } => obj.object().map(|o| o.as_ref()),
                    };
                    let key = obj.and_then(ObjectKey::of).or_else(|| match n {
                        Notification::Delete {
                            obj: snapinformer_core::DeltaObject::Tombstone(t),
                        } => Some(ObjectKey::parse(&t.key)),
                        _ => None,
                    });
                    if let Some(key) = key {
                        shared.queue.add(key);
                    }
                }
                (Role::Owned, Notification::Add { obj, .. }) => shared.owned_added(obj.as_ref()),
                (Role::Owned, Notification::Update { old, new }) => {
                    shared.owned_updated(old.as_ref(), new.as_ref())
                }
                (Role::Owned, Notification::Delete { obj }) => {
                    let key = match obj {
                        snapinformer_core::DeltaObject::Tombstone(t) => {
                            Some(ObjectKey::parse(&t.key))
                        }
                        snapinformer_core::DeltaObject::Object(_) => None,
                    };
                    shared.owned_deleted(obj.object().map(|o| o.as_ref()), key)
                }
            };
            let role = match role {
                Role::Primary => "primary",
                Role::Owned => "owns",
            };
            register(&informer, handler, role, execution)
        }));
    }

    /// Runs the controller until [`Handle::shutdown`] (or the
    /// [`graceful_shutdown_on`](Controller::graceful_shutdown_on) trigger): registers the event
    /// handlers, then `workers` tasks take keys from the queue and, per key, wait for the
    /// key's last writes to be visible, call `reconcile` and act on its [`Action`] (or, on an
    /// error, on `error_policy`'s).
    ///
    /// A reconcile that panics is counted and its key backed off. On shutdown, workers stop
    /// taking keys, running reconciles get [`Config::shutdown_timeout`] to finish (then they
    /// are cancelled), the queue shuts down and the handlers are removed. When it returns, no
    /// reconcile code runs any more (a reconcile runs inside its worker's task, so cancelling
    /// the worker drops it; one in the middle of a step finishes that step first). Returns
    /// whether every running reconcile finished.
    pub async fn run<D, E, R, F, EP>(
        mut self,
        reconcile: R,
        error_policy: EP,
        data: Arc<D>,
    ) -> Result<Stopped>
    where
        D: Send + Sync + 'static,
        E: fmt::Display + Send + 'static,
        R: Fn(Context<P>, Arc<D>) -> F + Send + Sync + 'static,
        F: Future<Output = std::result::Result<Action, E>> + Send + 'static,
        EP: Fn(&ObjectKey, &E, &Arc<D>) -> Action + Send + Sync + 'static,
    {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::NoRuntime);
        }
        let shared = self.shared.clone();
        let mut unwire: Vec<Unwire> = Vec::new();
        for wiring in self.wirings.drain(..) {
            match wiring(&shared) {
                Ok(u) => unwire.push(u),
                Err(e) => {
                    unwire.into_iter().for_each(|u| u());
                    return Err(e);
                }
            }
        }
        let worker = Arc::new(Worker {
            shared: shared.clone(),
            lookup: self.lookup.take(),
            reconcile,
            error_policy,
            data,
        });
        let config = shared.config();
        let mut workers = JoinSet::new();
        for _ in 0..config.workers {
            workers.spawn(worker.clone().work());
        }
        let mut stop = shared.stop.subscribe();
        let trigger = self.shutdown_on.take();
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {}
            () = async move {
                match trigger {
                    Some(t) => t.await,
                    None => std::future::pending().await,
                }
            } => shared.shutdown(),
        }
        tracing::debug!(controller = %shared.name, "shutting down: waiting for running reconciles");
        let drained = tokio::time::timeout(config.shutdown_timeout, async {
            while workers.join_next().await.is_some() {}
        })
        .await
        .is_ok();
        let cancelled = workers.len();
        if !drained {
            tracing::warn!(controller = %shared.name, cancelled,
                "reconciles still running after the shutdown timeout were cancelled");
            workers.shutdown().await;
        }
        shared.queue.shut_down();
        unwire.into_iter().for_each(|u| u());
        Ok(Stopped { drained, cancelled })
    }
}

/// How [`Controller::run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Whether every reconcile running at shutdown finished within the timeout.
    pub drained: bool,
    /// Workers whose reconcile was cancelled at the timeout.
    pub cancelled: usize,
}

fn register<C, B, H>(
    informer: &Informer<C, B>,
    handler: H,
    role: &str,
    execution: HandlerExecution,
) -> Result<Unwire>
where
    C: Send + Sync + 'static,
    B: Backend,
    H: Fn(&Notification<C>) + Send + 'static,
{
    // Handler names must be unique per informer: several controllers may share one.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let registration: HandlerRegistration = informer.add_event_handler_with(
        handler,
        HandlerOptions::new().name(format!("controller-{role}-{n}")).execution(execution),
    )?;
    let informer = informer.clone();
    Ok(Box::new(move || {
        if let Err(e) = informer.remove_event_handler(&registration) {
            tracing::debug!(error = %e, "controller handler already gone");
        }
    }))
}

struct Worker<P, R, EP, D> {
    shared: Arc<Shared>,
    lookup: Option<Lookup<P>>,
    reconcile: R,
    error_policy: EP,
    data: Arc<D>,
}

/// The text of a panic's payload, for the log.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

impl<P, R, EP, D, E, F> Worker<P, R, EP, D>
where
    P: Send + Sync + 'static,
    D: Send + Sync + 'static,
    E: fmt::Display + Send + 'static,
    R: Fn(Context<P>, Arc<D>) -> F + Send + Sync + 'static,
    F: Future<Output = std::result::Result<Action, E>> + Send + 'static,
    EP: Fn(&ObjectKey, &E, &Arc<D>) -> Action + Send + Sync + 'static,
{
    async fn work(self: Arc<Self>) {
        let mut stop = self.shared.stop.subscribe();
        loop {
            if self.shared.is_stopping() {
                return;
            }
            let key = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                key = self.shared.queue.get_async() => match key {
                    Some(key) => key,
                    None => return,
                },
            };
            self.process(&key).await;
            self.shared.queue.done(&key);
        }
    }

    async fn process(&self, key: &ObjectKey) {
        let shared = &self.shared;
        let ryw = shared.await_writes(key).await;
        if matches!(ryw, ReadYourWrites::TimedOut { .. })
            && shared.config().ryw_timeout_policy == OnTimeout::Requeue
        {
            shared.metrics.ryw_requeues.inc();
            shared.queue.add_rate_limited(key.clone());
            return;
        }
        let object = self.lookup.as_ref().and_then(|l| l(key));
        let ctx = Context { key: key.clone(), object, ryw, shared: shared.clone() };
        let started = Instant::now();
        // The reconcile runs inside this worker's task, its panics caught: when a shutdown
        // cancels the worker, the reconcile is dropped with it, so none keeps running after
        // `run` returns.
        let data = self.data.clone();
        let outcome =
            match std::panic::catch_unwind(AssertUnwindSafe(|| (self.reconcile)(ctx, data))) {
                Ok(reconcile) => AssertUnwindSafe(reconcile).catch_unwind().await,
                Err(panic) => Err(panic),
            };
        shared.metrics.reconcile_duration.observe(started.elapsed().as_secs_f64());
        let action = match outcome {
            Ok(Ok(action)) => {
                shared.metrics.reconciled("success");
                shared.queue.forget(key);
                action
            }
            Ok(Err(e)) => {
                shared.metrics.reconciled("error");
                tracing::debug!(controller = %shared.name, %key, error = %e, "reconcile failed");
                (self.error_policy)(key, &e, &self.data)
            }
            Err(panic) => {
                shared.metrics.reconciled("panic");
                tracing::error!(controller = %shared.name, %key, panic = panic_message(&*panic),
                    "reconcile panicked");
                Action::backoff()
            }
        };
        match action.0 {
            Requeue::After(d) => shared.queue.add_after(key.clone(), d),
            Requeue::Backoff => shared.queue.add_rate_limited(key.clone()),
            Requeue::Never => {}
        }
    }
}

/// The error policy most controllers want: back off per key through the queue's rate limiter.
pub fn backoff_on_error<E, D>(_key: &ObjectKey, _error: &E, _data: &Arc<D>) -> Action {
    Action::backoff()
}
