//! Delta queues: client-go's `DeltaFIFO` and `RealFIFO`, with batched pop and no lock held while
//! a popped batch is processed.
//!
//! Both queues keep their state behind one small mutex that is held only for the duration of a
//! queue operation (an append, a pop, a relist's bookkeeping); it is never held while the popped
//! batch is applied to the store or handlers run, so a producer is never blocked by processing.
//! Readers of the store never touch it.
//!
//! # Known objects and the in-flight batch
//!
//! `replace`, `resync` and (for [`DeltaFifo`]) `delete` consult what the consumer already
//! "knows" (client-go's `knownObjects`): normally the store's latest published snapshot
//! ([`KnownObjects`] is implemented for the store's [`Reader`]). client-go holds the queue lock
//! while it processes, so its known objects are always in step with the queue. These queues do
//! not, so they overlay the batch that is popped but not yet acknowledged with
//! [`Queue::done`] on top of the known objects: a key in that batch is known with its newest
//! state, or unknown if the batch deletes it. Published or not, the combined view is exact.

mod delta_fifo;
mod real_fifo;

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Condvar, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use snapinformer_store::{Backend, KeyFn, ObjectAccess, Reader, TransformFn, UserError};
use tokio::sync::Notify;

pub use delta_fifo::DeltaFifo;
pub use real_fifo::RealFifo;

use crate::delta::{Delta, DeltaObject, DeltaType, PoppedBatch};

/// Errors of the queues.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The queue was closed: nothing more can be queued, and a pop fails once it is empty.
    #[error("the delta queue is closed")]
    #[doc(alias = "ErrFIFOClosed")]
    Closed,
    /// The object has no key: no name, or the queue's custom key function failed (client-go's
    /// `KeyError`).
    #[error("cannot queue object: {0}")]
    #[doc(alias = "KeyError")]
    Key(#[from] snapinformer_store::Error),
    /// The queue's transform ([`QueueOptions::transform`]) refused the object.
    #[error("cannot queue object: transforming: {0}")]
    Transform(#[source] UserError),
}

impl Error {
    fn from_transform(e: snapinformer_store::Error) -> Self {
        match e {
            snapinformer_store::Error::Transform(e) => Error::Transform(e),
            other => Error::Key(other),
        }
    }
}

/// `Result` with the queue [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed future, as returned by the object-safe async methods of [`Queue`].
pub type BoxFuture<'a, O> = Pin<Box<dyn Future<Output = O> + Send + 'a>>;

/// What the consumer of a queue already knows: the store's objects (client-go's
/// `KeyListerGetter`). Used by `replace` (tombstones), `resync` (`Sync` deltas) and
/// [`DeltaFifo`]'s `delete` (dropping deletes of unknown keys).
pub trait KnownObjects<T>: Send + Sync + 'static {
    /// The known object under `key`.
    fn get(&self, key: &str) -> Option<Arc<T>>;
    /// Calls `f` with every known key and object, from one consistent view.
    fn for_each(&self, f: &mut dyn FnMut(&Arc<str>, &Arc<T>));
}

impl<T: Send + Sync + 'static, B: Backend> KnownObjects<T> for Reader<T, B> {
    fn get(&self, key: &str) -> Option<Arc<T>> {
        self.snapshot().get_by_key(key).cloned()
    }

    fn for_each(&self, f: &mut dyn FnMut(&Arc<str>, &Arc<T>)) {
        let snap = self.snapshot();
        for (k, v) in snap.entries() {
            f(k, v);
        }
    }
}

/// A consumer that knows nothing: every key is unknown. With it, `resync` emits nothing,
/// `replace` tombstones only queued keys, and [`DeltaFifo`] drops deletes of keys not queued.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoKnownObjects;

impl<T: Send + Sync + 'static> KnownObjects<T> for NoKnownObjects {
    fn get(&self, _key: &str) -> Option<Arc<T>> {
        None
    }
    fn for_each(&self, _f: &mut dyn FnMut(&Arc<str>, &Arc<T>)) {}
}

/// Configuration shared by both queues.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[must_use]
pub struct QueueConfig {
    /// Bound on the number of queued deltas. When reached, `add`, `update` and `delete` block
    /// the producer until the consumer pops (each wait is counted in [`QueueStats`]); async
    /// producers should await [`Queue::wait_capacity`] first. `replace`, `resync` and
    /// `bookmark` never block, so a relist may overshoot the bound. `None`: unbounded.
    pub max_depth: Option<usize>,
}

impl QueueConfig {
    /// An unbounded queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bounds the queue to `max_depth` deltas (see [`QueueConfig::max_depth`]).
    pub fn max_depth(mut self, max_depth: usize) -> Self {
        self.max_depth = Some(max_depth.max(1));
        self
    }
}

/// Everything a queue can be built with (client-go's `DeltaFIFOOptions` and `RealFIFOOptions`).
#[must_use]
pub struct QueueOptions<T> {
    /// Depth bound (see [`QueueConfig`]).
    pub config: QueueConfig,
    /// How objects are keyed (client-go's `KeyFunction`); default `namespace/name`. It must be
    /// the key function of the store the queue feeds (`Writer::key_fn`). Relist tombstones keep
    /// their key and are never passed to it.
    pub key_fn: KeyFn<T>,
    /// Applied to each object as it is queued (client-go's `Transformer`), where client-go
    /// applies it: objects passed to `add`, `update`, `delete` and `replace`; never the known
    /// objects `resync` re-queues nor relist tombstones. `replace` transforms every listed
    /// object before it queues anything, so a refused object fails the relist whole.
    pub transform: Option<TransformFn<T>>,
    /// [`DeltaFifo`] only: whether `replace` queues listed objects as
    /// [`Replaced`](DeltaType::Replaced) (the default here, and what client-go's informers ask
    /// for) or as [`Sync`](DeltaType::Sync) (the default of client-go's bare `DeltaFIFO`, kept
    /// for its old callers). [`RealFifo`] always queues `Replaced`, as client-go's does.
    pub emit_replaced: bool,
    /// [`RealFifo`] only: whether a relist pops whole, as one batch of its own, so that the
    /// informer publishes it at once (client-go's `AtomicEvents`, which its informers turn on
    /// since 1.36; off by default for a bare queue, as client-go's bare `RealFIFO`). The
    /// [`Informer`](crate::Informer) turns it on.
    pub atomic_relist: bool,
}

impl<T> Default for QueueOptions<T> {
    fn default() -> Self {
        QueueOptions {
            config: QueueConfig::default(),
            key_fn: KeyFn::meta_namespace(),
            transform: None,
            emit_replaced: true,
            atomic_relist: false,
        }
    }
}

impl<T> Clone for QueueOptions<T> {
    fn clone(&self) -> Self {
        QueueOptions {
            config: self.config.clone(),
            key_fn: self.key_fn.clone(),
            transform: self.transform.clone(),
            emit_replaced: self.emit_replaced,
            atomic_relist: self.atomic_relist,
        }
    }
}

impl<T> fmt::Debug for QueueOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueOptions")
            .field("config", &self.config)
            .field("key_fn", &self.key_fn)
            .field("transform", &self.transform.is_some())
            .field("emit_replaced", &self.emit_replaced)
            .field("atomic_relist", &self.atomic_relist)
            .finish()
    }
}

impl<T> QueueOptions<T> {
    /// The defaults: unbounded, `namespace/name` keys, no transform, `Replaced` deltas.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the depth bound and other [`QueueConfig`] settings.
    pub fn config(mut self, config: QueueConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the key function (see [`QueueOptions::key_fn`]).
    pub fn key_fn(mut self, key_fn: KeyFn<T>) -> Self {
        self.key_fn = key_fn;
        self
    }

    /// Sets the transform (see [`QueueOptions::transform`]).
    pub fn transform(mut self, transform: TransformFn<T>) -> Self {
        self.transform = Some(transform);
        self
    }

    /// Chooses `Replaced` (true) or `Sync` (false) for a [`DeltaFifo`]'s relisted objects.
    pub fn emit_replaced(mut self, emit: bool) -> Self {
        self.emit_replaced = emit;
        self
    }

    /// Chooses whether a [`RealFifo`]'s relists pop whole (see [`QueueOptions::atomic_relist`]).
    #[doc(alias = "AtomicEvents")]
    pub fn atomic_relist(mut self, atomic: bool) -> Self {
        self.atomic_relist = atomic;
        self
    }
}

/// A point-in-time view of a queue, for metrics and the freshness policy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStats {
    /// Deltas queued (not yet popped).
    pub depth: usize,
    /// Queue entries: keys for a [`DeltaFifo`], deltas for a [`RealFifo`].
    pub entries: usize,
    /// Deltas popped but not yet acknowledged with [`Queue::done`].
    pub in_flight: usize,
    /// When the oldest delta that is queued or in flight was queued.
    pub oldest_enqueued_at: Option<Instant>,
    /// Id of the newest queue entry (0 before the first).
    pub last_id: u64,
    /// Number of times a producer waited for room (bounded queues only).
    pub producer_blocked_total: u64,
    /// Total time producers spent waiting for room.
    pub producer_blocked: Duration,
    /// Whether the queue is closed.
    pub closed: bool,
}

impl QueueStats {
    /// Deltas not yet applied: queued plus in flight (the writer's lag in deltas).
    pub fn lag_deltas(&self) -> usize {
        self.depth + self.in_flight
    }

    /// Age of the oldest delta not yet applied at `now` (the writer's lag in time).
    pub fn lag_time(&self, now: Instant) -> Duration {
        self.oldest_enqueued_at.map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
    }
}

/// What both delta queues offer; the informer works with either.
///
/// Producers (a reflector, a simulator) call `add`/`update`/`delete`/`replace`/`bookmark`; one
/// consumer (the informer's processing loop) calls [`pop_batch`](Queue::pop_batch), applies the
/// batch without any queue lock held, then calls [`done`](Queue::done).
#[doc(alias = "DeltaFIFO")]
pub trait Queue<T>: Send + Sync + fmt::Debug + 'static {
    /// Queues an `Added` delta. Blocks the calling thread while a bounded queue is full (see
    /// [`QueueConfig::max_depth`]); async producers await [`wait_capacity`](Queue::wait_capacity)
    /// first.
    fn add(&self, obj: Arc<T>) -> Result<()>;
    /// Queues an `Updated` delta (blocks like [`add`](Queue::add)).
    fn update(&self, obj: Arc<T>) -> Result<()>;
    /// Queues a `Deleted` delta (blocks like [`add`](Queue::add); see each queue for when it is
    /// dropped).
    fn delete(&self, obj: Arc<T>) -> Result<()>;
    /// A relist: queues `Replaced` for every listed object (or `Sync`, see
    /// [`QueueOptions::emit_replaced`]) and `Deleted` tombstones
    /// ([`DeletedFinalStateUnknown`](crate::DeletedFinalStateUnknown)) for keys queued or known
    /// but missing from the list (see each queue for the details). Once all of these are applied
    /// the store reports `resource_version`. The listed objects are keyed and transformed before
    /// anything is queued: one refused object fails the relist whole.
    fn replace(&self, objs: Vec<Arc<T>>, resource_version: &str) -> Result<()>;
    /// Queues `Sync` deltas for known keys that have nothing queued.
    fn resync(&self) -> Result<()>;
    /// Records that once everything queued so far is applied, the store includes
    /// `resource_version` (a watch bookmark). Wakes the consumer even if nothing else is queued.
    fn bookmark(&self, resource_version: &str) -> Result<()>;
    /// Waits until at least one delta (or a bookmark) is queued, then pops up to `max` deltas
    /// following the queue's batch rules (a [`RealFifo`] follows client-go's `PopBatch`; a
    /// [`DeltaFifo`], which client-go pops one key at a time, pops whole keys). Fails with [`Error::Closed`] once the
    /// queue is closed and empty. Popping also acknowledges a previous batch not yet `done`.
    fn pop_batch(&self, max: usize) -> BoxFuture<'_, Result<PoppedBatch<T>>>;
    /// Acknowledges that the last popped batch is applied and published: its keys leave the
    /// in-flight overlay and it counts towards [`has_synced`](Queue::has_synced).
    fn done(&self, batch: &PoppedBatch<T>);
    /// Waits until a bounded queue has room (at once for an unbounded or closed one).
    fn wait_capacity(&self) -> BoxFuture<'_, ()>;
    /// Closes the queue: producers fail with [`Error::Closed`], blocked producers wake up, and
    /// a pop drains what is left and then fails.
    fn close(&self);
    /// Whether [`close`](Queue::close) was called.
    fn is_closed(&self) -> bool;
    /// True once the deltas of the first `replace` are popped and done, or if an add, update or
    /// delete came before any replace (client-go's `HasSynced`).
    fn has_synced(&self) -> bool;
    /// Deltas queued (not counting the batch in flight).
    fn len(&self) -> usize;
    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Depth, lag and producer-blocking counters.
    fn stats(&self) -> QueueStats;
    /// `"DeltaFIFO"` or `"RealFIFO"`.
    fn kind(&self) -> &'static str;
}

/// The keys of the batch in flight, with their newest state (`None`: deleted by the batch).
pub(crate) struct InFlight<T> {
    pub(crate) keys: HashMap<Arc<str>, Option<Arc<T>>>,
    pub(crate) deltas: usize,
    pub(crate) entries: usize,
    pub(crate) oldest: Option<Instant>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight { keys: HashMap::new(), deltas: 0, entries: 0, oldest: None }
    }
}

/// The known objects as the queue must see them: the consumer's view with the in-flight batch
/// on top.
pub(crate) struct Known<'a, T> {
    pub(crate) source: &'a dyn KnownObjects<T>,
    pub(crate) in_flight: &'a InFlight<T>,
}

impl<T: 'static> Known<'_, T> {
    pub(crate) fn get(&self, key: &str) -> Option<Arc<T>> {
        match self.in_flight.keys.get(key) {
            Some(state) => state.clone(),
            None => self.source.get(key),
        }
    }

    pub(crate) fn for_each(&self, f: &mut dyn FnMut(&Arc<str>, &Arc<T>)) {
        let in_flight = &self.in_flight.keys;
        self.source.for_each(&mut |k, v| {
            if !in_flight.contains_key(k) {
                f(k, v);
            }
        });
        for (k, v) in in_flight {
            if let Some(v) = v {
                f(k, v);
            }
        }
    }
}

/// The queue discipline: how deltas are stored, merged and popped.
pub(crate) trait Logic<T>: Send + 'static {
    const KIND: &'static str;
    fn depth(&self) -> usize;
    fn entries(&self) -> usize;
    /// Id and first enqueue time of the front entry.
    fn front(&self) -> Option<(u64, Instant)>;
    fn push(&mut self, next_id: &mut u64, delta: Delta<T>);
    /// Queues a `Deleted` delta for `key` unless the discipline drops it.
    fn delete(&mut self, next_id: &mut u64, known: &Known<'_, T>, delta: Delta<T>);
    /// Returns the initial population count to use if this is the first replace.
    fn replace(
        &mut self,
        next_id: &mut u64,
        known: &Known<'_, T>,
        objs: Vec<(Arc<str>, Arc<T>)>,
        now: Instant,
    ) -> usize;
    fn resync(&mut self, next_id: &mut u64, known: &Known<'_, T>, now: Instant);
    /// Pops up to `max` deltas and at most `entry_limit` entries (0: no limit); returns the
    /// deltas and the number of entries.
    fn pop(&mut self, max: usize, entry_limit: usize) -> (Vec<Delta<T>>, usize);
}

pub(crate) struct State<T, L> {
    logic: L,
    in_flight: InFlight<T>,
    next_id: u64,
    closed: bool,
    populated: bool,
    initial_count: usize,
    /// Resource versions that are fully included once every entry with an id up to `upto` is
    /// applied, in `upto` order.
    markers: VecDeque<Marker>,
    blocked_total: u64,
    blocked: Duration,
}

/// A resource version and the queue position after which it is fully included.
struct Marker {
    upto: u64,
    rv: MarkerRv,
}

enum MarkerRv {
    Num(u64),
    Text(Arc<str>),
    /// No version: only wakes the consumer at this point (an empty relist without a version
    /// must still reach the processing loop, which reports the informer synced).
    Wake,
}

impl MarkerRv {
    fn of(rv: &str) -> Option<Self> {
        if rv.is_empty() {
            return None;
        }
        Some(match crate::freshness::parse_resource_version(rv) {
            Some(n) => MarkerRv::Num(n),
            None => MarkerRv::Text(rv.into()),
        })
    }
}

impl<T, L> State<T, L> {
    /// Records that `rv` is included once everything queued so far is applied. Markers with the
    /// same position merge (a `DeltaFifo` append to an existing entry keeps the position).
    fn mark(&mut self, rv: MarkerRv) {
        let upto = self.next_id;
        if let Some(last) = self.markers.back_mut()
            && last.upto == upto
        {
            last.rv = match (&last.rv, rv) {
                (MarkerRv::Num(a), MarkerRv::Num(b)) => MarkerRv::Num((*a).max(b)),
                (_, MarkerRv::Wake) => return,
                (_, rv) => rv,
            };
            return;
        }
        self.markers.push_back(Marker { upto, rv });
    }
}

/// The machinery both queues share: lock, wakeups, bounded depth, markers, in-flight overlay.
pub(crate) struct Core<T, L> {
    state: Mutex<State<T, L>>,
    /// Wakes the consumer.
    items: Notify,
    /// Wakes blocked synchronous producers.
    room: Condvar,
    /// Wakes producers awaiting `wait_capacity`.
    room_async: Notify,
    config: QueueConfig,
    access: ObjectAccess<T>,
    key_fn: KeyFn<T>,
    transform: Option<TransformFn<T>>,
    known: Arc<dyn KnownObjects<T>>,
}

impl<T, L> fmt::Debug for Core<T, L>
where
    T: Send + Sync + 'static,
    L: Logic<T>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct(L::KIND)
            .field("depth", &st.logic.depth())
            .field("entries", &st.logic.entries())
            .field("closed", &st.closed)
            .field("config", &self.config)
            .finish()
    }
}

impl<T, L> Core<T, L>
where
    T: Send + Sync + 'static,
    L: Logic<T>,
{
    pub(crate) fn new(
        logic: L,
        access: ObjectAccess<T>,
        known: Arc<dyn KnownObjects<T>>,
        options: QueueOptions<T>,
    ) -> Self {
        let QueueOptions { config, key_fn, transform, emit_replaced: _, atomic_relist: _ } =
            options;
        Core {
            state: Mutex::new(State {
                logic,
                in_flight: InFlight::default(),
                next_id: 0,
                closed: false,
                populated: false,
                initial_count: 0,
                markers: VecDeque::new(),
                blocked_total: 0,
                blocked: Duration::ZERO,
            }),
            items: Notify::new(),
            room: Condvar::new(),
            room_async: Notify::new(),
            config,
            access,
            key_fn,
            transform,
            known,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T, L>> {
        // A panic while holding this lock can only come from a bug in this module; the state is
        // still structurally valid, so keep going rather than poisoning every later call.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn key(&self, obj: &T) -> Result<Arc<str>> {
        Ok(self.key_fn.key(&self.access, obj)?.into())
    }

    /// Applies the transform, if any, to an object being queued.
    fn transform(&self, obj: Arc<T>) -> Result<Arc<T>> {
        match &self.transform {
            Some(t) => t.apply(obj).map_err(Error::from_transform),
            None => Ok(obj),
        }
    }

    /// Runs `f` on the queue's state (for the queues' inspection methods).
    pub(crate) fn inspect<R>(&self, f: impl FnOnce(&L) -> R) -> R {
        f(&self.lock().logic)
    }

    /// Locks the state, waiting for room if the queue is bounded and full.
    fn lock_with_room(&self) -> Result<MutexGuard<'_, State<T, L>>> {
        let mut st = self.lock();
        if let Some(max) = self.config.max_depth
            && st.logic.depth() >= max
            && !st.closed
        {
            let start = Instant::now();
            while st.logic.depth() >= max && !st.closed {
                st = self.room.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.blocked_total += 1;
            st.blocked += start.elapsed();
        }
        if st.closed {
            return Err(Error::Closed);
        }
        Ok(st)
    }

    pub(crate) fn enqueue(&self, kind: DeltaType, obj: Arc<T>) -> Result<()> {
        let key = self.key(&obj)?;
        let obj = self.transform(obj)?;
        let now = Instant::now();
        let mut st = self.lock_with_room()?;
        st.populated = true;
        let st = &mut *st;
        let rv = (self.access.resource_version)(&obj).and_then(MarkerRv::of);
        let delta = Delta::new(kind, key, obj, now);
        if kind == DeltaType::Deleted {
            let known = Known { source: &*self.known, in_flight: &st.in_flight };
            st.logic.delete(&mut st.next_id, &known, delta);
        } else {
            st.logic.push(&mut st.next_id, delta);
        }
        if let Some(rv) = rv {
            st.mark(rv);
        }
        self.items.notify_waiters();
        Ok(())
    }

    pub(crate) fn replace(&self, objs: Vec<Arc<T>>, resource_version: &str) -> Result<()> {
        let keyed = objs
            .into_iter()
            .map(|o| Ok((self.key(&o)?, self.transform(o)?)))
            .collect::<Result<Vec<_>>>()?;
        let now = Instant::now();
        let mut st = self.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        let st = &mut *st;
        let known = Known { source: &*self.known, in_flight: &st.in_flight };
        let initial = st.logic.replace(&mut st.next_id, &known, keyed, now);
        if !st.populated {
            st.populated = true;
            st.initial_count = initial;
        }
        st.mark(MarkerRv::of(resource_version).unwrap_or(MarkerRv::Wake));
        self.items.notify_waiters();
        Ok(())
    }

    pub(crate) fn resync(&self) -> Result<()> {
        let now = Instant::now();
        let mut st = self.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        let st = &mut *st;
        let known = Known { source: &*self.known, in_flight: &st.in_flight };
        st.logic.resync(&mut st.next_id, &known, now);
        self.items.notify_waiters();
        Ok(())
    }

    pub(crate) fn bookmark(&self, resource_version: &str) -> Result<()> {
        let mut st = self.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        if let Some(rv) = MarkerRv::of(resource_version) {
            st.mark(rv);
        }
        self.items.notify_waiters();
        Ok(())
    }

    /// Pops a batch if there is anything to pop.
    fn try_pop(&self, st: &mut State<T, L>, max: usize) -> Option<PoppedBatch<T>> {
        let fireable = |st: &State<T, L>| {
            let front = st.logic.front().map_or(u64::MAX, |(id, _)| id);
            st.markers.front().is_some_and(|m| m.upto < front)
        };
        if st.logic.depth() == 0 && !fireable(st) {
            return None;
        }
        // A batch not acknowledged is acknowledged now.
        if st.in_flight.entries > 0 || !st.in_flight.keys.is_empty() {
            self.finish(st);
        }
        let is_in_initial_list = !(st.populated && st.initial_count == 0);
        let (deltas, entries) = st.logic.pop(max.max(1), st.initial_count);
        let front = st.logic.front().map_or(u64::MAX, |(id, _)| id);
        let (mut num, mut text) = (None::<u64>, None::<Arc<str>>);
        while st.markers.front().is_some_and(|m| m.upto < front) {
            match st.markers.pop_front().map(|m| m.rv) {
                Some(MarkerRv::Num(n)) => num = Some(num.map_or(n, |m| m.max(n))),
                Some(MarkerRv::Text(t)) => text = Some(t),
                Some(MarkerRv::Wake) | None => {}
            }
        }
        let resource_version = num.map(|n| Arc::from(n.to_string())).or(text);
        let applied_through = if front == u64::MAX { st.next_id } else { front - 1 };
        let in_flight = &mut st.in_flight;
        in_flight.deltas = deltas.len();
        in_flight.entries = entries;
        in_flight.oldest = deltas.iter().map(|d| d.enqueued_at).min();
        for d in &deltas {
            let state = match d.kind {
                DeltaType::Deleted => None,
                _ => d.object.object().cloned(),
            };
            in_flight.keys.insert(d.key.clone(), state);
        }
        if self.config.max_depth.is_some() {
            self.room.notify_all();
            self.room_async.notify_waiters();
        }
        Some(PoppedBatch {
            deltas,
            entries,
            is_in_initial_list,
            resource_version,
            applied_through,
            depth_after: st.logic.depth(),
        })
    }

    fn finish(&self, st: &mut State<T, L>) {
        if st.initial_count > 0 {
            st.initial_count = st.initial_count.saturating_sub(st.in_flight.entries);
        }
        st.in_flight.keys.clear();
        crate::spare::shrink_map(&mut st.in_flight.keys);
        st.in_flight.deltas = 0;
        st.in_flight.entries = 0;
        st.in_flight.oldest = None;
    }

    pub(crate) fn pop_batch(&self, max: usize) -> BoxFuture<'_, Result<PoppedBatch<T>>> {
        Box::pin(async move {
            loop {
                let notified = self.items.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                {
                    let mut st = self.lock();
                    if let Some(batch) = self.try_pop(&mut st, max) {
                        return Ok(batch);
                    }
                    if st.closed {
                        return Err(Error::Closed);
                    }
                }
                notified.await;
            }
        })
    }

    pub(crate) fn done(&self, _batch: &PoppedBatch<T>) {
        let mut st = self.lock();
        self.finish(&mut st);
    }

    pub(crate) fn wait_capacity(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(max) = self.config.max_depth else { return };
            let mut start = None;
            loop {
                let notified = self.room_async.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                {
                    let mut st = self.lock();
                    if st.logic.depth() < max || st.closed {
                        if let Some(start) = start {
                            st.blocked_total += 1;
                            st.blocked += Instant::elapsed(&start);
                        }
                        return;
                    }
                }
                start.get_or_insert_with(Instant::now);
                notified.await;
            }
        })
    }

    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        drop(st);
        self.items.notify_waiters();
        self.room.notify_all();
        self.room_async.notify_waiters();
    }

    pub(crate) fn kind(&self) -> &'static str {
        L::KIND
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    pub(crate) fn has_synced(&self) -> bool {
        let st = self.lock();
        st.populated && st.initial_count == 0
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().logic.depth()
    }

    pub(crate) fn stats(&self) -> QueueStats {
        let st = self.lock();
        let front = st.logic.front().map(|(_, t)| t);
        let oldest = match (front, st.in_flight.oldest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        QueueStats {
            depth: st.logic.depth(),
            entries: st.logic.entries(),
            in_flight: st.in_flight.deltas,
            oldest_enqueued_at: oldest,
            last_id: st.next_id,
            producer_blocked_total: st.blocked_total,
            producer_blocked: st.blocked,
            closed: st.closed,
        }
    }
}

/// Implements [`Queue`] for a wrapper around a `Core`.
macro_rules! delegate_queue {
    ($ty:ident) => {
        impl<T: Send + Sync + 'static> $crate::queue::Queue<T> for $ty<T> {
            fn add(&self, obj: Arc<T>) -> $crate::queue::Result<()> {
                self.core.enqueue($crate::DeltaType::Added, obj)
            }
            fn update(&self, obj: Arc<T>) -> $crate::queue::Result<()> {
                self.core.enqueue($crate::DeltaType::Updated, obj)
            }
            fn delete(&self, obj: Arc<T>) -> $crate::queue::Result<()> {
                self.core.enqueue($crate::DeltaType::Deleted, obj)
            }
            fn replace(
                &self,
                objs: Vec<Arc<T>>,
                resource_version: &str,
            ) -> $crate::queue::Result<()> {
                self.core.replace(objs, resource_version)
            }
            fn resync(&self) -> $crate::queue::Result<()> {
                self.core.resync()
            }
            fn bookmark(&self, resource_version: &str) -> $crate::queue::Result<()> {
                self.core.bookmark(resource_version)
            }
            fn pop_batch(
                &self,
                max: usize,
            ) -> $crate::queue::BoxFuture<'_, $crate::queue::Result<$crate::PoppedBatch<T>>> {
                self.core.pop_batch(max)
            }
            fn done(&self, batch: &$crate::PoppedBatch<T>) {
                self.core.done(batch)
            }
            fn wait_capacity(&self) -> $crate::queue::BoxFuture<'_, ()> {
                self.core.wait_capacity()
            }
            fn close(&self) {
                self.core.close()
            }
            fn is_closed(&self) -> bool {
                self.core.is_closed()
            }
            fn has_synced(&self) -> bool {
                self.core.has_synced()
            }
            fn len(&self) -> usize {
                self.core.len()
            }
            fn stats(&self) -> $crate::queue::QueueStats {
                self.core.stats()
            }
            fn kind(&self) -> &'static str {
                self.core.kind()
            }
        }
    };
}
pub(crate) use delegate_queue;

/// Makes a `Deleted` tombstone delta.
pub(crate) fn tombstone<T>(key: Arc<str>, obj: Option<Arc<T>>, now: Instant) -> Delta<T> {
    Delta {
        kind: DeltaType::Deleted,
        key: key.clone(),
        object: DeltaObject::Tombstone(crate::DeletedFinalStateUnknown { key, obj }),
        enqueued_at: now,
    }
}
