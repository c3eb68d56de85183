//! The reflector's configuration.

use std::time::Duration;

use crate::BackoffConfig;

/// How a reflector lists and watches. The defaults follow client-go's reflector, except where a
/// field says otherwise (the watch timeout, streaming lists, internal-error retries).
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ReflectorConfig {
    /// A name for logs (default `"reflector"`).
    pub name: String,
    /// Only objects matching this label selector (`labelSelector`).
    pub label_selector: Option<String>,
    /// Only objects matching this field selector (`fieldSelector`).
    pub field_selector: Option<String>,
    /// Objects per list page (`limit`; client-go's `WatchListPageSize`). `None` (the default)
    /// is client-go's default: pages of 500, except that a relist from a specific version is
    /// sent without a limit (the API server answers it from its watch cache, where paging only
    /// costs) unless an earlier list at version `0` came back paginated. `Some(n)` pages every
    /// list by `n`, as a `WatchListPageSize` set in client-go does. An expired continue token
    /// falls back to a full list at the version first requested.
    #[doc(alias = "WatchListPageSize")]
    pub page_size: Option<u32>,
    /// Use a streaming list (`watch` with `sendInitialEvents=true`, Kubernetes 1.27+) instead
    /// of a list for the initial list and every relist; on a server that refuses it, or if the
    /// stream fails before its `k8s.io/initial-events-end` bookmark, fall back to a list.
    /// Default on, as in client-go since 1.35 (its `WatchListClient` feature). Before its first
    /// streaming list the reflector asks the server's version once
    /// ([`ListWatch::server_minor_version`](crate::ListWatch::server_minor_version)): a server
    /// older than 1.27, which would ignore `sendInitialEvents` and never end the initial events,
    /// gets plain lists.
    #[doc(alias = "UseWatchList")]
    #[doc(alias = "sendInitialEvents")]
    pub watch_list: bool,
    /// Ask for `BOOKMARK` events (default on).
    pub bookmarks: bool,
    /// Each watch asks the server to end it after a random time in
    /// `[min_watch_timeout, 2 * min_watch_timeout]` (`timeoutSeconds`), which spreads
    /// re-watches of many clients. client-go uses 5 minutes; the default here is 145 s, so that
    /// the longest watch (290 s) stays under the kube client's default read timeout of 295 s.
    #[doc(alias = "minWatchTimeout")]
    pub min_watch_timeout: Duration,
    /// A watch the server has not ended this long after its `timeoutSeconds` is abandoned and
    /// re-opened from the last synced version (default 30 s).
    pub watch_grace: Duration,
    /// A watch that ends without a single event sooner than this counts as a failure and is
    /// re-opened only after a backoff (client-go's "very short watch"; default 1 s).
    pub short_watch: Duration,
    /// Waits after failures.
    pub backoff: BackoffConfig,
    /// How long internal errors (reason `InternalError`, such as "etcdserver: no leader") on a
    /// watch are retried by re-opening the watch at once (client-go's
    /// `MaxInternalErrorRetryDuration`): while the first internal error of the current run
    /// (a run ends after a minute without one) is at most this old, the watch is re-opened
    /// at once; after that the reflector relists after a backoff. `Some(ZERO)` relists after
    /// every internal error (client-go's default).
    ///
    /// `None` (the default here): internal errors are treated like other 5xx answers and
    /// re-open the watch after a backoff, for as long as they last; re-opening is as safe as a
    /// relist (a version that left the server's history is answered 410, which relists) and
    /// far cheaper for a large resource.
    #[doc(alias = "MaxInternalErrorRetryDuration")]
    pub max_internal_error_retry: Option<Duration>,
    /// How often the reflector itself asks the queue for a resync while it watches (client-go's
    /// reflector `resyncPeriod`), if
    /// [`Reflector::with_should_resync`](crate::Reflector::with_should_resync) agrees.
    /// `None` (the default): never. A [`KubeInformer`](crate::KubeInformer) leaves this off:
    /// its informer resyncs per handler.
    pub resync_period: Option<Duration>,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            name: "reflector".to_owned(),
            label_selector: None,
            field_selector: None,
            page_size: None,
            watch_list: true,
            bookmarks: true,
            min_watch_timeout: Duration::from_secs(145),
            watch_grace: Duration::from_secs(30),
            short_watch: Duration::from_secs(1),
            backoff: BackoffConfig::default(),
            max_internal_error_retry: None,
            resync_period: None,
        }
    }
}

impl ReflectorConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the name used in logs.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the label selector.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Sets the field selector.
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Sets the list page size (`None`: client-go's default rule; see
    /// [`page_size`](ReflectorConfig::page_size)).
    pub fn page_size(mut self, page_size: Option<u32>) -> Self {
        self.page_size = page_size.filter(|n| *n > 0);
        self
    }

    /// Sets how long internal errors on a watch are retried before a relist (see
    /// [`max_internal_error_retry`](ReflectorConfig::max_internal_error_retry)).
    pub fn max_internal_error_retry(mut self, max: Option<Duration>) -> Self {
        self.max_internal_error_retry = max;
        self
    }

    /// Sets the reflector's own resync period (see
    /// [`resync_period`](ReflectorConfig::resync_period)).
    pub fn resync_period(mut self, period: Option<Duration>) -> Self {
        self.resync_period = period.filter(|p| !p.is_zero());
        self
    }

    /// Enables or disables streaming lists.
    pub fn watch_list(mut self, enabled: bool) -> Self {
        self.watch_list = enabled;
        self
    }

    /// Enables or disables bookmarks.
    pub fn bookmarks(mut self, enabled: bool) -> Self {
        self.bookmarks = enabled;
        self
    }

    /// Sets the shortest server-side watch timeout (whole seconds, at least one).
    pub fn min_watch_timeout(mut self, timeout: Duration) -> Self {
        self.min_watch_timeout = timeout.max(Duration::from_secs(1));
        self
    }

    /// Sets the client-side grace period after a watch's timeout.
    pub fn watch_grace(mut self, grace: Duration) -> Self {
        self.watch_grace = grace;
        self
    }

    /// Sets the "very short watch" threshold.
    pub fn short_watch(mut self, short: Duration) -> Self {
        self.short_watch = short;
        self
    }

    /// Sets the backoff.
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.backoff = backoff;
        self
    }
}
