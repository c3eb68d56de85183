//! The baselines' pipeline: the work an informer does, around a cache that is not ours.
//!
//! Events enter a [`RealFifo`] (client-go's queue since 1.33, and our informer's default); one
//! applier thread pops batches of up to 1000 deltas, applies them to the cache under test
//! (which decides how often it locks), records each delta's staleness, advances the visible
//! resource version once the cache includes a batch's version, and then hands the batch's
//! notifications to a handler thread (client-go's informer hands them to its listeners'
//! goroutines; ours to its handlers' threads). The handler thread keeps the report's
//! bookkeeping and tells the attached controllers, through their runtime handles, which pods
//! appeared, changed or went away: a pod the bookkeeping did not know is an add (client-go
//! decides add or update by whether the store had the key), and as the old object is not
//! looked up, a change is reported without it ([`Handle::owned_changed`]).
//!
//! The notifications carry a copy of the part of each pod the handlers read (key, owner
//! references, deletion timestamp, node, phase), made before the pod moves into the cache, as
//! kube-rs' store must get it uniquely owned.
//!
//! With `--baseline-batch-window` (a control, off by default: client-go has no such wait) the
//! applier waits out a batch window by the rule our informer follows by default: after a batch
//! that was not full, if deltas arrived while it was applied, it sleeps until the window has
//! passed since that batch began (an applier that keeps up publishes each delta at once).
//!
//! kube-rs has no delta queue: its reflector applies each event from the watch stream to its
//! store. For the kube-rs row the queue stands for the socket's buffer: a popped batch is
//! acknowledged at once, and each object is moved into kube-rs' event uniquely owned, so that
//! `apply_watcher_event`'s own copy is the only one (as for a kube-rs user, whose objects come
//! decoded from the watch).

use std::{
    sync::{Arc, Mutex, PoisonError, RwLock, mpsc},
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use snapinformer_core::{Delta, DeltaObject, Queue, QueueConfig, RealFifo, parse_resource_version};
use snapinformer_runtime::{Handle, VersionedCache, VisibleVersion};

use super::{
    cache::{Bookkeeper, CacheCounters, CacheOutcome, PodCache, SeedCache, Wiring},
    controllers::Controllers,
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

/// A controller's runtime handle, as the handler thread tells it about pods.
trait OwnedEvents: Send + Sync {
    fn added(&self, pod: &Pod);
    fn changed(&self, pod: &Pod);
    fn deleted(&self, pod: &Pod);
}

impl<P: 'static> OwnedEvents for Handle<P> {
    fn added(&self, pod: &Pod) {
        self.owned_added(pod);
    }
    fn changed(&self, pod: &Pod) {
        self.owned_changed(pod);
    }
    fn deleted(&self, pod: &Pod) {
        self.owned_deleted(pod);
    }
}

/// The controllers attached to a pipeline.
type Attached = Arc<RwLock<Vec<Box<dyn OwnedEvents>>>>;

/// A baseline cache behind the harness pipeline.
pub struct HarnessCache {
    queue: Arc<RealFifo<Pod>>,
    reader: Arc<dyn CacheReader>,
    visible: Arc<VisibleVersion>,
    counters: Arc<CacheCounters>,
    attached: Attached,
    applier: Mutex<Option<thread::JoinHandle<Applied>>>,
    handlers: Mutex<Option<thread::JoinHandle<()>>>,
}

/// The controllers' reads of a baseline cache.
struct HarnessPodCache(Arc<dyn CacheReader>);

impl PodCache for HarnessPodCache {
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        self.0.list_namespace_selector(ns, key, value)
    }
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.0.by_owner(uid)
    }
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.0.by_node(node)
    }
}

/// The controllers' reads of any cache under test (for tests that drive controllers by hand).
pub fn harness_pod_cache(reader: Arc<dyn CacheReader>) -> Arc<dyn PodCache> {
    Arc::new(HarnessPodCache(reader))
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
        let Wiring { classifier, slots, core, baseline_batch_window: window, .. } = wiring;
        let reader = store.reader();
        // The queue knows the store's objects, as client-go's queue knows its indexer.
        let known = Arc::new(KnownPods::new(reader.clone()));
        let queue = Arc::new(RealFifo::new(access::<Pod>(), known, QueueConfig::default()));
        let visible = Arc::new(VisibleVersion::new("pods"));
        let counters = Arc::new(CacheCounters::default());
        let attached: Attached = Arc::default();
        let (notices, received) = mpsc::channel::<Vec<Notice>>();
        let handlers = {
            let books = Bookkeeper::new(classifier, counters.clone());
            let attached = attached.clone();
            thread::Builder::new()
                .name("handlers".into())
                .spawn(move || handle_notices(&received, books, &attached))
                .expect("spawn the handler thread")
        };
        let applier = {
            let (queue, visible) = (queue.clone(), visible.clone());
            thread::Builder::new()
                .name("applier".into())
                .spawn(move || {
                    pin(core);
                    Applier { store, queue, visible, notices, slots, ack_first, window }.run()
                })
                .expect("spawn applier")
        };
        HarnessCache {
            queue,
            reader,
            visible,
            counters,
            attached,
            applier: Mutex::new(Some(applier)),
            handlers: Mutex::new(Some(handlers)),
        }
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

fn lock_poisoned<T>(e: PoisonError<T>) -> T {
    e.into_inner()
}

impl SeedCache for HarnessCache {
    fn queue(&self) -> Arc<dyn Queue<Pod>> {
        self.queue.clone()
    }
    fn pod_cache(&self) -> Arc<dyn PodCache> {
        harness_pod_cache(self.reader.clone())
    }
    fn versioned(&self) -> Arc<dyn VersionedCache> {
        self.visible.clone()
    }
    fn attach(&self, controllers: Controllers) -> Controllers {
        let Controllers { sets, daemons } = controllers;
        {
            let mut attached = self.attached.write().unwrap_or_else(lock_poisoned);
            attached.push(Box::new(sets.handle()));
            attached.push(Box::new(daemons.handle()));
        }
        Controllers {
            sets: sets.owns_cache::<Pod>(self.visible.clone()),
            daemons: daemons.owns_cache::<Pod>(self.visible.clone()),
        }
    }
    fn counters(&self) -> &CacheCounters {
        &self.counters
    }
    fn finish(self: Box<Self>, leak: bool) -> CacheOutcome {
        self.queue.close();
        let handle = self.applier.lock().unwrap_or_else(lock_poisoned).take();
        let a = handle.expect("finished once").join().expect("applier panicked");
        // The applier's end closed the notices' channel: the handler thread ends after them.
        if let Some(handlers) = self.handlers.lock().unwrap_or_else(lock_poisoned).take() {
            handlers.join().expect("the handler thread panicked");
        }
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

/// What one delta tells the handlers: its key, whether it is a delete, and the part of its pod
/// they read.
struct Notice {
    key: Arc<str>,
    deleted: bool,
    pod: Option<Pod>,
}

impl Notice {
    /// The notice of `delta`, copied before its object moves into the cache.
    fn of(delta: &Delta<Pod>) -> Notice {
        let pod = delta.object.object().map(|p| {
            let meta = &p.metadata;
            Pod {
                metadata: ObjectMeta {
                    name: meta.name.clone(),
                    namespace: meta.namespace.clone(),
                    owner_references: meta.owner_references.clone(),
                    deletion_timestamp: meta.deletion_timestamp.clone(),
                    ..ObjectMeta::default()
                },
                spec: p.spec.as_ref().map(|spec| k8s_openapi::api::core::v1::PodSpec {
                    node_name: spec.node_name.clone(),
                    ..Default::default()
                }),
                status: p.status.as_ref().map(|status| k8s_openapi::api::core::v1::PodStatus {
                    phase: status.phase.clone(),
                    ..Default::default()
                }),
            }
        });
        Notice { key: delta.key.clone(), deleted: delta.is_delete(), pod }
    }
}

/// The handler thread: for each batch the applier made visible, the bookkeeping, then the
/// attached controllers' events (a pod the bookkeeping did not know is an add).
fn handle_notices(
    received: &mpsc::Receiver<Vec<Notice>>,
    mut books: Bookkeeper,
    attached: &Attached,
) {
    while let Ok(notices) = received.recv() {
        let controllers = attached.read().unwrap_or_else(lock_poisoned);
        for Notice { key, deleted, pod } in notices {
            let existed = books.observe(&key, pod.as_ref().filter(|_| !deleted));
            let Some(pod) = pod else { continue };
            for c in controllers.iter() {
                match (deleted, existed) {
                    (true, _) => c.deleted(&pod),
                    (false, true) => c.changed(&pod),
                    (false, false) => c.added(&pod),
                }
            }
        }
    }
}

/// The applier thread's state.
struct Applier {
    store: Box<dyn CacheWriter>,
    queue: Arc<RealFifo<Pod>>,
    visible: Arc<VisibleVersion>,
    notices: mpsc::Sender<Vec<Notice>>,
    slots: Arc<SlotLog>,
    ack_first: bool,
    /// After a batch that was not full, if deltas arrived while it was applied, the applier
    /// sleeps until this much has passed since the batch began, as our informer's batch
    /// window does (zero: never).
    window: Duration,
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
            let notices: Vec<Notice> = batch.deltas.iter().map(Notice::of).collect();
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
            // Read before the version is announced, so that what arrives after a reader saw
            // this batch does not count as having arrived during it; only with a window (the
            // read takes the queue's lock).
            let arrived_during = !self.window.is_zero() && !self.queue.is_empty();
            if !self.ack_first {
                self.queue.done(&batch);
            }
            if let Some(rv) = batch.resource_version.as_deref().and_then(parse_resource_version) {
                self.visible.advance(rv);
            }
            // The handler thread outlives this loop: the send cannot fail.
            let _ = self.notices.send(notices);
            applied += stamps.len() as u64;
            processing += started.elapsed();
            if local.from_queue.count() >= 10_000 {
                staleness.merge(&local);
                local = Staleness::default();
            }
            let left = self.window.saturating_sub(started.elapsed());
            if stamps.len() < MAX_BATCH && !left.is_zero() && arrived_during {
                thread::sleep(left);
            }
        }
        staleness.merge(&local);
        Applied { store: self.store, applied, processing, depth_max, staleness }
    }
}
