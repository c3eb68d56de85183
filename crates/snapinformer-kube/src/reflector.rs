//! The reflector: an explicit list/watch state machine that feeds a delta queue.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use futures::StreamExt;
use kube::{
    Resource,
    api::{ListParams, WatchEvent, WatchParams},
};
use snapinformer_core::{Queue, queue};
use snapinformer_store::ObjectAccess;
use tokio::{
    sync::watch,
    task::JoinHandle,
    time::{Instant, sleep_until, timeout_at},
};

use crate::{
    Backoff, Error, ListWatch, ReflectorConfig, Result,
    access::access,
    listwatch::{MAX_WATCH_LINE_BYTES, WatchStream},
};

/// A function applied to every object before it enters the queue (for example, dropping
/// `metadata.managedFields`; see [`crate::transform`]).
#[doc(alias = "TransformFunc")]
pub type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Called with the reflector's name and the error each time a list or watch fails (see
/// [`Reflector::with_watch_error_handler`]).
pub type WatchErrorHandler = Arc<dyn Fn(&str, &Error) + Send + Sync>;

/// Asked before each of the reflector's own resyncs (see [`Reflector::with_should_resync`]).
pub type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;

/// The annotation on the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A streaming list that receives nothing for this long before its initial-events-end
/// bookmark is reported ([`Step::StreamingListStalled`]), again every such period (client-go
/// warns every 10 s as well).
pub const STREAMING_LIST_STALL: Duration = Duration::from_secs(10);

/// A run of internal errors ends after this long without one (client-go's value).
const INTERNAL_ERROR_RUN_RESET: Duration = Duration::from_secs(60);

/// client-go's default list page size.
const DEFAULT_PAGE_SIZE: u32 = 500;

/// Where the state machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// About to (re)list: a list request, or a streaming list if enabled.
    #[default]
    List,
    /// Between the pages of a paginated list.
    Listing,
    /// A streaming list is open and collecting its initial events.
    StreamingList,
    /// About to open a watch from the last synced version.
    Watch,
    /// A watch is open.
    Watching,
    /// Waiting after a failure.
    BackingOff,
}

/// What the machine does after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextAction {
    /// List again (a relist: objects that disappeared become tombstones).
    Relist,
    /// Open the watch again from the last synced version, without a relist.
    Rewatch,
    /// Keep reading the open watch (the failure concerned one event, which was skipped).
    Continue,
}

/// Which object event a watch delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

/// What one [`Reflector::step`] did.
#[derive(Debug)]
pub enum Step {
    /// A list page arrived and more pages follow.
    ListPage {
        /// Objects in the page.
        objects: usize,
    },
    /// A list (all its pages), or a streaming list up to its initial-events-end bookmark,
    /// was queued as one `replace`.
    Listed {
        /// Objects queued.
        objects: usize,
        /// The list's resource version, now the last synced version.
        resource_version: String,
        /// Whether it was a streaming list.
        streaming: bool,
    },
    /// A streaming list was opened.
    StreamingListOpened {
        /// The version it was opened from (`""`: a consistent read).
        resource_version: String,
    },
    /// A watch was opened.
    WatchOpened {
        /// The version it was opened from.
        resource_version: String,
    },
    /// An object event was queued (or, during a streaming list, collected).
    Event {
        /// Which event.
        kind: EventKind,
        /// The object's key.
        key: String,
        /// The object's resource version.
        resource_version: Option<String>,
    },
    /// A bookmark advanced the last synced version without touching any object.
    Bookmark {
        /// The bookmark's version.
        resource_version: String,
    },
    /// The server ended the watch normally; it is re-opened from the last synced version.
    WatchEnded {
        /// Events the watch delivered.
        events: u64,
    },
    /// Something failed; the machine goes on with `next` after `retry_in` (zero: at once).
    Failed {
        /// What failed.
        error: Error,
        /// What comes next.
        next: NextAction,
        /// The wait first (the backoff, at least the server's `Retry-After`).
        retry_in: Duration,
    },
    /// A backoff wait ended.
    Waited {
        /// How long it was.
        waited: Duration,
    },
    /// The reflector's own resync period ([`ReflectorConfig::resync_period`]) elapsed.
    Resync {
        /// Whether the queue was asked to resync (false: the
        /// [`should_resync`](Reflector::with_should_resync) callback said no).
        performed: bool,
    },
    /// A streaming list has received nothing for [`STREAMING_LIST_STALL`] (or since its
    /// previous stall report) and still waits for its initial-events-end bookmark.
    StreamingListStalled {
        /// Time since the last event, or since the stream was opened if none came.
        since: Duration,
        /// Whether any event came yet.
        any_event: bool,
    },
}

/// Counters of what a reflector did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReflectorStats {
    /// Completed lists (each queued as one `replace`), streaming lists included.
    pub lists: u64,
    /// List pages received.
    pub list_pages: u64,
    /// Lists restarted without paging after a continue token expired.
    pub full_list_fallbacks: u64,
    /// Streaming lists completed.
    pub streaming_lists: u64,
    /// Streaming lists that failed and fell back to a list.
    pub watch_list_fallbacks: u64,
    /// Watches opened (streaming lists included).
    pub watches: u64,
    /// Watches the server ended normally.
    pub watches_ended: u64,
    /// Object events received.
    pub watch_events: u64,
    /// Bookmarks received.
    pub bookmarks: u64,
    /// 410 Gone / Expired answers (lists, watches, continue tokens).
    pub expired: u64,
    /// "Too large resource version" answers.
    pub too_large: u64,
    /// 429 answers.
    pub throttled: u64,
    /// Other failures (5xx, transport, 4xx).
    pub errors: u64,
    /// Malformed events or objects (undecodable, longer than
    /// [`MAX_WATCH_LINE_BYTES`](crate::MAX_WATCH_LINE_BYTES), or without a name): counted,
    /// logged, and skipped (an object that cannot be stored) or answered with a relist (an event that
    /// could not be read, whose object is therefore unknown).
    pub malformed: u64,
    /// Watches abandoned because the server kept them open past their timeout.
    pub watch_timeouts: u64,
    /// Resyncs the reflector asked the queue for (its own resync period).
    pub resyncs: u64,
    /// Stall reports of streaming lists (see [`Step::StreamingListStalled`]).
    pub streaming_list_stalls: u64,
    /// Backoff waits.
    pub backoffs: u64,
    /// Total time spent in backoff waits.
    pub backoff_time: Duration,
}

/// A reflector's state as seen from outside ([`Reflector::status`], [`ReflectorHandle::status`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReflectorStatus {
    /// Where the state machine is.
    pub phase: Phase,
    /// The newest resource version received (list, event or bookmark): what the reflector has
    /// handed to the queue. Compare with the informer's published version to see the lag.
    #[doc(alias = "LastSyncResourceVersion")]
    pub last_sync_resource_version: Option<String>,
    /// Whether at least one list completed.
    pub listed: bool,
    /// Counters.
    pub stats: ReflectorStats,
}

/// A cheap, cloneable view of a reflector's [`ReflectorStatus`].
#[derive(Debug, Clone, Default)]
pub struct StatusHandle(Arc<Mutex<ReflectorStatus>>);

impl StatusHandle {
    /// The current status.
    pub fn get(&self) -> ReflectorStatus {
        self.lock().clone()
    }

    /// The newest resource version the reflector received.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.lock().last_sync_resource_version.clone()
    }

    fn lock(&self) -> MutexGuard<'_, ReflectorStatus> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

enum Next {
    List,
    Watch,
}

struct Paging<K> {
    /// The version the list asks for (`""`: consistent, `"0"`: any).
    rv: String,
    limit: Option<u32>,
    continue_token: Option<String>,
    items: Vec<Arc<K>>,
}

struct Streaming<K> {
    stream: WatchStream<K>,
    items: BTreeMap<String, Arc<K>>,
    deadline: Instant,
    timeout: Duration,
    opened_at: Instant,
    last_event: Option<Instant>,
    /// When the next stall report is due.
    stall_at: Instant,
}

struct Watching<K> {
    stream: WatchStream<K>,
    opened_at: Instant,
    deadline: Instant,
    timeout: Duration,
    events: u64,
}

enum State<K> {
    List,
    Paging(Paging<K>),
    StreamingList(Streaming<K>),
    Watch,
    Watching(Watching<K>),
    Backoff { until: Instant, next: Next, waited: Duration },
}

impl<K> State<K> {
    fn phase(&self) -> Phase {
        match self {
            State::List => Phase::List,
            State::Paging(_) => Phase::Listing,
            State::StreamingList(_) => Phase::StreamingList,
            State::Watch => Phase::Watch,
            State::Watching(_) => Phase::Watching,
            State::Backoff { .. } => Phase::BackingOff,
        }
    }
}

/// The reflector (client-go's `Reflector`): lists and watches one resource through a
/// [`ListWatch`] (a `kube::Api`) and feeds a delta [`Queue`], following client-go's
/// resourceVersion rules (see the crate docs).
///
/// It is an explicit state machine: [`step`](Reflector::step) performs one transition (one
/// request, one event, or one backoff wait) and says what it did, so tests can drive it event
/// by event; [`run`](Reflector::run) steps until the queue closes, and
/// [`spawn`](Reflector::spawn) runs it on a task with a stop switch.
pub struct Reflector<K, L = kube::Api<K>> {
    lw: L,
    queue: Arc<dyn Queue<K>>,
    access: ObjectAccess<K>,
    config: ReflectorConfig,
    transform: Option<Transform<K>>,
    state: State<K>,
    backoff: Backoff,
    last_sync: Option<String>,
    /// The last synced version is unusable (a list at it answered 410 or "too large"): the
    /// next list is a consistent read (`resourceVersion` unset).
    rv_unavailable: bool,
    /// A list at version 0 came back paginated: the server does not serve lists from a watch
    /// cache, so relists page too.
    paginated_result: bool,
    /// The server refused a streaming list: never ask again.
    watch_list_supported: bool,
    /// Whether the server's version was asked for (once, before the first streaming list).
    version_checked: bool,
    /// The next list is a plain list even if streaming lists are enabled (fallback).
    list_fallback: bool,
    /// The current run of internal errors on watches (first, last), for
    /// `max_internal_error_retry`.
    internal_errors: Option<(Instant, Instant)>,
    /// When the reflector's own resync is due (set while watching).
    next_resync: Option<Instant>,
    watch_error_handler: Option<WatchErrorHandler>,
    should_resync: Option<ShouldResync>,
    status: StatusHandle,
}

impl<K, L> fmt::Debug for Reflector<K, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.config.name)
            .field("phase", &self.state.phase())
            .field("last_sync", &self.last_sync)
            .field("rv_unavailable", &self.rv_unavailable)
            .finish_non_exhaustive()
    }
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListWatch<K>,
{
    /// A reflector that lists and watches through `lw` into `queue`.
    pub fn new(lw: L, queue: Arc<dyn Queue<K>>, config: ReflectorConfig) -> Self {
        Reflector::with_access(lw, queue, config, access::<K>())
    }
}

impl<K, L> Reflector<K, L>
where
    K: Clone + Send + Sync + 'static,
    L: ListWatch<K>,
{
    /// A reflector for objects that are not a `kube::Resource` (for example compact objects
    /// decoded by their own [`ListWatch`]), reading their name, namespace and resourceVersion
    /// through `access`.
    pub fn with_access(
        lw: L,
        queue: Arc<dyn Queue<K>>,
        config: ReflectorConfig,
        access: ObjectAccess<K>,
    ) -> Self {
        Reflector {
            lw,
            queue,
            access,
            backoff: Backoff::new(config.backoff.clone()),
            config,
            transform: None,
            state: State::List,
            last_sync: None,
            rv_unavailable: false,
            paginated_result: false,
            watch_list_supported: true,
            version_checked: false,
            list_fallback: false,
            internal_errors: None,
            next_resync: None,
            watch_error_handler: None,
            should_resync: None,
            status: StatusHandle::default(),
        }
    }

    /// Calls `handler` with the reflector's name and the error each time a list or watch
    /// fails and the reflector backs off, re-watches or relists (client-go's
    /// `SetWatchErrorHandler`), in addition to the reflector's own log line. It runs on the
    /// reflector's task: keep it short.
    ///
    /// client-go calls its handler only when `ListAndWatch` returns an error (a failed list, a
    /// watch that could not be opened); this one also sees the failures client-go handles
    /// inside its watch loop (ERROR events such as 410, throttling), so it sees every failure.
    #[doc(alias = "SetWatchErrorHandler")]
    #[must_use]
    pub fn with_watch_error_handler(
        mut self,
        handler: impl Fn(&str, &Error) + Send + Sync + 'static,
    ) -> Self {
        self.watch_error_handler = Some(Arc::new(handler));
        self
    }

    /// Same as [`with_watch_error_handler`](Reflector::with_watch_error_handler), with a
    /// shared function.
    #[must_use]
    pub fn with_shared_watch_error_handler(mut self, handler: Option<WatchErrorHandler>) -> Self {
        self.watch_error_handler = handler;
        self
    }

    /// Asks `should_resync` each time the reflector's own resync period
    /// ([`ReflectorConfig::resync_period`]) elapses; the queue is resynced only if it says yes
    /// (client-go's `Reflector.ShouldResync`). Without it, every period resyncs.
    #[doc(alias = "ShouldResync")]
    #[must_use]
    pub fn with_should_resync(
        mut self,
        should_resync: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        self.should_resync = Some(Arc::new(should_resync));
        self
    }

    /// Applies `transform` to every object before it is queued.
    #[doc(alias = "SetTransform")]
    #[must_use]
    pub fn with_transform(mut self, transform: impl Fn(&mut K) + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// Same as [`with_transform`](Reflector::with_transform), with a shared function.
    #[must_use]
    pub fn with_shared_transform(mut self, transform: Option<Transform<K>>) -> Self {
        self.transform = transform;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &ReflectorConfig {
        &self.config
    }

    /// Where the state machine is.
    pub fn phase(&self) -> Phase {
        self.state.phase()
    }

    /// The newest resource version received (list, event or bookmark).
    #[doc(alias = "LastSyncResourceVersion")]
    pub fn last_sync_resource_version(&self) -> Option<&str> {
        self.last_sync.as_deref()
    }

    /// The current status (phase, last synced version, counters).
    pub fn status(&self) -> ReflectorStatus {
        self.status.get()
    }

    /// A handle that reads the status from elsewhere while the reflector runs.
    pub fn status_handle(&self) -> StatusHandle {
        self.status.clone()
    }

    /// The version the next list asks for (client-go's `relistResourceVersion`): `""` (a
    /// consistent read) after a 410 or "too large resource version", `"0"` (any version, cheap
    /// for the server) before the first sync, else the last synced version.
    pub fn relist_resource_version(&self) -> &str {
        if self.rv_unavailable { "" } else { self.last_sync.as_deref().unwrap_or("0") }
    }

    /// Performs one transition and reports it. Only [`Error::QueueClosed`] is returned as an
    /// error; every other failure is handled (backoff, re-watch or relist) and reported as
    /// [`Step::Failed`].
    ///
    /// Dropping the future before it completes (a `select!` or timeout around it) abandons the
    /// request, stream or wait in progress: the next step starts over with a relist from the
    /// last synced version. That is always correct, only dearer than letting the step finish.
    pub async fn step(&mut self) -> Result<Step> {
        let step = if self.resync_due() { self.resync() } else { self.transition().await };
        let mut status = self.status.lock();
        status.phase = self.state.phase();
        status.last_sync_resource_version.clone_from(&self.last_sync);
        drop(status);
        step
    }

    /// Whether the reflector's own resync is due and may run now (between watches, or
    /// before waiting to re-open one).
    fn resync_due(&self) -> bool {
        self.next_resync.is_some_and(|at| at <= Instant::now())
            && matches!(
                self.state,
                State::Watch | State::Watching(_) | State::Backoff { next: Next::Watch, .. }
            )
    }

    /// The reflector's own resync: asks the queue to resync unless `should_resync` says no.
    fn resync(&mut self) -> Result<Step> {
        if let Some(period) = self.config.resync_period {
            self.next_resync = Some(Instant::now() + period);
        }
        let performed = self.should_resync.as_ref().is_none_or(|f| f());
        if performed {
            tracing::debug!(reflector = %self.config.name, "forcing resync");
            self.queue.resync().map_err(queue_error)?;
            self.count(|s| s.resyncs += 1);
        }
        Ok(Step::Resync { performed })
    }

    async fn transition(&mut self) -> Result<Step> {
        let state = std::mem::replace(&mut self.state, State::List);
        match state {
            State::List => self.start_list().await,
            State::Paging(p) => self.list_page(p).await,
            State::StreamingList(s) => self.streaming_step(s).await,
            State::Watch => self.open_watch().await,
            State::Watching(w) => self.watch_step(w).await,
            State::Backoff { until, next, waited } => {
                sleep_until(until).await;
                self.state = match next {
                    Next::List => State::List,
                    Next::Watch => State::Watch,
                };
                Ok(Step::Waited { waited })
            }
        }
    }

    /// Steps until the queue closes (client-go's `ListAndWatch` loop, run forever).
    #[doc(alias = "ListAndWatch")]
    #[doc(alias = "Run")]
    pub async fn run(mut self) {
        loop {
            match self.step().await {
                Ok(step) => tracing::trace!(reflector = %self.config.name, ?step, "step"),
                Err(_) => {
                    tracing::debug!(reflector = %self.config.name, "queue closed: reflector stops");
                    return;
                }
            }
        }
    }

    /// Runs the reflector on a new task of the current Tokio runtime.
    pub fn spawn(self) -> ReflectorHandle {
        let status = self.status.clone();
        let (stop_tx, mut stop_rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            tokio::select! {
                // A stop requested before the task first runs wins: no request is made.
                biased;
                _ = stop_rx.wait_for(|stop| *stop) => {}
                () = self.run() => {}
            }
        });
        ReflectorHandle { status, stop: stop_tx, task: Mutex::new(Some(task)) }
    }

    // ----- transitions -------------------------------------------------------------------

    fn count(&self, f: impl FnOnce(&mut ReflectorStats)) {
        f(&mut self.status.lock().stats);
    }

    /// Records a failure and moves to `next`, at once or after a backoff.
    fn fail(&mut self, error: Error, next: NextAction, backoff: bool) -> Step {
        self.count(|s| {
            if error.is_expired() {
                s.expired += 1;
            } else if error.is_too_large_resource_version() {
                s.too_large += 1;
            } else if error.is_throttled() {
                s.throttled += 1;
            } else if matches!(error, Error::Malformed(_) | Error::WatchLineTooLong(_)) {
                s.malformed += 1;
            } else if matches!(error, Error::WatchTimeout(_)) {
                s.watch_timeouts += 1;
            } else {
                s.errors += 1;
            }
        });
        let retry_in = if backoff && next != NextAction::Continue {
            if error.is_connection_refused() {
                self.backoff.next_refused_delay()
            } else {
                self.backoff.next_delay(error.retry_after())
            }
        } else {
            Duration::ZERO
        };
        let name = &self.config.name;
        if error.is_expired() {
            tracing::info!(reflector = %name, %error, ?next, "resource version expired");
        } else {
            tracing::warn!(reflector = %name, %error, ?next, ?retry_in, "reflector failure");
        }
        if next != NextAction::Continue
            && let Some(handler) = &self.watch_error_handler
        {
            handler(name, &error);
        }
        let next_state = match next {
            NextAction::Relist => Some(Next::List),
            NextAction::Rewatch => Some(Next::Watch),
            // The caller keeps the open watch in place.
            NextAction::Continue => None,
        };
        if let Some(next_state) = next_state {
            self.state = if retry_in.is_zero() {
                match next_state {
                    Next::List => State::List,
                    Next::Watch => State::Watch,
                }
            } else {
                self.count(|s| {
                    s.backoffs += 1;
                    s.backoff_time += retry_in;
                });
                State::Backoff {
                    until: Instant::now() + retry_in,
                    next: next_state,
                    waited: retry_in,
                }
            };
        }
        Step::Failed { error, next, retry_in }
    }

    /// The object's `namespace/name` (or `name`) key, for logs and steps.
    fn display_key(&self, obj: &K) -> String {
        match ((self.access.namespace)(obj), (self.access.name)(obj)) {
            (Some(ns), Some(n)) if !ns.is_empty() => format!("{ns}/{n}"),
            (_, Some(n)) => n.to_owned(),
            (_, None) => "<no name>".to_owned(),
        }
    }

    /// Applies the transform and checks that the object can be stored.
    fn prepare(&self, mut obj: K) -> Result<Arc<K>, Error> {
        if let Some(t) = &self.transform {
            t(&mut obj);
        }
        if (self.access.name)(&obj).is_none_or(|n| n.is_empty()) {
            return Err(Error::Malformed(format!(
                "object without metadata.name (namespace {:?}, resourceVersion {:?})",
                (self.access.namespace)(&obj),
                (self.access.resource_version)(&obj)
            )));
        }
        Ok(Arc::new(obj))
    }

    fn server_timeout(&self) -> u32 {
        let min = self.config.min_watch_timeout.as_secs().max(1);
        let secs = min + (rand::random::<f64>() * min as f64) as u64;
        u32::try_from(secs).unwrap_or(u32::MAX)
    }

    fn watch_params(&self, timeout: u32) -> WatchParams {
        let mut wp = WatchParams::default().timeout(timeout);
        wp.bookmarks = self.config.bookmarks;
        wp.label_selector.clone_from(&self.config.label_selector);
        wp.field_selector.clone_from(&self.config.field_selector);
        wp
    }

    async fn start_list(&mut self) -> Result<Step> {
        // As in client-go, the reflector's own resyncs run only while it watches.
        self.next_resync = None;
        if self.config.watch_list && self.watch_list_supported && !self.version_checked {
            self.version_checked = true;
            if let Some(minor) = self.lw.server_minor_version().await
                && minor < 27
            {
                tracing::info!(reflector = %self.config.name, minor, "the server predates streaming lists (1.27): using lists");
                self.watch_list_supported = false;
            }
        }
        if self.config.watch_list && self.watch_list_supported && !self.list_fallback {
            return self.open_streaming_list().await;
        }
        self.list_fallback = false;
        let rv = self.relist_resource_version().to_owned();
        let limit = match self.config.page_size {
            Some(n) => Some(n),
            None if rv.is_empty() || rv == "0" || self.paginated_result => Some(DEFAULT_PAGE_SIZE),
            None => None,
        };
        self.list_page(Paging { rv, limit, continue_token: None, items: Vec::new() }).await
    }

    async fn list_page(&mut self, mut paging: Paging<K>) -> Result<Step> {
        let params = ListParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            limit: paging.limit,
            continue_token: paging.continue_token.clone(),
            resource_version: (paging.continue_token.is_none() && !paging.rv.is_empty())
                .then(|| paging.rv.clone()),
            ..ListParams::default()
        };
        let list = match self.lw.list(&params).await {
            Ok(list) => list,
            Err(e) => {
                let error = Error::List(e);
                if paging.continue_token.is_some() && error.is_expired() {
                    // client-go's FullListIfExpired: the pages so far are from a version that
                    // left the history; list everything at once at the requested version.
                    self.count(|s| s.full_list_fallbacks += 1);
                    let step = self.fail(error, NextAction::Relist, false);
                    self.state = State::Paging(Paging {
                        rv: paging.rv,
                        limit: None,
                        continue_token: None,
                        items: Vec::new(),
                    });
                    return Ok(step);
                }
                if (error.is_expired() || error.is_too_large_resource_version())
                    && !self.rv_unavailable
                {
                    // The last synced version is unusable: a consistent list, at once.
                    self.rv_unavailable = true;
                    return Ok(self.fail(error, NextAction::Relist, false));
                }
                return Ok(self.fail(error, NextAction::Relist, true));
            }
        };
        self.count(|s| s.list_pages += 1);
        let objects = list.items.len();
        let mut skipped = 0;
        for obj in list.items {
            match self.prepare(obj) {
                Ok(obj) => paging.items.push(obj),
                Err(e) => {
                    skipped += 1;
                    tracing::warn!(reflector = %self.config.name, error = %e, "listed object skipped");
                }
            }
        }
        if skipped > 0 {
            self.count(|s| s.malformed += skipped);
        }
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => {
                if paging.rv == "0" {
                    self.paginated_result = true;
                }
                paging.continue_token = Some(token);
                self.state = State::Paging(paging);
                Ok(Step::ListPage { objects })
            }
            None => {
                let rv = list.metadata.resource_version.unwrap_or_default();
                self.complete_list(paging.items, rv, false)
            }
        }
    }

    /// Queues a completed list as one replace and moves on to watching.
    fn complete_list(&mut self, items: Vec<Arc<K>>, rv: String, streaming: bool) -> Result<Step> {
        let objects = items.len();
        self.queue.replace(items, &rv).map_err(queue_error)?;
        if rv.is_empty() {
            tracing::warn!(reflector = %self.config.name, "list without a resourceVersion");
        } else {
            self.last_sync = Some(rv.clone());
        }
        self.rv_unavailable = false;
        self.count(|s| {
            s.lists += 1;
            if streaming {
                s.streaming_lists += 1;
            }
        });
        self.status.lock().listed = true;
        self.next_resync = self.config.resync_period.map(|p| Instant::now() + p);
        if !streaming {
            self.state = State::Watch;
        }
        Ok(Step::Listed { objects, resource_version: rv, streaming })
    }

    async fn open_streaming_list(&mut self) -> Result<Step> {
        let rv = if self.rv_unavailable {
            String::new()
        } else {
            self.last_sync.clone().unwrap_or_default()
        };
        let timeout = self.server_timeout();
        let mut wp = self.watch_params(timeout).initial_events();
        wp.bookmarks = true;
        match self.lw.watch(&wp, &rv).await {
            Ok(stream) => {
                self.count(|s| s.watches += 1);
                let timeout = Duration::from_secs(timeout.into());
                let now = Instant::now();
                let deadline = now + timeout + self.config.watch_grace;
                self.state = State::StreamingList(Streaming {
                    stream,
                    items: BTreeMap::new(),
                    deadline,
                    timeout,
                    opened_at: now,
                    last_event: None,
                    stall_at: now + STREAMING_LIST_STALL,
                });
                Ok(Step::StreamingListOpened { resource_version: rv })
            }
            Err(e) => {
                let error = Error::WatchOpen(e);
                if (error.is_expired() || error.is_too_large_resource_version())
                    && !self.rv_unavailable
                {
                    // The version is unusable: a consistent streaming list, at once.
                    self.rv_unavailable = true;
                    return Ok(self.fail(error, NextAction::Relist, false));
                }
                if error.is_throttled() || error.is_connection_refused() {
                    // Throttled or down: try the streaming list again after a backoff (as
                    // client-go's watch-list does), rather than load the server with a list.
                    return Ok(self.fail(error, NextAction::Relist, true));
                }
                if matches!(error.code(), Some(400 | 403 | 404 | 405 | 415 | 422 | 501)) {
                    tracing::info!(reflector = %self.config.name, %error, "the server refuses streaming lists: using lists from now on");
                    self.watch_list_supported = false;
                }
                self.count(|s| s.watch_list_fallbacks += 1);
                self.list_fallback = true;
                Ok(self.fail(error, NextAction::Relist, false))
            }
        }
    }

    /// Gives up on a streaming list: the next list is a plain list, at once.
    fn streaming_fallback(&mut self, error: Error) -> Step {
        self.count(|s| s.watch_list_fallbacks += 1);
        self.list_fallback = true;
        self.fail(error, NextAction::Relist, false)
    }

    async fn streaming_step(&mut self, mut s: Streaming<K>) -> Result<Step> {
        let item = match timeout_at(s.deadline.min(s.stall_at), s.stream.next()).await {
            Ok(item) => item,
            Err(_) if Instant::now() < s.deadline => {
                // No event for a while and still no end bookmark: say so, keep waiting.
                let now = Instant::now();
                let since = now - s.last_event.unwrap_or(s.opened_at);
                let any_event = s.last_event.is_some();
                s.stall_at = now + STREAMING_LIST_STALL;
                self.count(|st| st.streaming_list_stalls += 1);
                tracing::warn!(reflector = %self.config.name, ?since, any_event, "streaming list: still waiting for the bookmark that ends the initial events");
                self.state = State::StreamingList(s);
                return Ok(Step::StreamingListStalled { since, any_event });
            }
            Err(_) => {
                return Ok(self.streaming_fallback(Error::WatchTimeout(s.timeout)));
            }
        };
        let now = Instant::now();
        s.last_event = Some(now);
        s.stall_at = now + STREAMING_LIST_STALL;
        match item {
            None => Ok(self.streaming_fallback(Error::WatchListIncomplete)),
            Some(Err(e)) => {
                let error = match e {
                    kube::Error::SerdeError(e) => Error::Malformed(e.to_string()),
                    kube::Error::LinesCodecMaxLineLengthExceeded => {
                        Error::WatchLineTooLong(MAX_WATCH_LINE_BYTES)
                    }
                    e => Error::WatchStream(e),
                };
                Ok(self.streaming_fallback(error))
            }
            Some(Ok(WatchEvent::Error(status))) => {
                let error = Error::WatchErrorEvent(status);
                if (error.is_expired() || error.is_too_large_resource_version())
                    && !self.rv_unavailable
                {
                    self.rv_unavailable = true;
                    return Ok(self.fail(error, NextAction::Relist, false));
                }
                Ok(self.streaming_fallback(error))
            }
            Some(Ok(WatchEvent::Bookmark(b))) => {
                let rv = b.metadata.resource_version;
                let end =
                    b.metadata.annotations.get(INITIAL_EVENTS_END).is_some_and(|v| v == "true");
                self.count(|st| st.bookmarks += 1);
                if !end {
                    self.state = State::StreamingList(s);
                    return Ok(Step::Bookmark { resource_version: rv });
                }
                let items: Vec<Arc<K>> = std::mem::take(&mut s.items).into_values().collect();
                let step = self.complete_list(items, rv, true)?;
                self.state = State::Watching(Watching {
                    stream: s.stream,
                    opened_at: Instant::now(),
                    deadline: s.deadline,
                    timeout: s.timeout,
                    events: 1,
                });
                Ok(step)
            }
            Some(Ok(WatchEvent::Added(obj))) => Ok(self.stream_object(s, EventKind::Added, obj)),
            Some(Ok(WatchEvent::Modified(obj))) => {
                Ok(self.stream_object(s, EventKind::Modified, obj))
            }
            Some(Ok(WatchEvent::Deleted(obj))) => {
                Ok(self.stream_object(s, EventKind::Deleted, obj))
            }
        }
    }

    /// Collects one object event of a streaming list.
    fn stream_object(&mut self, mut s: Streaming<K>, kind: EventKind, obj: K) -> Step {
        self.count(|st| st.watch_events += 1);
        let step = match self.prepare(obj) {
            Ok(obj) => {
                let key = self.display_key(&obj);
                let resource_version = (self.access.resource_version)(&obj).map(str::to_owned);
                if kind == EventKind::Deleted {
                    s.items.remove(&key);
                } else {
                    s.items.insert(key.clone(), obj);
                }
                Step::Event { kind, key, resource_version }
            }
            Err(error) => self.fail(error, NextAction::Continue, false),
        };
        self.state = State::StreamingList(s);
        step
    }

    async fn open_watch(&mut self) -> Result<Step> {
        let Some(rv) = self.last_sync.clone() else {
            // Only a list answered without a resourceVersion leads here: list again, slowly.
            let error =
                Error::Malformed("the list carried no resourceVersion to watch from".into());
            return Ok(self.fail(error, NextAction::Relist, true));
        };
        let timeout = self.server_timeout();
        let wp = self.watch_params(timeout);
        match self.lw.watch(&wp, &rv).await {
            Ok(stream) => {
                self.count(|s| s.watches += 1);
                let timeout = Duration::from_secs(timeout.into());
                let now = Instant::now();
                self.state = State::Watching(Watching {
                    stream,
                    opened_at: now,
                    deadline: now + timeout + self.config.watch_grace,
                    timeout,
                    events: 0,
                });
                Ok(Step::WatchOpened { resource_version: rv })
            }
            Err(e) => Ok(self.watch_failed(Error::WatchOpen(e), false)),
        }
    }

    /// What a failed watch (refused when opened, or ended by an ERROR event) leads to;
    /// `productive` says whether the watch delivered an event and stayed open at least
    /// [`ReflectorConfig::short_watch`] (see [`Reflector::productive`]):
    /// - an expired version relists from the last synced version (client-go does not mark it
    ///   unavailable here: the list at it may well succeed): at once after a productive watch,
    ///   else after a backoff, so that a server answering 410 to every watch is not relisted in
    ///   a tight loop (client-go backs off before every relist);
    /// - a storage read error relists after a backoff: the server could not read an object
    ///   (and may have deleted it), so the cache may hold an object the server no longer has;
    /// - an internal error, when [`ReflectorConfig::max_internal_error_retry`] is set, re-opens
    ///   the watch at once while the current run of them is young enough, else relists after a
    ///   backoff (client-go's rule);
    /// - any other transient failure (no status, 429, 5xx) re-opens the watch from the same
    ///   version after a backoff;
    /// - anything else relists after a backoff.
    fn watch_failed(&mut self, error: Error, productive: bool) -> Step {
        if error.is_expired() {
            return self.fail(error, NextAction::Relist, !productive);
        }
        if error.is_store_read_error() {
            return self.fail(error, NextAction::Relist, true);
        }
        if error.is_internal_error()
            && let Some(max) = self.config.max_internal_error_retry
        {
            let now = Instant::now();
            let first = match self.internal_errors {
                Some((first, last)) if now - last < INTERNAL_ERROR_RUN_RESET => first,
                _ => now,
            };
            self.internal_errors = Some((first, now));
            if !max.is_zero() && now - first <= max {
                return self.fail(error, NextAction::Rewatch, false);
            }
            self.internal_errors = None;
            return self.fail(error, NextAction::Relist, true);
        }
        let next = match error.code() {
            None | Some(429 | 500..=599) => NextAction::Rewatch,
            Some(_) => NextAction::Relist,
        };
        self.fail(error, next, true)
    }

    /// Whether a watch delivered an event and stayed open at least `short_watch`: a failure
    /// that ends it and asks for a relist (410, an undecodable event) may then relist at once.
    fn productive(&self, w: &Watching<K>) -> bool {
        w.events > 0 && w.opened_at.elapsed() >= self.config.short_watch
    }

    /// A watch that delivered events and stayed open long enough proved the server healthy:
    /// the next failure starts the backoff from its first wait (see [`BackoffConfig`]).
    ///
    /// [`BackoffConfig`]: crate::BackoffConfig
    fn watch_ending(&mut self, w: &Watching<K>) {
        if let Some(healthy) = self.config.backoff.healthy_watch
            && w.events > 0
            && w.opened_at.elapsed() >= healthy
        {
            self.backoff.reset();
        }
    }

    async fn watch_step(&mut self, mut w: Watching<K>) -> Result<Step> {
        let wake = match self.next_resync {
            Some(at) => w.deadline.min(at),
            None => w.deadline,
        };
        let item = match timeout_at(wake, w.stream.next()).await {
            Ok(item) => item,
            Err(_) if Instant::now() < w.deadline => {
                // The reflector's own resync is due: the watch stays open.
                self.state = State::Watching(w);
                return self.resync();
            }
            Err(_) => {
                self.watch_ending(&w);
                return Ok(self.fail(Error::WatchTimeout(w.timeout), NextAction::Rewatch, false));
            }
        };
        let short = w.events == 0 && w.opened_at.elapsed() < self.config.short_watch;
        let productive = self.productive(&w);
        if !matches!(
            item,
            Some(Ok(WatchEvent::Added(_)
                | WatchEvent::Modified(_)
                | WatchEvent::Deleted(_)
                | WatchEvent::Bookmark(_)))
        ) {
            self.watch_ending(&w);
        }
        match item {
            None => {
                if short {
                    return Ok(self.fail(
                        Error::ShortWatch(self.config.short_watch),
                        NextAction::Rewatch,
                        true,
                    ));
                }
                self.count(|s| s.watches_ended += 1);
                self.state = State::Watch;
                Ok(Step::WatchEnded { events: w.events })
            }
            Some(Err(kube::Error::SerdeError(e))) => {
                // The event could not be read, so its object is unknown: relist from the last
                // synced version rather than risk a silently wrong cache (at once after a
                // productive watch, else after a backoff, as for a 410).
                Ok(self.fail(Error::Malformed(e.to_string()), NextAction::Relist, !productive))
            }
            Some(Err(kube::Error::LinesCodecMaxLineLengthExceeded)) => {
                // Same as above, but the server may well send that line again: back off first.
                let error = Error::WatchLineTooLong(MAX_WATCH_LINE_BYTES);
                Ok(self.fail(error, NextAction::Relist, true))
            }
            Some(Err(e)) => Ok(self.fail(Error::WatchStream(e), NextAction::Rewatch, short)),
            Some(Ok(WatchEvent::Error(status))) => {
                Ok(self.watch_failed(Error::WatchErrorEvent(status), productive))
            }
            Some(Ok(WatchEvent::Bookmark(b))) => {
                let rv = b.metadata.resource_version;
                self.count(|s| s.bookmarks += 1);
                w.events += 1;
                if !rv.is_empty() {
                    self.queue.bookmark(&rv).map_err(queue_error)?;
                    self.last_sync = Some(rv.clone());
                }
                self.state = State::Watching(w);
                Ok(Step::Bookmark { resource_version: rv })
            }
            Some(Ok(WatchEvent::Added(obj))) => self.watch_object(w, EventKind::Added, obj).await,
            Some(Ok(WatchEvent::Modified(obj))) => {
                self.watch_object(w, EventKind::Modified, obj).await
            }
            Some(Ok(WatchEvent::Deleted(obj))) => {
                self.watch_object(w, EventKind::Deleted, obj).await
            }
        }
    }

    /// Queues one object event of a watch.
    async fn watch_object(&mut self, mut w: Watching<K>, kind: EventKind, obj: K) -> Result<Step> {
        self.count(|s| s.watch_events += 1);
        w.events += 1;
        let obj = match self.prepare(obj) {
            Ok(obj) => obj,
            Err(error) => {
                self.state = State::Watching(w);
                return Ok(self.fail(error, NextAction::Continue, false));
            }
        };
        let key = self.display_key(&obj);
        let resource_version =
            (self.access.resource_version)(&obj).filter(|v| !v.is_empty()).map(str::to_owned);
        self.queue.wait_capacity().await;
        let queued = match kind {
            EventKind::Added => self.queue.add(obj),
            EventKind::Modified => self.queue.update(obj),
            EventKind::Deleted => self.queue.delete(obj),
        };
        queued.map_err(queue_error)?;
        if let Some(rv) = &resource_version {
            self.last_sync = Some(rv.clone());
        }
        self.state = State::Watching(w);
        Ok(Step::Event { kind, key, resource_version })
    }
}

fn queue_error(e: queue::Error) -> Error {
    match e {
        queue::Error::Closed => Error::QueueClosed,
        // Objects are checked for a name before they are queued.
        queue::Error::Key(e) => Error::Malformed(e.to_string()),
        // A transform configured on the queue refused an object.
        queue::Error::Transform(e) => Error::Malformed(format!("transforming: {e}")),
    }
}

/// A reflector running on its own task ([`Reflector::spawn`]).
#[derive(Debug)]
pub struct ReflectorHandle {
    status: StatusHandle,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ReflectorHandle {
    /// The reflector's current status.
    pub fn status(&self) -> ReflectorStatus {
        self.status.get()
    }

    /// A cloneable view of the status.
    pub fn status_handle(&self) -> StatusHandle {
        self.status.clone()
    }

    /// The newest resource version the reflector received.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.status.last_sync_resource_version()
    }

    /// Whether the reflector's task has ended (stopped, or its queue closed).
    pub fn is_finished(&self) -> bool {
        self.task.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the reflector (an open request or watch is dropped) and waits for its task.
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for ReflectorHandle {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}
