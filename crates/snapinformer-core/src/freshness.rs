//! Freshness: what the published snapshot includes, waiting for a resource version, and the
//! bounded-staleness read policy.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

/// Errors of freshness waits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The published snapshot did not reach the resource version in time.
    #[error(
        "timed out after {waited:?} waiting for resourceVersion {target} (published: {published:?})"
    )]
    Timeout {
        /// The awaited resource version.
        target: String,
        /// The resource version published when the wait gave up.
        published: Option<Arc<str>>,
        /// How long the wait lasted.
        waited: Duration,
    },
    /// The resource version is not a decimal number, so it cannot be ordered against published
    /// versions (Kubernetes' etcd-backed versions always are; others are opaque).
    #[error(
        "resourceVersion {0:?} is not a decimal number: it cannot be ordered, so it cannot be awaited"
    )]
    Unordered(String),
    /// A fresh read waited `waited` and the writer had still not caught up.
    #[error(
        "fresh read gave up after {waited:?}: the writer still lags {lag_deltas} deltas / {lag:?} behind"
    )]
    StillStale {
        /// Deltas not yet applied when the read gave up.
        lag_deltas: usize,
        /// Age of the oldest delta not yet applied when the read gave up.
        lag: Duration,
        /// How long the read waited.
        waited: Duration,
    },
    /// The informer stopped (its processing loop ended) before the wait was satisfied.
    #[error("the informer stopped before the published snapshot caught up")]
    Stopped,
}

/// `Result` with the freshness [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Parses a Kubernetes resource version for ordering. etcd-backed versions are decimal `u64`
/// numbers and compare numerically; anything else is opaque and yields `None`.
pub fn parse_resource_version(rv: &str) -> Option<u64> {
    if rv.is_empty() || !rv.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rv.parse().ok()
}

/// What the latest publication includes, sent on a watch channel after every publication
/// ([`Informer::subscribe`](crate::Informer::subscribe)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The resource version the published snapshot includes (the newest seen: the maximum for
    /// numeric versions, the last one for opaque versions).
    pub resource_version: Option<Arc<str>>,
    /// The highest numeric resource version the published snapshot includes.
    pub resource_version_num: Option<u64>,
    /// The store's publication count of that snapshot.
    pub publication: u64,
    /// Every queue entry with an id up to this one is applied and published.
    pub applied_through: u64,
    /// Deltas applied since the informer started.
    pub deltas_applied: u64,
    /// When the snapshot was published.
    pub published_at: Instant,
    /// Whether the informer has synced (its first list is applied and distributed).
    pub synced: bool,
    /// Whether the processing loop has ended (the informer was shut down): nothing more will
    /// be published.
    pub stopped: bool,
}

impl Progress {
    pub(crate) fn initial() -> Self {
        Progress {
            resource_version: None,
            resource_version_num: None,
            publication: 0,
            applied_through: 0,
            deltas_applied: 0,
            published_at: Instant::now(),
            synced: false,
            stopped: false,
        }
    }

    /// Whether the published snapshot includes `target` (numeric comparison).
    pub fn includes(&self, target: u64) -> bool {
        self.resource_version_num.is_some_and(|n| n >= target)
    }
}

/// How much staleness a read accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Freshness {
    /// Whatever is published now; never waits.
    #[default]
    AcceptStale,
    /// If the writer's lag passes the informer's [`FreshnessPolicy`] bound, wait until the
    /// published snapshot includes everything queued at the time of the read.
    Fresh,
}

/// The bound on the writer's lag beyond which [`Freshness::Fresh`] reads wait: the field
/// report's proposal (like etcd's applied-vs-committed gap), generalised to deltas and time.
///
/// With neither bound set, fresh reads never wait.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct FreshnessPolicy {
    /// Wait when more than this many deltas are queued or in flight.
    pub max_lag_deltas: Option<usize>,
    /// Wait when the oldest delta not yet applied is older than this.
    pub max_lag_time: Option<Duration>,
    /// Give up after waiting this long ([`Error::StillStale`]).
    pub max_wait: Duration,
}

impl Default for FreshnessPolicy {
    fn default() -> Self {
        FreshnessPolicy {
            max_lag_deltas: None,
            max_lag_time: None,
            max_wait: Duration::from_secs(5),
        }
    }
}

impl FreshnessPolicy {
    /// A policy under which fresh reads never wait.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the bound in deltas.
    pub fn max_lag_deltas(mut self, deltas: usize) -> Self {
        self.max_lag_deltas = Some(deltas);
        self
    }

    /// Sets the bound in time.
    pub fn max_lag_time(mut self, lag: Duration) -> Self {
        self.max_lag_time = Some(lag);
        self
    }

    /// Sets how long a fresh read waits at most.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// Whether a writer lagging `lag_deltas` deltas and `lag` time is past the bound.
    pub fn exceeded(&self, lag_deltas: usize, lag: Duration) -> bool {
        self.max_lag_deltas.is_some_and(|m| lag_deltas > m)
            || self.max_lag_time.is_some_and(|m| lag_deltas > 0 && lag > m)
    }
}

/// Tracks the resource version the published snapshot includes, never going backwards for
/// numeric versions (a `Sync` re-applies old objects).
#[derive(Debug, Default)]
pub(crate) struct RvTracker {
    pub(crate) num: Option<u64>,
    pub(crate) text: Option<Arc<str>>,
}

impl RvTracker {
    /// Offers a version seen in the batch; returns whether the tracked version changed.
    pub(crate) fn offer(&mut self, rv: &str) -> bool {
        if rv.is_empty() {
            return false;
        }
        match parse_resource_version(rv) {
            Some(n) => {
                if self.num.is_none_or(|m| n > m) {
                    self.num = Some(n);
                    self.text = Some(rv.into());
                    return true;
                }
                false
            }
            None => {
                if self.text.as_deref() != Some(rv) {
                    self.text = Some(rv.into());
                    return true;
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_versions_parse_only_as_decimal_numbers() {
        assert_eq!(parse_resource_version("12345"), Some(12345));
        assert_eq!(parse_resource_version(""), None);
        assert_eq!(parse_resource_version("+1"), None);
        assert_eq!(parse_resource_version("abc"), None);
        assert_eq!(parse_resource_version("99999999999999999999999"), None);
    }

    #[test]
    fn tracked_version_never_goes_backwards() {
        let mut t = RvTracker::default();
        assert!(t.offer("10"));
        assert!(!t.offer("9"));
        assert!(t.offer("11"));
        assert_eq!(t.num, Some(11));
        assert_eq!(t.text.as_deref(), Some("11"));
    }

    #[test]
    fn time_bound_needs_a_pending_delta() {
        let p = FreshnessPolicy::new().max_lag_time(Duration::from_millis(10));
        assert!(!p.exceeded(0, Duration::from_secs(1)));
        assert!(p.exceeded(1, Duration::from_secs(1)));
        assert!(!FreshnessPolicy::new().exceeded(1_000_000, Duration::from_secs(100)));
    }
}
