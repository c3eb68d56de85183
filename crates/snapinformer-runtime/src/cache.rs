//! The read side read-your-writes needs: a cache that can tell the resource version its
//! readers see, and wait for one.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use snapinformer_core::{Informer, freshness};
use snapinformer_store::Backend;

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
/// informer); the simulator implements it for its baselines (a locked map, kube-rs' store, a
/// cache fed from an in-process cluster model), so the same controller logic runs on each.
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
