//! The read side read-your-writes needs: a cache that can tell the resource version its
//! readers see, and wait for one.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use snapinformer_core::{Informer, freshness};
use snapinformer_store::Backend;
use tokio::sync::watch;

/// Errors of waiting for a cache.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The cache did not show the version within the timeout.
    #[error("cache {cache:?} did not reach resourceVersion {version} within {timeout:?}")]
    Timeout {
        /// The cache's name.
        cache: String,
        /// The awaited version.
        version: u64,
        /// How long the wait lasted.
        timeout: Duration,
    },
    /// The cache stopped: it will never reach the version.
    #[error("cache {0:?} stopped")]
    Stopped(String),
}

/// `Result` with the cache [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed, sendable future (what [`VersionedCache::wait_for_version`] returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A cache whose readers see the cluster as of a known resource version, and that can wait
/// until they see a later one. Read-your-writes needs nothing else from a cache.
///
/// Implemented for [`Informer`] (and so, through `Deref`, usable with a `KubeInformer`'s
/// informer), and by [`VisibleVersion`], which any other cache's writer can keep (a locked
/// map, kube-rs' store, a cache fed from an in-process cluster model), so the same controller
/// logic runs on each.
///
/// Versions are etcd's: decimal numbers that grow with every write in the cluster. A cache
/// *includes* version `v` once its readers' view reflects every change up to `v`.
pub trait VersionedCache: Send + Sync + 'static {
    /// A name for logs and metrics.
    fn name(&self) -> &str;

    /// The highest resource version readers see now (`None` before the first list).
    fn visible_version(&self) -> Option<u64>;

    /// Resolves once readers see `version` or later ([`Error::Timeout`] after `timeout`,
    /// [`Error::Stopped`] if the cache can never get there). Must use Tokio's clock for the
    /// timeout, so that tests with a paused clock work.
    fn wait_for_version(&self, version: u64, timeout: Duration) -> BoxFuture<'_, Result<()>>;

    /// Whether readers see `version` or later now.
    fn includes(&self, version: u64) -> bool {
        self.visible_version().is_some_and(|v| v >= version)
    }
}

impl<C: VersionedCache + ?Sized> VersionedCache for Arc<C> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn visible_version(&self) -> Option<u64> {
        (**self).visible_version()
    }
    fn wait_for_version(&self, version: u64, timeout: Duration) -> BoxFuture<'_, Result<()>> {
        (**self).wait_for_version(version, timeout)
    }
}

impl<T: Send + Sync + 'static, B: Backend> VersionedCache for Informer<T, B> {
    fn name(&self) -> &str {
        Informer::name(self)
    }

    fn visible_version(&self) -> Option<u64> {
        self.progress().resource_version_num
    }

    fn wait_for_version(&self, version: u64, timeout: Duration) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            match self.wait_for(&version.to_string(), timeout).await {
                Ok(_) => Ok(()),
                Err(freshness::Error::Timeout { .. }) => {
                    Err(Error::Timeout { cache: self.name().to_owned(), version, timeout })
                }
                // A decimal number always parses, so only `Stopped` is left.
                Err(_) => Err(Error::Stopped(self.name().to_owned())),
            }
        })
    }
}

/// The version a custom cache's readers see, kept by the cache's writer: the
/// [`VersionedCache`] of a cache that is not an [`Informer`] (a kube-rs store fed by a
/// reflector, a map behind a lock, a test's fake).
///
/// The writer calls [`advance`](VisibleVersion::advance) once its readers' view includes a
/// version (after the change is applied, not before); waits for that version or an earlier one
/// then end. Register it with the controller
/// ([`Controller::owns_cache`](crate::Controller::owns_cache) and friends), shared through an
/// `Arc` with the writer.
///
/// Costs: `advance` is a compare and, when the version grows, a store and a wake-up of the
/// waiting tasks; a wait is one subscription to a Tokio watch channel.
#[derive(Debug)]
pub struct VisibleVersion {
    name: String,
    version: watch::Sender<Option<u64>>,
}

impl VisibleVersion {
    /// A cache named `name` (logs, metrics) whose readers see nothing yet.
    pub fn new(name: impl Into<String>) -> Self {
        VisibleVersion { name: name.into(), version: watch::Sender::new(None) }
    }

    /// Records that readers now see `version` (and every earlier one). Never goes back: an
    /// older version than the one recorded changes nothing.
    pub fn advance(&self, version: u64) {
        self.version.send_if_modified(|v| {
            let newer = v.is_none_or(|current| version > current);
            if newer {
                *v = Some(version);
            }
            newer
        });
    }
}

impl VersionedCache for VisibleVersion {
    fn name(&self) -> &str {
        &self.name
    }

    fn visible_version(&self) -> Option<u64> {
        *self.version.borrow()
    }

    fn wait_for_version(&self, version: u64, timeout: Duration) -> BoxFuture<'_, Result<()>> {
        let mut seen = self.version.subscribe();
        Box::pin(async move {
            let reached = seen.wait_for(|v| v.is_some_and(|v| v >= version));
            match tokio::time::timeout(timeout, reached).await {
                Ok(Ok(_)) => Ok(()),
                // `self` holds the sender: the channel cannot close while this borrows it.
                Ok(Err(_)) => Err(Error::Stopped(self.name.clone())),
                Err(_) => Err(Error::Timeout { cache: self.name.clone(), version, timeout }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::{pin::pin, task::Poll};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_visible_version_wakes_its_waiters_when_it_reaches_their_version_and_never_goes_back()
    {
        let v = VisibleVersion::new("pods");
        assert_eq!(v.visible_version(), None);
        let mut wait = pin!(v.wait_for_version(5, Duration::from_secs(10)));
        let pending =
            std::future::poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx).is_pending())).await;
        assert!(pending, "nothing visible yet");
        v.advance(4);
        v.advance(7);
        v.advance(6);
        assert_eq!(v.visible_version(), Some(7), "an older version changes nothing");
        assert_eq!(wait.await, Ok(()));
        assert!(v.includes(7) && !v.includes(8));
        let late = v.wait_for_version(8, Duration::from_secs(1)).await;
        assert_eq!(
            late,
            Err(Error::Timeout {
                cache: "pods".into(),
                version: 8,
                timeout: Duration::from_secs(1)
            })
        );
    }
}
