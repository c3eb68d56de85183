//! The baselines' pipeline: the work an informer does, around a cache that is not ours.
//!
//! Events enter a [`RealFifo`] (client-go's queue since 1.33, and our informer's default); one
//! applier thread pops batches of up to 1000 deltas, applies them to the cache under test
//! (which decides how often it locks), records each delta's staleness, advances the visible
//! resource version once the cache includes a batch's version, and then tells the controllers
//! which sets and daemon sets changed (client-go's event handlers, after the store is updated).
//!
//! kube-rs has no delta queue: its reflector applies each event from the watch stream to its
//! store. For the kube-rs row the queue stands for the socket's buffer: a popped batch is
//! acknowledged at once, and each object is moved into kube-rs' event uniquely owned, so that
//! `apply_watcher_event`'s own copy is the only one (as for a kube-rs user, whose objects come
//! decoded from the watch).

use std::{
    sync::{Arc, Mutex},
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::{Delta, DeltaObject, Queue, QueueConfig, RealFifo, parse_resource_version};

use super::{
    cache::{
        Bookkeeper, CacheCounters, CacheOutcome, Changed, Notify, Observation, PodCache, SeedCache,
        VisibleVersion, Wiring,
    },
    slots::{SlotLog, Staleness},
};
use crate::{
    harness::placement::pin,
    pods::access,
    rows::{CacheKind, CacheReader, CacheWriter, KnownPods, SimChange},
};

/// Largest batch the applier pops at once (client-go 1.35's batch limit).
pub const MAX_BATCH: usize = 1000;

/// What the applier hands back when it stops.
struct Applied {
    store: Box<dyn CacheWriter>,
    applied: u64,
    processing: Duration,
    depth_max: u64,
    staleness: Staleness,
}

/// A baseline cache behind the harness pipeline.
pub struct HarnessCache {
    queue: Arc<RealFifo<Pod>>,
    reader: Arc<dyn CacheReader>,
    visible: Arc<VisibleVersion>,
    counters: Arc<CacheCounters>,
    applier: Mutex<Option<thread::JoinHandle<Applied>>>,
}

/// The controllers' reads of a baseline cache.
struct HarnessPodCache {
    reader: Arc<dyn CacheReader>,
    visible: Arc<VisibleVersion>,
}

impl PodCache for HarnessPodCache {
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        self.reader.list_namespace_selector(ns, key, value)
    }
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.reader.by_owner(uid)
    }
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.reader.by_node(node)
    }
    fn includes(&self, rv: u64) -> bool {
        self.visible.includes(rv)
    }
}

/// The controllers' reads of any cache under test, with the visibility of a harness pipeline
/// (for tests that drive controllers by hand).
pub fn harness_pod_cache(
    reader: Arc<dyn CacheReader>,
    visible: Arc<VisibleVersion>,
) -> Arc<dyn PodCache> {
    Arc::new(HarnessPodCache { reader, visible })
}

impl HarnessCache {
    /// Starts the applier over an empty cache of `kind`, connected as `wiring` says.
    pub fn start(kind: CacheKind, wiring: Wiring) -> HarnessCache {
        Self::start_with(kind.build(), kind.takes_events_by_value(), wiring)
    }

    /// Starts the applier over `store`. With `ack_first`, each batch is acknowledged before it
    /// is applied (the kube-rs row; see the module docs).
    pub fn start_with(
        store: Box<dyn CacheWriter>,
        ack_first: bool,
        wiring: Wiring,
    ) -> HarnessCache {
        let Wiring { classifier, notify, slots, core } = wiring;
        let reader = store.reader();
        // The queue knows the store's objects, as client-go's queue knows its indexer.
        let known = Arc::new(KnownPods::new(reader.clone()));
        let queue = Arc::new(RealFifo::new(access::<Pod>(), known, QueueConfig::default()));
        let visible = Arc::new(VisibleVersion::default());
        let counters = Arc::new(CacheCounters::default());
        let applier = {
            let (queue, visible) = (queue.clone(), visible.clone());
            let books = Bookkeeper::new(classifier, counters.clone());
            thread::Builder::new()
                .name("applier".into())
                .spawn(move || {
                    pin(core);
                    Applier { store, queue, visible, books, notify, slots, ack_first }.run()
                })
                .expect("spawn applier")
        };
        HarnessCache { queue, reader, visible, counters, applier: Mutex::new(Some(applier)) }
    }

    /// The cache's reader.
    pub fn reader(&self) -> Arc<dyn CacheReader> {
        self.reader.clone()
    }

    /// The visible resource version.
    pub fn visible(&self) -> &Arc<VisibleVersion> {
        &self.visible
    }
}

impl SeedCache for HarnessCache {
    fn queue(&self) -> Arc<dyn Queue<Pod>> {
        self.queue.clone()
    }
    fn pod_cache(&self) -> Arc<dyn PodCache> {
        harness_pod_cache(self.reader.clone(), self.visible.clone())
    }
    fn counters(&self) -> &CacheCounters {
        &self.counters
    }
    fn wait_for(&self, rv: u64, timeout: Duration) -> bool {
        self.visible.wait_for(rv, timeout)
    }
    fn finish(self: Box<Self>, leak: bool) -> CacheOutcome {
        self.queue.close();
        let handle = self.applier.lock().unwrap_or_else(|e| e.into_inner()).take();
        let a = handle.expect("finished once").join().expect("applier panicked");
        let outcome = CacheOutcome {
            applied: a.applied,
            processing_s: a.processing.as_secs_f64(),
            depth_max: a.depth_max,
            staleness: a.staleness,
            extra_copies: a.store.extra_copies(),
            pods: self.reader.list_all().len() as u64,
        };
        if leak {
            // A worker process exits right after: freeing gigabytes of pods object by object
            // would only add seconds to the run.
            std::mem::forget(a.store);
            std::mem::forget(self);
        }
        outcome
    }
}

/// The applier thread's state.
struct Applier {
    store: Box<dyn CacheWriter>,
    queue: Arc<RealFifo<Pod>>,
    visible: Arc<VisibleVersion>,
    books: Bookkeeper,
    notify: Arc<dyn Notify>,
    slots: Arc<SlotLog>,
    ack_first: bool,
}

fn rv_of(delta: &Delta<Pod>) -> Option<u64> {
    let pod = delta.object.object()?;
    pod.metadata.resource_version.as_deref().and_then(parse_resource_version)
}

/// The change a delta makes, its object moved (not copied) out of it.
fn into_change(d: Delta<Pod>) -> SimChange {
    let deleted = d.is_delete();
    let obj = match d.object {
        DeltaObject::Object(o) => Some(o),
        DeltaObject::Tombstone(t) => t.obj,
    };
    if deleted {
        SimChange::Delete(d.key, obj)
    } else {
        SimChange::Upsert(obj.expect("non-delete deltas carry objects"))
    }
}

impl Applier {
    fn run(mut self) -> Applied {
        let (mut applied, mut processing, mut depth_max) = (0u64, Duration::ZERO, 0u64);
        let mut staleness = Staleness::default();
        let mut local = Staleness::default();
        while let Ok(mut batch) = futures::executor::block_on(self.queue.pop_batch(MAX_BATCH)) {
            let started = Instant::now();
            depth_max = depth_max.max((batch.depth_after + batch.entries) as u64);
            if self.ack_first {
                self.queue.done(&batch);
            }
            // What the report and the handlers need, read before the objects move into the
            // cache (no reference is kept: kube-rs must get them uniquely owned).
            let stamps: Vec<(Option<u64>, Instant)> =
                batch.deltas.iter().map(|d| (rv_of(d), d.enqueued_at)).collect();
            let observations: Vec<(Arc<str>, Observation)> = batch
                .deltas
                .iter()
                .map(|d| {
                    let obj = d.object.object().map(|p| &**p);
                    let obs = if d.is_delete() {
                        self.books.classify(None, obj)
                    } else {
                        self.books.classify(obj, None)
                    };
                    (d.key.clone(), obs)
                })
                .collect();
            let changes: Vec<SimChange> =
                std::mem::take(&mut batch.deltas).into_iter().map(into_change).collect();
            let mut seen = 0;
            let slots = &self.slots;
            self.store.apply_changes(changes, &mut |done, at| {
                for &(rv, enqueued_at) in &stamps[seen..done] {
                    local.record(rv.and_then(|rv| slots.take(rv)), enqueued_at, at);
                }
                seen = done;
            });
            if !self.ack_first {
                self.queue.done(&batch);
            }
            if let Some(rv) = batch.resource_version.as_deref().and_then(parse_resource_version) {
                self.visible.advance(rv);
            }
            self.tell_handlers(observations);
            applied += stamps.len() as u64;
            processing += started.elapsed();
            if local.from_queue.count() >= 10_000 {
                staleness.merge(&local);
                local = Staleness::default();
            }
        }
        staleness.merge(&local);
        Applied { store: self.store, applied, processing, depth_max, staleness }
    }

    /// Bookkeeping and notifications, after the batch is visible.
    fn tell_handlers(&mut self, observations: Vec<(Arc<str>, Observation)>) {
        let mut sets: Vec<String> = Vec::new();
        let mut daemon = false;
        for (key, obs) in observations {
            match self.books.record(&key, obs) {
                Some(Changed::Set(set)) => sets.push(set),
                Some(Changed::Daemon) => daemon = true,
                None => {}
            }
        }
        sets.sort_unstable();
        sets.dedup();
        for set in &sets {
            self.notify.set_pod_changed(set);
        }
        if daemon {
            self.notify.daemon_pod_changed();
        }
    }
}
