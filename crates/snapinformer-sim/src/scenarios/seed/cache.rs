//! What the controllers see of a cache under test, and what the scenario drives.
//!
//! - [`PodCache`]: the one small trait the controllers read through (owned results). Their
//!   read-your-writes goes through the runtime's [`VersionedCache`] instead: the cache's
//!   visible resource version and a wait for a later one (our informer's own, or the runtime's
//!   `VisibleVersion` that the baselines' pipeline advances).
//! - [`SeedCache`]: a cache as the scenario drives it: a queue the source feeds, counters, the
//!   controllers attached to it, a drain, the figures at the end. Two implementations: our rows
//!   through the product's public informer API ([`super::informer_cache`]), and the baselines
//!   through a harness pipeline doing the same work ([`super::pipeline`]).
//! - [`Bookkeeper`]: which pods the cache shows Running, per StatefulSet and per node, kept from
//!   the notifications of what became visible (an informer handler's, or the pipeline's).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::Queue;
use snapinformer_runtime::VersionedCache;

use super::{
    controllers::Controllers,
    slots::{SlotLog, Staleness},
};
use crate::harness::stats::Latency;

/// The controllers' reads of the pod cache, with owned results.
pub trait PodCache: Send + Sync {
    /// The pods of namespace `ns` whose label `key` equals `value` (a lister's namespace list
    /// with a selector).
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>>;
    /// The pods owned by `uid` (the owner-UID index; kube-rs filters its full state).
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>>;
    /// The pods bound to `node` (the node-name index; kube-rs filters its full state).
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>>;
}

/// Running pods as the cache shows them, for the convergence check.
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// StatefulSet pods the cache shows Running.
    pub set_pods_running: AtomicUsize,
    /// Nodes on which the cache shows a Running daemon pod.
    pub nodes_with_running_daemon: AtomicUsize,
}

/// What a cache did, at the end of a row.
#[derive(Debug, Default, Clone)]
pub struct CacheOutcome {
    /// Deltas applied.
    pub applied: u64,
    /// Seconds spent processing batches (apply, publish, hand to handlers or bookkeeping).
    pub processing_s: f64,
    /// Largest queue depth seen right after a pop (plus the popped batch).
    pub depth_max: u64,
    /// Staleness of the applied events.
    pub staleness: Staleness,
    /// Deep copies the cache made because an object it was handed was shared.
    pub extra_copies: u64,
    /// Pods in the cache after it drained.
    pub pods: u64,
}

/// A cache under test as the `seed` scenario drives it.
pub trait SeedCache: Send + Sync {
    /// The queue events are delivered to (by the in-process cluster or a reflector).
    fn queue(&self) -> Arc<dyn Queue<Pod>>;
    /// What the controllers read.
    fn pod_cache(&self) -> Arc<dyn PodCache>;
    /// The version the controllers' reads include, and a wait for a later one.
    fn versioned(&self) -> Arc<dyn VersionedCache>;
    /// Connects the controllers to this cache: it becomes the cache of their owned pods (their
    /// writes of pods wait for it, its pod events reach them).
    fn attach(&self, controllers: Controllers) -> Controllers;
    /// Running pods as the cache shows them.
    fn counters(&self) -> &CacheCounters;
    /// Stops the cache once its queue is drained; returns its figures. With `leak`, the cache's
    /// contents are not freed (a worker process that exits right after).
    fn finish(self: Box<Self>, leak: bool) -> CacheOutcome;
}

/// What a cache under test is connected to.
#[derive(Clone)]
pub struct Wiring {
    /// What the bookkeeping tracks of each pod.
    pub classifier: Classifier,
    /// The scheduled slots of the events the stream delivers (empty over HTTP).
    pub slots: Arc<SlotLog>,
    /// The core the cache's writer is pinned to, if any.
    pub core: Option<core_affinity::CoreId>,
    /// The informer's batch window (the `snapinformer` rows; `None`: the informer's default).
    pub batch_window: Option<std::time::Duration>,
    /// The baselines' batch window (their harness applier; zero: none, as client-go).
    pub baseline_batch_window: std::time::Duration,
}

/// What the bookkeeping tracks of a pod: which controller owns it and whether it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracked {
    SetPod { running: bool },
    DaemonPod { node: u32, running: bool },
}

/// Maps pods to what the report tracks.
#[derive(Debug, Clone)]
pub struct Classifier {
    /// Node name to node number.
    pub nodes: HashMap<String, u32>,
    /// UID of the daemon set.
    pub daemon_uid: String,
}

/// What a change of one key means for the bookkeeping, computed before it is recorded: the
/// state the key shows now (`None`: deleted, or not a pod the report tracks).
#[derive(Debug, Clone, Copy)]
pub struct Observation(Option<Tracked>);

impl Classifier {
    fn classify(&self, pod: &Pod) -> Option<Tracked> {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let owner =
            pod.metadata.owner_references.as_ref()?.iter().find(|o| o.controller == Some(true))?;
        if owner.uid == self.daemon_uid {
            let node = crate::pods::pod_node(pod).and_then(|n| self.nodes.get(n)).copied()?;
            Some(Tracked::DaemonPod { node, running })
        } else if owner.kind == "StatefulSet" {
            Some(Tracked::SetPod { running })
        } else {
            None
        }
    }
}

/// Keeps the running counts from what became visible.
pub struct Bookkeeper {
    classifier: Classifier,
    tracked: HashMap<Arc<str>, Tracked>,
    daemon_running: Vec<u32>,
    counters: Arc<CacheCounters>,
}

impl Bookkeeper {
    /// Bookkeeping into `counters`.
    pub fn new(classifier: Classifier, counters: Arc<CacheCounters>) -> Self {
        let nodes = classifier.nodes.len();
        Bookkeeper { classifier, tracked: HashMap::new(), daemon_running: vec![0; nodes], counters }
    }

    /// What it means that a key now shows `now` (`None`: deleted). Reads the pod only;
    /// [`Bookkeeper::record`] applies it.
    pub fn classify(&self, now: Option<&Pod>) -> Observation {
        Observation(now.and_then(|pod| self.classifier.classify(pod)))
    }

    /// Records `obs` for `key`; returns whether the key was tracked before (a tracked pod that
    /// changed, rather than one that appeared).
    pub fn record(&mut self, key: &Arc<str>, obs: Observation) -> bool {
        let before = match obs.0 {
            Some(state) => self.tracked.insert(key.clone(), state),
            None => self.tracked.remove(key),
        };
        self.count(before, false);
        self.count(obs.0, true);
        before.is_some()
    }

    /// [`classify`](Self::classify) and [`record`](Self::record) at once.
    pub fn observe(&mut self, key: &Arc<str>, now: Option<&Pod>) -> bool {
        let obs = self.classify(now);
        self.record(key, obs)
    }

    fn count(&mut self, state: Option<Tracked>, add: bool) {
        let c = &self.counters;
        match state {
            Some(Tracked::SetPod { running: true }) => {
                if add {
                    c.set_pods_running.fetch_add(1, Ordering::Relaxed);
                } else {
                    c.set_pods_running.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Some(Tracked::DaemonPod { node, running: true }) => {
                let slot = &mut self.daemon_running[node as usize];
                if add {
                    *slot += 1;
                    if *slot == 1 {
                        c.nodes_with_running_daemon.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    *slot -= 1;
                    if *slot == 0 {
                        c.nodes_with_running_daemon.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A latency recorder shared between threads.
pub(crate) fn summary(l: &Mutex<Latency>) -> crate::harness::stats::Summary {
    l.lock().unwrap_or_else(|e| e.into_inner()).summary()
}
