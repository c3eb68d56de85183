//! Event handlers: each has its own buffer and its own thread (or, if it asks, its own task on
//! the Tokio runtime), so a slow handler delays neither the store nor the other handlers.

use std::{
    collections::VecDeque,
    fmt,
    marker::PhantomData,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use prometheus_client::metrics::gauge::Gauge;
use snapinformer_store::{Backend, RECLAIM_BACKLOG_MIN, Reclaimer, Snapshot};
use tokio::sync::watch;

use crate::{delta::DeltaObject, freshness::Progress};

/// A change delivered to a handler (client-go's add/update/delete notifications).
pub enum Notification<T> {
    /// The object is new to the informer (or to this handler, when it registered late).
    Add {
        /// The object.
        obj: Arc<T>,
        /// Whether it comes from the first list (or a late handler's replay).
        is_in_initial_list: bool,
    },
    /// The object changed (or, for a resync, is re-delivered unchanged).
    Update {
        /// The state the store held before.
        old: Arc<T>,
        /// The new state.
        new: Arc<T>,
    },
    /// The object was deleted: the last state seen, or a tombstone if the deletion was missed.
    Delete {
        /// The deleted object or its tombstone.
        obj: DeltaObject<T>,
    },
}

impl<T> Clone for Notification<T> {
    fn clone(&self) -> Self {
        match self {
            Notification::Add { obj, is_in_initial_list } => {
                Notification::Add { obj: obj.clone(), is_in_initial_list: *is_in_initial_list }
            }
            Notification::Update { old, new } => {
                Notification::Update { old: old.clone(), new: new.clone() }
            }
            Notification::Delete { obj } => Notification::Delete { obj: obj.clone() },
        }
    }
}

/// Where handler threads send the notifications they have handled, so that they never free an
/// object themselves: the informer's handler reclaimer (a thread that only drops what it is
/// handed, at the store's reclaimer priority; present when the store frees in the background).
/// Every handled notification goes there, not only those holding a last reference: the store's
/// reclaimer may let an object go between such a check and the drop that follows it.
pub(crate) type HandlerReclaimer<T> = Arc<Mutex<Reclaimer<Vec<Notification<T>>>>>;

/// Notifications a handler thread collects before it hands them to the reclaimer: at most
/// this many, and whatever it holds when its buffer runs empty.
///
/// Under a stream of small publications a thread's buffer runs empty after nearly each one,
/// and each hand-over may wake the reclaimer. Holding them for a millisecond instead (a timed
/// wait on the buffer) was measured and not adopted: it saved CPU under `seed`'s bursts, but
/// in the `store` benchmark the freeing only moved to the handler reclaimer (the handler's
/// reference to a replaced object became the last one), the timed waits cost the handler
/// thread more, and the staleness p99 rose (BENCHMARKS.md, "Handler threads holding what they
/// handled for 1 ms").
const HANDLER_GARBAGE_BATCH: usize = 1000;

impl<T> fmt::Debug for Notification<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notification::Add { is_in_initial_list, .. } => {
                write!(f, "Add {{ is_in_initial_list: {is_in_initial_list} }}")
            }
            Notification::Update { .. } => f.write_str("Update"),
            Notification::Delete { obj } => write!(f, "Delete {{ {obj:?} }}"),
        }
    }
}

/// Receives an informer's notifications (client-go's `ResourceEventHandler`).
///
/// Each registered handler runs on its own thread and receives its notifications in order.
/// It may block or be slow: only its own buffer grows. Closures taking `&Notification<T>`
/// implement this trait.
#[doc(alias = "ResourceEventHandler")]
pub trait EventHandler<T>: Send + 'static {
    /// An object was added (or replayed to a late handler).
    fn on_add(&mut self, obj: &Arc<T>, is_in_initial_list: bool);
    /// An object was updated, or re-delivered by a resync.
    fn on_update(&mut self, old: &Arc<T>, new: &Arc<T>);
    /// An object was deleted.
    fn on_delete(&mut self, obj: &DeltaObject<T>);
}

impl<T, F> EventHandler<T> for F
where
    F: FnMut(&Notification<T>) + Send + 'static,
{
    fn on_add(&mut self, obj: &Arc<T>, is_in_initial_list: bool) {
        self(&Notification::Add { obj: obj.clone(), is_in_initial_list })
    }
    fn on_update(&mut self, old: &Arc<T>, new: &Arc<T>) {
        self(&Notification::Update { old: old.clone(), new: new.clone() })
    }
    fn on_delete(&mut self, obj: &DeltaObject<T>) {
        self(&Notification::Delete { obj: obj.clone() })
    }
}

/// Passes on only the notifications about objects a filter accepts (client-go's
/// `FilteringResourceEventHandler`), turning transitions into the events the wrapped handler
/// needs to keep a consistent view:
///
/// - an add or a delete reaches the wrapped handler if the filter accepts the object;
/// - an update whose old and new states are both accepted stays an update;
/// - an update whose new state is accepted but whose old state is not becomes an add
///   (`is_in_initial_list = false`): the object entered the filter;
/// - an update whose old state is accepted but whose new state is not becomes a delete of the
///   old state: the object left the filter;
/// - an update where neither is accepted is dropped.
///
/// A [`DeletedFinalStateUnknown`](crate::DeletedFinalStateUnknown) tombstone is filtered on
/// the last state it carries; a tombstone without one is passed on, since the filter cannot
/// say whether the handler knew the object (client-go hands the tombstone itself to the
/// filter function).
///
/// ```
/// # use std::sync::Arc;
/// # use snapinformer_core::{FilteringHandler, Notification};
/// # struct Pod { phase: &'static str }
/// let running_only = FilteringHandler::new(
///     |pod: &Pod| pod.phase == "Running",
///     |n: &Notification<Pod>| println!("{n:?}"),
/// );
/// # let _ = running_only;
/// ```
#[doc(alias = "FilteringResourceEventHandler")]
pub struct FilteringHandler<T, F, H> {
    filter: F,
    handler: H,
    _objects: PhantomData<fn(&T)>,
}

impl<T, F, H> fmt::Debug for FilteringHandler<T, F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteringHandler").finish_non_exhaustive()
    }
}

impl<T, F, H> FilteringHandler<T, F, H>
where
    T: 'static,
    F: FnMut(&T) -> bool + Send + 'static,
    H: EventHandler<T>,
{
    /// Wraps `handler` so that it sees only the objects `filter` accepts.
    pub fn new(filter: F, handler: H) -> Self {
        FilteringHandler { filter, handler, _objects: PhantomData }
    }
}

impl<T, F, H> EventHandler<T> for FilteringHandler<T, F, H>
where
    T: 'static,
    F: FnMut(&T) -> bool + Send + 'static,
    H: EventHandler<T>,
{
    fn on_add(&mut self, obj: &Arc<T>, is_in_initial_list: bool) {
        if (self.filter)(obj) {
            self.handler.on_add(obj, is_in_initial_list);
        }
    }

    fn on_update(&mut self, old: &Arc<T>, new: &Arc<T>) {
        let newer = (self.filter)(new);
        let older = (self.filter)(old);
        match (older, newer) {
            (true, true) => self.handler.on_update(old, new),
            (false, true) => self.handler.on_add(new, false),
            (true, false) => self.handler.on_delete(&DeltaObject::Object(old.clone())),
            (false, false) => {}
        }
    }

    fn on_delete(&mut self, obj: &DeltaObject<T>) {
        let accepted = match obj.object() {
            Some(last) => (self.filter)(last),
            None => true,
        };
        if accepted {
            self.handler.on_delete(obj);
        }
    }
}

/// Options of one handler registration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct HandlerOptions {
    /// A name for metrics, logs and the handler's thread. Default: `handler-<id>`.
    pub name: Option<String>,
    /// How often this handler wants every object re-delivered as an update (client-go's
    /// per-handler resync period). `None`: the informer's default
    /// ([`InformerBuilder::resync_period`](crate::InformerBuilder::resync_period)); zero: never.
    /// A period under one second is raised to one second, and one under the informer's resync
    /// check period once the informer has started is raised to that period (client-go's rules;
    /// see [`Informer::add_event_handler_with`](crate::Informer::add_event_handler_with)).
    pub resync_period: Option<Duration>,
    /// After a call of this handler panicked, the handler's thread waits this long before it
    /// delivers the next notification, so that a handler that panics on everything does not
    /// spin (client-go waits one second). Default one second.
    pub panic_delay: Duration,
    /// Where the handler's calls run: a thread of its own (the default) or a task on the Tokio
    /// runtime the handler was registered from.
    pub execution: HandlerExecution,
}

impl Default for HandlerOptions {
    fn default() -> Self {
        HandlerOptions {
            name: None,
            resync_period: None,
            panic_delay: Duration::from_secs(1),
            execution: HandlerExecution::Thread,
        }
    }
}

/// Where a handler's calls run ([`HandlerOptions::execution`]).
///
/// Either way the handler has a buffer of its own, receives its notifications in order and one
/// at a time, and a slow handler delays neither the store nor the other handlers.
///
/// - [`Thread`](Self::Thread), the default: a thread of the handler's own. Its calls may block
///   (on I/O, on a lock, on a slow computation) without harm to anything but its own buffer.
///   Each publication that finds the thread waiting wakes it: a system call, and on a busy
///   machine a wait for a core.
/// - [`Task`](Self::Task): a task on the Tokio runtime the handler was registered from, much
///   as client-go runs each handler on a goroutine. A publication wakes the task, not a thread:
///   when the informer's processing loop runs on the same runtime, the handler usually runs on
///   the same worker right after the loop yields. The calls must not block: a blocking call
///   holds a runtime worker. Handlers that only look at the object and enqueue a key (a
///   controller's) are the case it is made for. The task yields to the runtime after every 64
///   notifications and every 1,024 objects of a late handler's replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HandlerExecution {
    /// A thread of the handler's own (the default).
    #[default]
    Thread,
    /// A task on the Tokio runtime the handler was registered from; its calls must not block.
    Task,
}

impl HandlerOptions {
    /// Default options: no name, the informer's default resync period, one second after a
    /// panic, a thread of the handler's own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the resync period (zero: never resync this handler, whatever the informer's
    /// default).
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Sets the wait after a panicking call before the next notification.
    pub fn panic_delay(mut self, delay: Duration) -> Self {
        self.panic_delay = delay;
        self
    }

    /// Sets where the handler's calls run (see [`HandlerExecution`]).
    pub fn execution(mut self, execution: HandlerExecution) -> Self {
        self.execution = execution;
        self
    }
}

/// What a handler's buffer holds.
pub(crate) enum Message<T: Send + Sync + 'static, B: Backend> {
    /// A notification; `initial` if it counts towards the handler's `has_synced`.
    Notify(Notification<T>, bool),
    /// A late handler's replay: every object of the snapshot as an initial add.
    Replay(Snapshot<T, B>),
}

struct BufferState<T: Send + Sync + 'static, B: Backend> {
    items: VecDeque<Message<T, B>>,
    closed: bool,
    /// Whether the handler's thread waits on `ready` (set and cleared under the lock): a push
    /// wakes it only then. Notifying a condition variable is a system call even when nobody
    /// waits, and a handler busy with earlier notifications finds the new ones by itself.
    waiting: bool,
}

/// What a look into a handler's buffer found.
enum Next<T: Send + Sync + 'static, B: Backend> {
    /// The next message, and whether more are buffered behind it.
    Message(Message<T, B>, bool),
    /// Nothing buffered, and nothing more will come (closed; drained, if it was asked to).
    Closed,
    /// Nothing buffered yet: the handler is now marked waiting.
    Empty,
}

/// One handler's buffer: unbounded, drained by the handler's own thread or task.
pub(crate) struct Buffer<T: Send + Sync + 'static, B: Backend> {
    state: Mutex<BufferState<T, B>>,
    /// Wakes a handler thread.
    ready: Condvar,
    /// Wakes a handler task (a permit is kept if the task is not yet waiting on it).
    ready_task: tokio::sync::Notify,
    /// Whether a task drains the buffer (else a thread).
    task: bool,
    depth: Gauge,
}

impl<T: Send + Sync + 'static, B: Backend> Buffer<T, B> {
    fn lock(&self) -> MutexGuard<'_, BufferState<T, B>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn push_all(&self, msgs: impl IntoIterator<Item = Message<T, B>>) {
        let mut st = self.lock();
        if st.closed {
            return;
        }
        let before = st.items.len();
        st.items.extend(msgs);
        let added = st.items.len() - before;
        let wake = added > 0 && st.waiting;
        drop(st);
        if added > 0 {
            self.depth.inc_by(added as i64);
        }
        if wake {
            self.wake();
        }
    }

    /// Wakes the handler's thread or task (the buffer's only waiter).
    fn wake(&self) {
        if self.task {
            self.ready_task.notify_one();
        } else {
            self.ready.notify_one();
        }
    }

    /// Stops the handler thread; with `drain`, after it delivered what is buffered.
    pub(crate) fn close(&self, drain: bool) {
        let mut st = self.lock();
        st.closed = true;
        if !drain {
            let dropped = st.items.len();
            st.items.clear();
            self.depth.dec_by(dropped as i64);
        }
        drop(st);
        self.wake();
    }

    /// Takes the next message if there is one; if there is none and the buffer is open, marks
    /// the handler waiting, so that the next push wakes it.
    fn try_next(&self, st: &mut BufferState<T, B>) -> Next<T, B> {
        if let Some(msg) = st.items.pop_front() {
            crate::spare::shrink_deque(&mut st.items);
            self.depth.dec();
            return Next::Message(msg, !st.items.is_empty());
        }
        if st.closed {
            return Next::Closed;
        }
        st.waiting = true;
        Next::Empty
    }

    /// [`next`](Self::next) for a handler task: waits on the runtime instead of blocking.
    async fn next_async(&self) -> Option<(Message<T, B>, bool)> {
        loop {
            {
                let mut st = self.lock();
                st.waiting = false;
                match self.try_next(&mut st) {
                    Next::Message(msg, more) => return Some((msg, more)),
                    Next::Closed => return None,
                    Next::Empty => {}
                }
            }
            // A push between the unlock and this wait leaves a permit: no wake-up is lost.
            self.ready_task.notified().await;
        }
    }

    /// The next message, waiting for one, and whether more are buffered behind it; `None`
    /// once the buffer is closed and (if drained) empty.
    fn next(&self) -> Option<(Message<T, B>, bool)> {
        let mut st = self.lock();
        loop {
            match self.try_next(&mut st) {
                Next::Message(msg, more) => return Some((msg, more)),
                Next::Closed => return None,
                Next::Empty => {}
            }
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
            st.waiting = false;
        }
    }
}

/// State a handler shares with its registration handle.
#[derive(Debug)]
pub(crate) struct HandlerShared {
    /// Initial notifications (first-list adds, replays) not yet handled.
    pub(crate) pending_initial: AtomicUsize,
    /// Notifications handled.
    pub(crate) handled: AtomicU64,
    /// Handler calls that panicked.
    pub(crate) panics: AtomicU64,
    /// Latched once the handler has synced: it stays synced.
    pub(crate) synced: AtomicBool,
    /// Whether the handler's thread has ended (it delivers nothing more).
    pub(crate) stopped: AtomicBool,
    /// Bumped whenever `pending_initial` reaches zero or the thread ends: wakes waiters.
    pub(crate) changed: watch::Sender<u64>,
}

impl Default for HandlerShared {
    fn default() -> Self {
        HandlerShared {
            pending_initial: AtomicUsize::new(0),
            handled: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            synced: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            changed: watch::Sender::new(0),
        }
    }
}

impl HandlerShared {
    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Marks the handler stopped when its thread ends, however it ends.
struct StoppedOnDrop(Arc<HandlerShared>);

impl Drop for StoppedOnDrop {
    fn drop(&mut self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        self.0.bump();
    }
}

/// How many notifications a handler task delivers before it yields to the runtime.
const TASK_NOTIFICATIONS_PER_TURN: usize = 64;
/// How many objects of a replay a handler task delivers before it yields to the runtime.
const TASK_REPLAY_PER_TURN: usize = 1024;

/// What a handler's thread or task keeps between messages: the handler, its bookkeeping, and
/// the handled notifications not yet handed to the reclaimer.
struct Delivery<T: Send + Sync + 'static, H> {
    handler: H,
    name: Arc<str>,
    shared: Arc<HandlerShared>,
    reclaimer: Option<HandlerReclaimer<T>>,
    garbage: Vec<Notification<T>>,
}

impl<T: Send + Sync + 'static, H: EventHandler<T>> Delivery<T, H> {
    /// Calls the handler with one notification; returns whether the call panicked.
    fn notify(&mut self, n: Notification<T>) -> bool {
        let handler = &mut self.handler;
        let result = catch_unwind(AssertUnwindSafe(|| match &n {
            Notification::Add { obj, is_in_initial_list } => {
                handler.on_add(obj, *is_in_initial_list)
            }
            Notification::Update { old, new } => handler.on_update(old, new),
            Notification::Delete { obj } => handler.on_delete(obj),
        }));
        if self.reclaimer.is_some() {
            self.garbage.push(n);
        }
        result.is_err()
    }

    /// Calls the handler with `objects` as initial adds; returns whether a call panicked (the
    /// rest of the replay is then skipped).
    fn replay<'a>(&mut self, objects: impl Iterator<Item = &'a Arc<T>>) -> bool {
        let handler = &mut self.handler;
        catch_unwind(AssertUnwindSafe(|| {
            for obj in objects {
                handler.on_add(obj, true);
            }
        }))
        .is_err()
    }

    /// The bookkeeping after a message: panics, counts, the initial list's progress, and the
    /// hand-over of handled notifications (in batches, and whenever the buffer runs empty).
    fn finish(&mut self, initial: bool, panicked: bool, more: bool) {
        if panicked {
            self.shared.panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!(handler = %self.name, "event handler panicked; notification skipped");
        }
        self.shared.handled.fetch_add(1, Ordering::Relaxed);
        if initial && self.shared.pending_initial.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.shared.bump();
        }
        if !more || self.garbage.len() >= HANDLER_GARBAGE_BATCH {
            self.hand_over();
        }
    }

    fn hand_over(&mut self) {
        if let (Some(reclaimer), false) = (&self.reclaimer, self.garbage.is_empty()) {
            let batch = std::mem::take(&mut self.garbage);
            let weight = batch.len();
            // Beyond the bound the batch is dropped here, as the store's writer frees inline
            // when its reclaimer is that far behind.
            crate::informer::lock(reclaimer).hand_over(batch, weight, RECLAIM_BACKLOG_MIN);
        }
    }
}

/// Starts a handler's thread, or with [`HandlerExecution::Task`] its task on `runtime`. With a
/// `reclaimer`, the handler frees no object itself: it hands the notifications it has handled
/// to the reclaimer (in batches, and whenever its buffer runs empty), so that a handler's
/// progress never includes freeing the state an update superseded (about 20 µs for a
/// `k8s_openapi` pod), as Go's handlers leave that to the garbage collector.
pub(crate) fn spawn_handler<T, B, H>(
    name: &str,
    handler: H,
    depth: Gauge,
    shared: Arc<HandlerShared>,
    panic_delay: Duration,
    reclaimer: Option<HandlerReclaimer<T>>,
    runtime: Option<tokio::runtime::Handle>,
) -> std::io::Result<Arc<Buffer<T, B>>>
where
    T: Send + Sync + 'static,
    B: Backend,
    H: EventHandler<T>,
{
    let buffer = Arc::new(Buffer {
        state: Mutex::new(BufferState { items: VecDeque::new(), closed: false, waiting: false }),
        ready: Condvar::new(),
        ready_task: tokio::sync::Notify::new(),
        task: runtime.is_some(),
        depth,
    });
    let buf = buffer.clone();
    let mut delivery =
        Delivery { handler, name: name.into(), shared, reclaimer, garbage: Vec::new() };
    if let Some(runtime) = runtime {
        runtime.spawn(async move {
            let _stopped = StoppedOnDrop(delivery.shared.clone());
            let mut after_panic = false;
            let mut turn = 0;
            while let Some((msg, more)) = buf.next_async().await {
                if after_panic {
                    tokio::time::sleep(panic_delay).await;
                }
                let (initial, panicked) = match msg {
                    Message::Notify(n, initial) => (initial, delivery.notify(n)),
                    Message::Replay(snapshot) => {
                        // The snapshot's iterator cannot be held across a yield (it need not
                        // be `Send`): the replay walks a list of the objects instead.
                        let objects: Vec<Arc<T>> = snapshot.iter().cloned().collect();
                        drop(snapshot);
                        let mut panicked = false;
                        for (i, part) in objects.chunks(TASK_REPLAY_PER_TURN).enumerate() {
                            if i > 0 {
                                tokio::task::yield_now().await;
                            }
                            panicked = delivery.replay(part.iter());
                            if panicked {
                                break;
                            }
                        }
                        (true, panicked)
                    }
                };
                after_panic = panicked;
                delivery.finish(initial, panicked, more);
                turn += 1;
                if turn == TASK_NOTIFICATIONS_PER_TURN {
                    turn = 0;
                    tokio::task::yield_now().await;
                }
            }
            delivery.hand_over();
        });
        return Ok(buffer);
    }
    // A NUL byte would make the spawn panic; Linux keeps the first 15 bytes.
    let thread_name = format!("handler-{}", name.replace('\0', ""));
    std::thread::Builder::new().name(thread_name).spawn(move || {
        let _stopped = StoppedOnDrop(delivery.shared.clone());
        let mut after_panic = false;
        while let Some((msg, more)) = buf.next() {
            if after_panic {
                // As client-go does: a handler that panics on everything must not spin.
                std::thread::sleep(panic_delay);
            }
            let (initial, panicked) = match msg {
                Message::Notify(n, initial) => (initial, delivery.notify(n)),
                Message::Replay(snapshot) => (true, delivery.replay(snapshot.iter())),
            };
            after_panic = panicked;
            delivery.finish(initial, panicked, more);
        }
        delivery.hand_over();
    })?;
    Ok(buffer)
}

/// A handle on a registered handler (client-go's `ResourceEventHandlerRegistration`).
///
/// Dropping it does not remove the handler; use
/// [`Informer::remove_event_handler`](crate::Informer::remove_event_handler). A handle only
/// ever refers to the handler of the informer that issued it: another informer refuses it
/// ([`Error::ForeignHandler`](crate::informer::Error::ForeignHandler)).
#[doc(alias = "ResourceEventHandlerRegistration")]
#[derive(Clone)]
pub struct HandlerRegistration {
    pub(crate) id: u64,
    pub(crate) informer_id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) shared: Arc<HandlerShared>,
    pub(crate) informer_synced: Arc<AtomicBool>,
    pub(crate) progress: watch::Receiver<Progress>,
    pub(crate) depth: Gauge,
}

impl fmt::Debug for HandlerRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("has_synced", &self.has_synced())
            .finish()
    }
}

impl HandlerRegistration {
    /// The registration's id, unique in the process (ids are never reused, even across
    /// informers).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The handler's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True once the informer has synced and this handler has handled every notification of
    /// the first list (or of its replay, if it registered late). Once true it stays true
    /// (client-go 1.37's per-handler `HasSynced`).
    ///
    /// A call that panicked still counts as handled (client-go's handler never syncs then; see
    /// [`panics`](Self::panics)).
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        if self.shared.synced.load(Ordering::SeqCst) {
            return true;
        }
        let synced = self.informer_synced.load(Ordering::SeqCst)
            && self.shared.pending_initial.load(Ordering::SeqCst) == 0;
        if synced {
            self.shared.synced.store(true, Ordering::SeqCst);
        }
        synced
    }

    /// Waits until [`has_synced`](Self::has_synced) or `timeout`; returns whether it synced
    /// (client-go's `HasSyncedChecker().Done()`). Woken by the handler's thread and by the
    /// informer's publications; it does not poll.
    #[doc(alias = "HasSyncedChecker")]
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let mut mine = self.shared.changed.subscribe();
        let mut informer = self.progress.clone();
        informer.mark_unchanged();
        let wait = async {
            let (mut mine_open, mut informer_open) = (true, true);
            while !self.has_synced() {
                if !mine_open && !informer_open {
                    return;
                }
                tokio::select! {
                    r = mine.changed(), if mine_open => mine_open = r.is_ok(),
                    r = informer.changed(), if informer_open => informer_open = r.is_ok(),
                }
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
        self.has_synced()
    }

    /// Whether the handler's thread has ended: it was removed (or its informer shut down) and
    /// the call in progress, if any, has returned.
    pub fn is_stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::SeqCst)
    }

    /// Waits until the handler's thread has ended (see [`is_stopped`](Self::is_stopped)).
    /// Resolves only after the handler was removed or its informer shut down.
    pub async fn wait_stopped(&self) {
        let mut rx = self.shared.changed.subscribe();
        while !self.is_stopped() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Notifications waiting in this handler's buffer.
    pub fn buffer_depth(&self) -> usize {
        usize::try_from(self.depth.get()).unwrap_or(0)
    }

    /// Notifications handled so far (a replay counts as one).
    pub fn handled(&self) -> u64 {
        self.shared.handled.load(Ordering::Relaxed)
    }

    /// Handler calls that panicked (the notification was skipped, the handler goes on after
    /// its [`panic_delay`](HandlerOptions::panic_delay)).
    pub fn panics(&self) -> u64 {
        self.shared.panics.load(Ordering::Relaxed)
    }
}
