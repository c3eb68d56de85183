//! The reflector's configuration.

use std::time::Duration;

use crate::BackoffConfig;

/// How a reflector lists and watches. The defaults follow client-go's reflector.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ReflectorConfig {
    /// A name for logs (default `"reflector"`).
    pub name: String,
    /// Only objects matching this label selector (`labelSelector`).
    pub label_selector: Option<String>,
    /// Only objects matching this field selector (`fieldSelector`).
    pub field_selector: Option<String>,
    /// Objects per list page (`limit`); `None` lists in one request. As in client-go, a relist
    /// from a specific version is sent without a limit (the API server answers it from its
    /// watch cache, where paging only costs) unless an earlier list at version `0` came back
    /// paginated. An expired continue token falls back to a full list. Default 500.
    #[doc(alias = "WatchListPageSize")]
    pub page_size: Option<u32>,
    /// Use a streaming list (`watch` with `sendInitialEvents=true`, Kubernetes 1.27+) instead
    /// of a list for the initial list and every relist; on a server that refuses it, or if the
    /// stream fails before its `k8s.io/initial-events-end` bookmark, fall back to a list.
    /// Default off. A server older than 1.27 ignores `sendInitialEvents` and never sends that
    /// bookmark: the reflector then falls back only when the watch times out, so enable this
    /// only for servers known to support streaming lists.
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
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            name: "reflector".to_owned(),
            label_selector: None,
            field_selector: None,
            page_size: Some(500),
            watch_list: false,
            bookmarks: true,
            min_watch_timeout: Duration::from_secs(145),
            watch_grace: Duration::from_secs(30),
            short_watch: Duration::from_secs(1),
            backoff: BackoffConfig::default(),
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

    /// Sets the list page size (`None`: no paging).
    pub fn page_size(mut self, page_size: Option<u32>) -> Self {
        self.page_size = page_size.filter(|n| *n > 0);
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
