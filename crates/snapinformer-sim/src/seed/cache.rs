//! The controllers' pod cache: one queue, one applier thread, one store under test.
//!
//! The same pipeline serves every backend, so only the store differs between rows of the report:
//! events enter a [`DeltaFifo`] (from the reflector over HTTP, or from the in-process cluster);
//! one applier thread pops batches of up to 1000 deltas, applies them to the store (which
//! decides how often it locks or publishes), records each delta's staleness (queue entry to
//! visibility), advances the *visible resource version* once the store includes a batch's
//! version, and then tells the controllers which sets and daemon sets changed (client-go's
//! event handlers, after the store is updated).

use std::{
    collections::HashMap,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::{Delta, DeltaFifo, Queue};

use crate::{
    backends::{SimChange, SimStore},
    stats::Latency,
};

/// Largest batch the applier pops at once (client-go 1.35's batch limit).
pub const MAX_BATCH: usize = 1000;

/// The highest resource version readers can see, and a way to wait for one (read-your-writes).
#[derive(Debug, Default)]
pub struct Visible {
    rv: Mutex<u64>,
    changed: Condvar,
}

impl Visible {
    /// The highest resource version every reader's next read includes.
    pub fn current(&self) -> u64 {
        *self.rv.lock().expect("visible lock")
    }

    /// Whether reads now include `rv`.
    pub fn includes(&self, rv: u64) -> bool {
        self.current() >= rv
    }

    /// Waits until reads include `rv`, at most `timeout`; returns whether they do.
    pub fn wait_for(&self, rv: u64, timeout: Duration) -> bool {
        let guard = self.rv.lock().expect("visible lock");
        let (guard, _) =
            self.changed.wait_timeout_while(guard, timeout, |v| *v < rv).expect("visible lock");
        *guard >= rv
    }

    fn advance(&self, rv: u64) {
        let mut guard = self.rv.lock().expect("visible lock");
        if rv > *guard {
            *guard = rv;
            self.changed.notify_all();
        }
    }
}

/// What the applier learns about a pod that the report needs: which controller owns it and
/// whether it is running. Kept by the applier, so no reader is involved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracked {
    SetPod { running: bool },
    DaemonPod { node: u32, running: bool },
}

/// Counters the applier maintains.
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// Deltas applied.
    pub applied: AtomicU64,
    /// Batches applied.
    pub batches: AtomicU64,
    /// Nanoseconds the applier spent applying (lock waits included).
    pub apply_nanos: AtomicU64,
    /// Largest queue depth seen right after a pop.
    pub depth_max: AtomicUsize,
    /// StatefulSet pods the cache shows Running.
    pub set_pods_running: AtomicUsize,
    /// Nodes on which the cache shows a Running daemon pod.
    pub nodes_with_running_daemon: AtomicUsize,
}

/// Where the applier sends "this object changed" (the controllers' event handlers).
pub trait Notify: Send + Sync {
    /// A pod owned by the StatefulSet named `set` (namespace/name) changed.
    fn set_pod_changed(&self, set: &str);
    /// A pod owned by the daemon set changed.
    fn daemon_pod_changed(&self);
}

/// Maps pods to what the report tracks.
pub struct Classifier {
    /// Node name to node number.
    pub nodes: HashMap<String, u32>,
    /// UID of the daemon set.
    pub daemon_uid: String,
}

impl Classifier {
    fn classify(&self, pod: &Pod) -> Option<(Tracked, Option<String>)> {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let owner =
            pod.metadata.owner_references.as_ref()?.iter().find(|o| o.controller == Some(true))?;
        if owner.uid == self.daemon_uid {
            let node = crate::pods::pod_node(pod).and_then(|n| self.nodes.get(n)).copied()?;
            Some((Tracked::DaemonPod { node, running }, None))
        } else if owner.kind == "StatefulSet" {
            let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
            Some((Tracked::SetPod { running }, Some(format!("{ns}/{}", owner.name))))
        } else {
            None
        }
    }
}

/// The running applier.
pub struct Cache {
    /// The queue events enter.
    pub queue: Arc<DeltaFifo<Pod>>,
    /// The visible resource version.
    pub visible: Arc<Visible>,
    /// Counters.
    pub counters: Arc<CacheCounters>,
    staleness: Arc<Mutex<Latency>>,
    applier: Option<thread::JoinHandle<Box<dyn SimStore>>>,
}

impl Cache {
    /// Starts the applier over `store` (pinned to `core` if given), telling `notify` about
    /// changes.
    pub fn start(
        store: Box<dyn SimStore>,
        classifier: Classifier,
        notify: Arc<dyn Notify>,
        core: Option<core_affinity::CoreId>,
    ) -> Cache {
        // The queue knows the store's objects, as client-go's DeltaFIFO knows its indexer: a
        // delete of a key that is neither queued nor known is dropped, a known one is not.
        let known = Arc::new(crate::backends::KnownPods::new(store.reader()));
        let queue = Arc::new(DeltaFifo::new(
            crate::pods::access::<Pod>(),
            known,
            snapinformer_core::QueueConfig::default(),
        ));
        let visible = Arc::new(Visible::default());
        let counters = Arc::new(CacheCounters::default());
        let staleness = Arc::new(Mutex::new(Latency::default()));
        let applier = {
            let (queue, visible, counters, staleness) =
                (queue.clone(), visible.clone(), counters.clone(), staleness.clone());
            thread::Builder::new()
                .name("applier".into())
                .spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    apply_loop(
                        store,
                        &queue,
                        &visible,
                        &counters,
                        &staleness,
                        &classifier,
                        &*notify,
                    )
                })
                .expect("spawn applier")
        };
        Cache { queue, visible, counters, staleness, applier: Some(applier) }
    }

    /// Closes the queue, lets the applier drain it, and returns the store and the staleness.
    pub fn stop(mut self) -> (Box<dyn SimStore>, Latency) {
        self.queue.close();
        let store = self.applier.take().expect("stopped once").join().expect("applier panicked");
        let staleness = self.staleness.lock().expect("staleness lock").clone();
        (store, staleness)
    }
}

fn to_change(delta: &Delta<Pod>) -> SimChange {
    if delta.is_delete() {
        SimChange::Delete(delta.key.clone(), delta.object.object().cloned())
    } else {
        SimChange::Upsert(delta.object.object().expect("non-delete deltas carry objects").clone())
    }
}

fn apply_loop(
    mut store: Box<dyn SimStore>,
    queue: &DeltaFifo<Pod>,
    visible: &Visible,
    counters: &CacheCounters,
    staleness: &Mutex<Latency>,
    classifier: &Classifier,
    notify: &dyn Notify,
) -> Box<dyn SimStore> {
    let mut tracked: HashMap<Arc<str>, Tracked> = HashMap::new();
    let mut daemon_running: Vec<u32> = vec![0; classifier.nodes.len()];
    let mut local = Latency::default();
    let mut last_flush = Instant::now();
    while let Ok(batch) = futures::executor::block_on(queue.pop_batch(MAX_BATCH)) {
        counters.depth_max.fetch_max(batch.depth_after + batch.entries, Ordering::Relaxed);
        let changes: Vec<SimChange> = batch.deltas.iter().map(to_change).collect();
        let started = Instant::now();
        let mut seen = 0;
        store.apply_changes(changes, &mut |done, at| {
            for d in &batch.deltas[seen..done] {
                local.record(at.saturating_duration_since(d.enqueued_at));
            }
            seen = done;
        });
        counters.apply_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        counters.applied.fetch_add(batch.deltas.len() as u64, Ordering::Relaxed);
        counters.batches.fetch_add(1, Ordering::Relaxed);
        queue.done(&batch);
        if let Some(rv) = batch.resource_version.as_deref().and_then(|rv| rv.parse().ok()) {
            visible.advance(rv);
        }
        // Bookkeeping for the report and the handlers, after the batch is visible.
        let mut sets_changed: Vec<String> = Vec::new();
        let mut daemon_changed = false;
        for d in &batch.deltas {
            let now = if d.is_delete() {
                None
            } else {
                d.object.object().and_then(|p| classifier.classify(p))
            };
            let before = match now {
                Some((state, ref set)) => {
                    if let Some(set) = set {
                        sets_changed.push(set.clone());
                    } else {
                        daemon_changed = true;
                    }
                    tracked.insert(d.key.clone(), state)
                }
                None => {
                    let before = tracked.remove(&d.key);
                    if let Some(obj) = d.object.object() {
                        match classifier.classify(obj) {
                            Some((_, Some(set))) => sets_changed.push(set),
                            Some((_, None)) => daemon_changed = true,
                            None => {}
                        }
                    }
                    before
                }
            };
            count_running(before, -1, counters, &mut daemon_running);
            count_running(now.map(|(s, _)| s), 1, counters, &mut daemon_running);
        }
        sets_changed.sort_unstable();
        sets_changed.dedup();
        for set in &sets_changed {
            notify.set_pod_changed(set);
        }
        if daemon_changed {
            notify.daemon_pod_changed();
        }
        if last_flush.elapsed() > Duration::from_millis(200) {
            staleness.lock().expect("staleness lock").merge(&local);
            local = Latency::default();
            last_flush = Instant::now();
        }
    }
    staleness.lock().expect("staleness lock").merge(&local);
    store
}

fn count_running(state: Option<Tracked>, delta: i32, counters: &CacheCounters, daemon: &mut [u32]) {
    match state {
        Some(Tracked::SetPod { running: true }) => {
            if delta > 0 {
                counters.set_pods_running.fetch_add(1, Ordering::Relaxed);
            } else {
                counters.set_pods_running.fetch_sub(1, Ordering::Relaxed);
            }
        }
        Some(Tracked::DaemonPod { node, running: true }) => {
            let slot = &mut daemon[node as usize];
            if delta > 0 {
                *slot += 1;
                if *slot == 1 {
                    counters.nodes_with_running_daemon.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                *slot -= 1;
                if *slot == 0 {
                    counters.nodes_with_running_daemon.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        _ => {}
    }
}
