//! An adapter for kube-rs users: feed a `kube::runtime::watcher` stream into a snapinformer
//! queue, so a kube-rs controller can swap its `reflector::Store` for this crate's store and
//! informer in a few lines.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::{Api, runtime::{WatchStreamExt, watcher}};
//! use snapinformer_core::Informer;
//!
//! let informer = Informer::<Pod>::builder(snapinformer_kube::access()).name("pods").build()?;
//! informer.start()?;
//! let stream = watcher(Api::<Pod>::all(client), watcher::Config::default()).default_backoff();
//! tokio::spawn(snapinformer_kube::feed_watcher(stream, informer.queue().clone()));
//! // Read snapshots instead of `Store::state()`: no lock, no copy of the whole list.
//! let snapshot = informer.snapshot();
//! # Ok(()) }
//! ```
//!
//! kube-rs' watcher does not pass on a list's resource version, so a relist is queued with the
//! highest numeric version among its objects (`"0"` for an empty list): the published
//! snapshot's version is then a lower bound of what it includes, never an overstatement.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::{Resource, runtime::watcher};
use snapinformer_core::Queue;

use crate::{Error, Result, access::has_name};

/// What [`feed_watcher`] passed on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatcherStats {
    /// Relists (`Init` ... `InitDone`) queued as one `replace` each.
    pub relists: u64,
    /// Objects applied or deleted outside relists.
    pub events: u64,
    /// Errors the watcher reported (it retries by itself when given a backoff).
    pub errors: u64,
    /// Objects without a name, skipped.
    pub malformed: u64,
}

/// Feeds one kube-rs watcher event at a time into a queue; [`feed_watcher`] drives it over a
/// stream.
#[derive(Debug)]
pub struct WatcherAdapter<K> {
    queue: Arc<dyn Queue<K>>,
    init: Option<Vec<Arc<K>>>,
    stats: WatcherStats,
}

impl<K: Resource + Send + Sync + 'static> WatcherAdapter<K> {
    /// An adapter feeding `queue`.
    pub fn new(queue: Arc<dyn Queue<K>>) -> Self {
        WatcherAdapter { queue, init: None, stats: WatcherStats::default() }
    }

    /// What was passed on so far.
    pub fn stats(&self) -> &WatcherStats {
        &self.stats
    }

    /// Applies one watcher event: `Apply` and `Delete` are queued at once; `InitApply` objects
    /// are collected until `InitDone`, which queues them as one `replace` (so objects that
    /// disappeared during a relist become tombstones). Fails only when the queue is closed.
    pub async fn apply(&mut self, event: watcher::Event<K>) -> Result<()> {
        let closed = |_| Error::QueueClosed;
        match event {
            watcher::Event::Init => self.init = Some(Vec::new()),
            watcher::Event::InitApply(obj) => {
                if !has_name(&obj) {
                    self.stats.malformed += 1;
                    return Ok(());
                }
                self.init.get_or_insert_with(Vec::new).push(Arc::new(obj));
            }
            watcher::Event::InitDone => {
                let items = self.init.take().unwrap_or_default();
                let rv = items
                    .iter()
                    .filter_map(|o| {
                        o.meta()
                            .resource_version
                            .as_deref()
                            .and_then(snapinformer_core::parse_resource_version)
                    })
                    .max()
                    .unwrap_or(0);
                self.queue.replace(items, &rv.to_string()).map_err(|_| Error::QueueClosed)?;
                self.stats.relists += 1;
            }
            watcher::Event::Apply(obj) | watcher::Event::Delete(obj) if !has_name(&obj) => {
                self.stats.malformed += 1;
            }
            watcher::Event::Apply(obj) => {
                self.queue.wait_capacity().await;
                self.queue.update(Arc::new(obj)).map_err(closed)?;
                self.stats.events += 1;
            }
            watcher::Event::Delete(obj) => {
                self.queue.wait_capacity().await;
                self.queue.delete(Arc::new(obj)).map_err(closed)?;
                self.stats.events += 1;
            }
        }
        Ok(())
    }
}

/// Feeds a kube-rs watcher stream into `queue` until the stream ends (returns what was passed
/// on) or the queue closes ([`Error::QueueClosed`]). Watcher errors are counted and logged; give
/// the watcher a backoff (`WatchStreamExt::default_backoff`) so that it retries.
pub async fn feed_watcher<K, S>(stream: S, queue: Arc<dyn Queue<K>>) -> Result<WatcherStats>
where
    K: Resource + Send + Sync + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut adapter = WatcherAdapter::new(queue);
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => adapter.apply(event).await?,
            Err(e) => {
                adapter.stats.errors += 1;
                tracing::warn!(error = %e, "kube-rs watcher error");
            }
        }
    }
    Ok(adapter.stats)
}
