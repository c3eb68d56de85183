//! Errors of the reflector.

use kube::core::Status;

/// Everything the reflector can report.
///
/// Most of these are *handled* by the reflector itself (it backs off, re-watches or relists)
/// and only surface in [`Step::Failed`](crate::Step::Failed) and the logs. Only
/// [`Error::QueueClosed`] ends a running reflector.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A list request failed.
    #[error("list failed: {0}")]
    List(#[source] kube::Error),
    /// A watch request could not be opened.
    #[error("watch could not be opened: {0}")]
    WatchOpen(#[source] kube::Error),
    /// An open watch stream failed (connection reset, read error).
    #[error("watch stream failed: {0}")]
    WatchStream(#[source] kube::Error),
    /// The watch stream carried an `ERROR` event.
    #[error("watch ended with an ERROR event: {} ({}): {}", .0.code, .0.reason, .0.message)]
    WatchErrorEvent(Box<Status>),
    /// A watch event could not be decoded (invalid JSON, unknown event type) or its object
    /// cannot be stored (no `metadata.name`).
    #[error("malformed watch event: {0}")]
    Malformed(String),
    /// A watch event line grew past this many bytes without a newline (see
    /// [`MAX_WATCH_LINE_BYTES`](crate::MAX_WATCH_LINE_BYTES)): the stream was dropped unread,
    /// so that a server streaming without newlines cannot make the reflector buffer without
    /// bound. Answered like a malformed event: a relist, after a backoff.
    #[error("watch event line longer than {0} bytes without a newline: stream dropped")]
    WatchLineTooLong(usize),
    /// The server did not end a watch within its timeout plus the grace period.
    #[error("watch stayed open past its timeout of {0:?} plus grace: abandoned")]
    WatchTimeout(std::time::Duration),
    /// A watch ended without a single event sooner than the "very short watch" threshold.
    #[error("very short watch: ended without an event within {0:?}")]
    ShortWatch(std::time::Duration),
    /// The streaming watch-list ended before its `k8s.io/initial-events-end` bookmark.
    #[error("the streaming list ended before its initial-events-end bookmark")]
    WatchListIncomplete,
    /// The delta queue is closed (the informer was shut down): the reflector stops.
    #[error("the delta queue is closed")]
    QueueClosed,
    /// Building the informer or its store failed.
    #[error(transparent)]
    Informer(#[from] snapinformer_core::informer::Error),
    /// The informer factory refused (shut down, or a name taken by another type).
    #[error(transparent)]
    Factory(snapinformer_core::factory::Error),
}

/// `Result` with this crate's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The Kubernetes `Status` this error carries, if the server sent one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::List(e) | Error::WatchOpen(e) | Error::WatchStream(e) => match e {
                kube::Error::Api(s) => Some(s),
                _ => None,
            },
            Error::WatchErrorEvent(s) => Some(s),
            _ => None,
        }
    }

    /// The HTTP status code of the server's answer, if there was one.
    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code).filter(|c| *c != 0)
    }

    /// Whether this is 410 Gone / Expired: the requested version (or continue token) left the
    /// server's history.
    pub fn is_expired(&self) -> bool {
        self.status().is_some_and(|s| s.code == 410 || s.reason == "Expired" || s.reason == "Gone")
    }

    /// Whether the server answered "Too large resource version" (it has not caught up with the
    /// requested version yet).
    pub fn is_too_large_resource_version(&self) -> bool {
        self.status().is_some_and(|s| {
            let cause = s
                .details
                .as_ref()
                .is_some_and(|d| d.causes.iter().any(|c| c.reason == "ResourceVersionTooLarge"));
            cause || s.message.contains("Too large resource version")
        })
    }

    /// Whether this is 429 TooManyRequests.
    pub fn is_throttled(&self) -> bool {
        self.code() == Some(429)
    }

    /// The wait the server asked for (`details.retryAfterSeconds` of its `Status`).
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        let secs = self.status()?.details.as_ref()?.retry_after_seconds;
        (secs > 0).then(|| std::time::Duration::from_secs(u64::from(secs)))
    }
}
