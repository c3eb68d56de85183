//! Our rows as a user runs them: the product's public informer API.
//!
//! An [`InformerFactory`] builds the shared pod informer (our store with the pod indexes,
//! client-go's `RealFIFO`, batches of up to 1000); its processing loop runs on a thread of its
//! own (the peer of the baselines' applier thread, pinned like it). The source feeds the
//! informer's queue: the in-process cluster model, or a
//! [`Reflector`](snapinformer_kube::Reflector) over HTTP. The controllers are attached as users
//! attach them, with the runtime's [`Controller::owns`](snapinformer_runtime::Controller::owns):
//! each registers its own event handler on the informer, and their read-your-writes waits with
//! [`Informer::wait_for`] (the informer is their [`VersionedCache`]). They read through the
//! informer's [`Lister`] and snapshots; the drain at the end waits with `wait_for` too. The
//! report's bookkeeping (which pods run) is one more registered [`EventHandler`]. Staleness
//! comes from the `on_publish` hook.

use std::{
    sync::{Arc, Mutex, OnceLock},
    thread,
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::{
    DEFAULT_BATCH_WINDOW, DeltaObject, EventHandler, Informer, InformerBuilder, InformerFactory,
    Lister, Published, Queue, QueueKind, parse_resource_version,
};
use snapinformer_runtime::VersionedCache;
use snapinformer_store::{Backend, Chunked, Hamt, StoreBuilder};

use super::{
    cache::{Bookkeeper, CacheCounters, CacheOutcome, PodCache, SeedCache, Wiring},
    controllers::Controllers,
    pipeline::MAX_BATCH,
    slots::Staleness,
};
use crate::{
    harness::placement::pin,
    pods::{NODE_NAME_INDEX, OWNER_UID_INDEX, access, covering_pod_indexers, pod_indexers},
    rows::CacheKind,
};

/// What the publish hook measures.
#[derive(Default)]
struct Measured {
    staleness: Staleness,
    depth_max: u64,
}

/// One of our rows, run through the public informer API.
pub struct InformerCache<B: Backend> {
    informer: Informer<Pod, B>,
    counters: Arc<CacheCounters>,
    measured: Arc<Mutex<Measured>>,
    /// The informer's metrics (the processing time comes from its batch-duration histogram).
    registry: prometheus_client::registry::Registry,
    /// Stops the processing thread.
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

/// Starts our row `kind` (its store backend and reclamation), connected as `wiring` says.
/// Returns `None` for a row that is not ours.
pub fn start(kind: CacheKind, wiring: Wiring) -> Result<Option<Box<dyn SeedCache>>, String> {
    let store = || StoreBuilder::new(access::<Pod>()).indexers(pod_indexers());
    let store_with_covering_owner_index =
        || StoreBuilder::new(access::<Pod>()).indexers(covering_pod_indexers());
    Ok(Some(match kind {
        CacheKind::Snapshot => {
            Box::new(InformerCache::<Chunked>::start(store().background_reclaim(false), wiring)?)
        }
        CacheKind::SnapshotBg => {
            Box::new(InformerCache::<Chunked>::start(store().background_reclaim(true), wiring)?)
        }
        CacheKind::SnapshotBgCovering => Box::new(InformerCache::<Chunked>::start(
            store_with_covering_owner_index().background_reclaim(true),
            wiring,
        )?),
        CacheKind::SnapshotHamt => {
            Box::new(InformerCache::<Hamt>::start(store().backend::<Hamt>(), wiring)?)
        }
        _ => return Ok(None),
    }))
}

/// The report's bookkeeping (which pods the cache shows Running), as a registered handler.
struct BookkeepingHandler(Bookkeeper);

fn key_of(pod: &Pod) -> Option<Arc<str>> {
    access::<Pod>().key(pod).ok().map(Arc::from)
}

impl EventHandler<Pod> for BookkeepingHandler {
    fn on_add(&mut self, obj: &Arc<Pod>, _is_in_initial_list: bool) {
        if let Some(key) = key_of(obj) {
            self.0.observe(&key, Some(obj));
        }
    }
    fn on_update(&mut self, _old: &Arc<Pod>, new: &Arc<Pod>) {
        if let Some(key) = key_of(new) {
            self.0.observe(&key, Some(new));
        }
    }
    fn on_delete(&mut self, obj: &DeltaObject<Pod>) {
        let key = match obj {
            DeltaObject::Object(o) => key_of(o),
            DeltaObject::Tombstone(t) => Some(t.key.clone()),
        };
        if let Some(key) = key {
            self.0.observe(&key, None);
        }
    }
}

/// The controllers' reads through the informer: its lister for namespace lists, snapshots'
/// indexes for lookups.
struct InformerPodCache<B: Backend> {
    informer: Informer<Pod, B>,
    lister: Lister<Pod, B>,
}

impl<B: Backend> PodCache for InformerPodCache<B> {
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        self.lister.namespace(ns).list_by_labels(&[(key, value)])
    }
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.informer.snapshot().by_index(OWNER_UID_INDEX, uid).expect("the owner index exists")
    }
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.informer.snapshot().by_index(NODE_NAME_INDEX, node).expect("the node index exists")
    }
}

impl<B: Backend> InformerCache<B> {
    fn start(store: StoreBuilder<Pod, B>, wiring: Wiring) -> Result<Self, String> {
        let Wiring { classifier, slots, core, batch_window, .. } = wiring;
        let measured = Arc::new(Mutex::new(Measured::default()));
        let queue_cell: Arc<OnceLock<Arc<dyn Queue<Pod>>>> = Arc::new(OnceLock::new());
        let hook = {
            let (measured, queue_cell) = (measured.clone(), queue_cell.clone());
            move |p: &Published<'_, Pod>| {
                let mut m = measured.lock().unwrap_or_else(|e| e.into_inner());
                let depth = queue_cell.get().map_or(0, |q| q.len()) + p.deltas.len();
                m.depth_max = m.depth_max.max(depth as u64);
                for d in p.deltas {
                    let rv = d
                        .object
                        .object()
                        .and_then(|o| o.metadata.resource_version.as_deref())
                        .and_then(parse_resource_version);
                    m.staleness.record(
                        rv.and_then(|rv| slots.take(rv)),
                        d.enqueued_at,
                        p.published_at,
                    );
                }
            }
        };
        let factory = Arc::new(InformerFactory::new());
        let informer = factory
            .informer("pods", || {
                InformerBuilder::with_store(store)
                    .name("pods")
                    .queue(QueueKind::Real)
                    .max_batch(MAX_BATCH)
                    .batch_window(batch_window.unwrap_or(DEFAULT_BATCH_WINDOW))
                    .on_publish(hook)
                    .build()
            })
            .map_err(|e| format!("building the pod informer: {e}"))?;
        let _ = queue_cell.set(informer.queue().clone());
        let mut registry = prometheus_client::registry::Registry::default();
        informer.register_metrics(&mut registry);
        let counters = Arc::new(CacheCounters::default());
        informer
            .add_event_handler(BookkeepingHandler(Bookkeeper::new(classifier, counters.clone())))
            .map_err(|e| format!("registering the bookkeeping handler: {e}"))?;
        // The processing loop on a thread of its own, as the baselines' applier.
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (started_tx, started_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let thread = {
            let (factory, informer) = (factory.clone(), informer.clone());
            thread::Builder::new()
                .name("informer".into())
                .spawn(move || {
                    pin(core);
                    let rt =
                        match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                            Ok(rt) => rt,
                            Err(e) => {
                                let _ = started_tx.send(Err(format!("informer runtime: {e}")));
                                return;
                            }
                        };
                    rt.block_on(async move {
                        let _ = started_tx.send(factory.start().map_err(|e| e.to_string()));
                        let _ = stop_rx.await;
                        informer.shutdown().await;
                    });
                })
                .map_err(|e| format!("spawning the informer thread: {e}"))?
        };
        started_rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| "the informer thread did not start".to_owned())??;
        Ok(InformerCache {
            informer,
            counters,
            measured,
            registry,
            stop: Mutex::new(Some(stop_tx)),
            thread: Mutex::new(Some(thread)),
        })
    }
}

/// The sum of the informer's `batch_duration_seconds` histogram: seconds spent applying,
/// publishing and distributing batches (read from the metrics a user would scrape).
fn batch_seconds(registry: &prometheus_client::registry::Registry) -> f64 {
    let text = snapinformer_core::metrics::encode_text(registry).unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("snapinformer_batch_duration_seconds_sum"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

impl<B: Backend> SeedCache for InformerCache<B> {
    fn queue(&self) -> Arc<dyn Queue<Pod>> {
        self.informer.queue().clone()
    }
    fn pod_cache(&self) -> Arc<dyn PodCache> {
        Arc::new(InformerPodCache {
            informer: self.informer.clone(),
            lister: self.informer.lister(),
        })
    }
    fn versioned(&self) -> Arc<dyn VersionedCache> {
        Arc::new(self.informer.clone())
    }
    fn attach(&self, controllers: Controllers) -> Controllers {
        Controllers {
            sets: controllers.sets.owns(&self.informer),
            daemons: controllers.daemons.owns(&self.informer),
        }
    }
    fn counters(&self) -> &CacheCounters {
        &self.counters
    }
    fn finish(self: Box<Self>, leak: bool) -> CacheOutcome {
        // Shutting down applies what is queued, then stops the processing loop.
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
        let metrics = self.informer.metrics();
        let measured =
            std::mem::take(&mut *self.measured.lock().unwrap_or_else(|e| e.into_inner()));
        let outcome = CacheOutcome {
            applied: metrics.deltas_applied.get(),
            processing_s: batch_seconds(&self.registry),
            depth_max: measured.depth_max,
            staleness: measured.staleness,
            extra_copies: 0,
            pods: self.informer.snapshot().len() as u64,
        };
        if leak {
            // A worker process exits right after (see the pipeline's `finish`).
            std::mem::forget(self);
        }
        outcome
    }
}
