//! Event handlers: each has its own buffer and its own thread, so a slow handler delays neither
//! the store nor the other handlers.

use std::{
    collections::VecDeque,
    fmt,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use prometheus_client::metrics::gauge::Gauge;
use snapinformer_store::{Backend, Snapshot};

use crate::delta::DeltaObject;

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

/// Options of one handler registration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[must_use]
pub struct HandlerOptions {
    /// A name for metrics, logs and the handler's thread. Default: `handler-<id>`.
    pub name: Option<String>,
    /// How often this handler wants every object re-delivered as an update (client-go's
    /// per-handler resync period). `None` or zero: never.
    pub resync_period: Option<Duration>,
}

impl HandlerOptions {
    /// Default options: no name, no resync.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the resync period.
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period).filter(|p| !p.is_zero());
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
}

/// One handler's buffer: unbounded, drained by the handler's own thread.
pub(crate) struct Buffer<T: Send + Sync + 'static, B: Backend> {
    state: Mutex<BufferState<T, B>>,
    ready: Condvar,
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
        drop(st);
        if added > 0 {
            self.depth.inc_by(added as i64);
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
        self.ready.notify_all();
    }

    fn next(&self) -> Option<Message<T, B>> {
        let mut st = self.lock();
        loop {
            if let Some(msg) = st.items.pop_front() {
                self.depth.dec();
                return Some(msg);
            }
            if st.closed {
                return None;
            }
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// State a handler shares with its registration handle.
#[derive(Debug, Default)]
pub(crate) struct HandlerShared {
    /// Initial notifications (first-list adds, replays) not yet handled.
    pub(crate) pending_initial: AtomicUsize,
    /// Notifications handled.
    pub(crate) handled: AtomicU64,
    /// Handler calls that panicked.
    pub(crate) panics: AtomicU64,
}

/// Starts a handler's thread.
pub(crate) fn spawn_handler<T, B, H>(
    name: &str,
    mut handler: H,
    depth: Gauge,
    shared: Arc<HandlerShared>,
) -> std::io::Result<Arc<Buffer<T, B>>>
where
    T: Send + Sync + 'static,
    B: Backend,
    H: EventHandler<T>,
{
    let buffer = Arc::new(Buffer {
        state: Mutex::new(BufferState { items: VecDeque::new(), closed: false }),
        ready: Condvar::new(),
        depth,
    });
    let buf = buffer.clone();
    let thread_name = format!("handler-{name}");
    let handler_name: Arc<str> = name.into();
    std::thread::Builder::new().name(thread_name).spawn(move || {
        while let Some(msg) = buf.next() {
            let (initial, result) = match msg {
                Message::Notify(n, initial) => {
                    let r = catch_unwind(AssertUnwindSafe(|| match &n {
                        Notification::Add { obj, is_in_initial_list } => {
                            handler.on_add(obj, *is_in_initial_list)
                        }
                        Notification::Update { old, new } => handler.on_update(old, new),
                        Notification::Delete { obj } => handler.on_delete(obj),
                    }));
                    (initial, r)
                }
                Message::Replay(snapshot) => {
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        for obj in snapshot.iter() {
                            handler.on_add(obj, true);
                        }
                    }));
                    (true, r)
                }
            };
            if result.is_err() {
                shared.panics.fetch_add(1, Ordering::Relaxed);
                tracing::error!(handler = %handler_name, "event handler panicked; notification skipped");
            }
            shared.handled.fetch_add(1, Ordering::Relaxed);
            if initial {
                shared.pending_initial.fetch_sub(1, Ordering::AcqRel);
            }
        }
    })?;
    Ok(buffer)
}

/// A handle on a registered handler (client-go's `ResourceEventHandlerRegistration`).
///
/// Dropping it does not remove the handler; use
/// [`Informer::remove_event_handler`](crate::Informer::remove_event_handler).
#[doc(alias = "ResourceEventHandlerRegistration")]
#[derive(Clone)]
pub struct HandlerRegistration {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) shared: Arc<HandlerShared>,
    pub(crate) informer_synced: Arc<AtomicBool>,
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
    /// The registration's id, unique within its informer.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The handler's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True once the informer has synced and this handler has handled every notification of
    /// the first list (or of its replay, if it registered late).
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        self.informer_synced.load(Ordering::Acquire)
            && self.shared.pending_initial.load(Ordering::Acquire) == 0
    }

    /// Waits (polling every 5 ms) until [`has_synced`](Self::has_synced) or `timeout`; returns
    /// whether it synced.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let poll = async {
            while !self.has_synced() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(timeout, poll).await.is_ok()
    }

    /// Notifications waiting in this handler's buffer.
    pub fn buffer_depth(&self) -> usize {
        usize::try_from(self.depth.get()).unwrap_or(0)
    }

    /// Notifications handled so far (a replay counts as one).
    pub fn handled(&self) -> u64 {
        self.shared.handled.load(Ordering::Relaxed)
    }

    /// Handler calls that panicked (the notification was skipped, the handler goes on).
    pub fn panics(&self) -> u64 {
        self.shared.panics.load(Ordering::Relaxed)
    }
}
