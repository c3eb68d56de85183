//! What the controllers see of a cache under test, and what the scenario drives.
//!
//! - [`PodCache`]: the one small trait the controllers read through (owned results, and
//!   whether reads include a resource version, for read-your-writes). A controller runtime
//!   replaces the controllers' own loop without touching how they read.
//! - [`SeedCache`]: a cache as the scenario drives it: a queue the source feeds, counters, a
//!   drain, the figures at the end. Two implementations: our rows through the product's public
//!   informer API ([`super::informer_cache`]), and the baselines through a harness pipeline
//!   doing the same work ([`super::pipeline`]).
//! - [`Bookkeeper`]: which pods the cache shows Running, per StatefulSet and per node, kept from
//!   the notifications of what became visible (the applier's, or an informer handler's).

use std::{
    collections::HashMap,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::Queue;

use super::slots::{SlotLog, Staleness};
use crate::harness::stats::Latency;

/// The controllers' view of the pod cache: the reads they make, with owned results, and the
/// check read-your-writes needs.
pub trait PodCache: Send + Sync {
    /// The pods of namespace `ns` whose label `key` equals `value` (a lister's namespace list
    /// with a selector).
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>>;
    /// The pods owned by `uid` (the owner-UID index; kube-rs filters its full state).
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>>;
    /// The pods bound to `node` (the node-name index; kube-rs filters its full state).
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>>;
    /// Whether reads now include resource version `rv`.
    fn includes(&self, rv: u64) -> bool;
}

/// The highest resource version a harness cache's readers can see, and a way to wait for one.
#[derive(Debug, Default)]
pub struct VisibleVersion {
    rv: Mutex<u64>,
    changed: Condvar,
}

impl VisibleVersion {
    /// The highest resource version every reader's next read includes.
    pub fn current(&self) -> u64 {
        *self.rv.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether reads now include `rv`.
    pub fn includes(&self, rv: u64) -> bool {
        self.current() >= rv
    }

    /// Waits until reads include `rv`, at most `timeout`; returns whether they do.
    pub fn wait_for(&self, rv: u64, timeout: Duration) -> bool {
        let guard = self.rv.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .changed
            .wait_timeout_while(guard, timeout, |v| *v < rv)
            .unwrap_or_else(|e| e.into_inner());
        *guard >= rv
    }

    /// Records that reads now include `rv` (never goes back).
    pub fn advance(&self, rv: u64) {
        let mut guard = self.rv.lock().unwrap_or_else(|e| e.into_inner());
        if rv > *guard {
            *guard = rv;
            self.changed.notify_all();
        }
    }
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
    /// Running pods as the cache shows them.
    fn counters(&self) -> &CacheCounters;
    /// Waits until reads include `rv`, at most `timeout`; returns whether they do.
    fn wait_for(&self, rv: u64, timeout: Duration) -> bool;
    /// Stops the cache once its queue is drained; returns its figures. With `leak`, the cache's
    /// contents are not freed (a worker process that exits right after).
    fn finish(self: Box<Self>, leak: bool) -> CacheOutcome;
}

/// What a cache under test is connected to.
#[derive(Clone)]
pub struct Wiring {
    /// What the bookkeeping tracks of each pod.
    pub classifier: Classifier,
    /// The controllers' event handler.
    pub notify: Arc<dyn Notify>,
    /// The scheduled slots of the events the stream delivers (empty over HTTP).
    pub slots: Arc<SlotLog>,
    /// The core the cache's writer is pinned to, if any.
    pub core: Option<core_affinity::CoreId>,
}

/// Where "this object changed" goes after it became visible (the controllers' event handlers).
pub trait Notify: Send + Sync {
    /// A pod owned by the StatefulSet `set` (namespace/name) changed.
    fn set_pod_changed(&self, set: &str);
    /// A pod owned by the daemon set changed.
    fn daemon_pod_changed(&self);
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

/// What a change of one key means for the bookkeeping, computed before it is recorded.
#[derive(Debug, Clone)]
pub struct Observation {
    state: Option<Tracked>,
    changed: Option<Changed>,
}

/// Whose pod changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// A pod of this StatefulSet (`namespace/name`).
    Set(String),
    /// A pod of the daemon set.
    Daemon,
}

impl Classifier {
    fn classify(&self, pod: &Pod) -> Option<(Tracked, Changed)> {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let owner =
            pod.metadata.owner_references.as_ref()?.iter().find(|o| o.controller == Some(true))?;
        if owner.uid == self.daemon_uid {
            let node = crate::pods::pod_node(pod).and_then(|n| self.nodes.get(n)).copied()?;
            Some((Tracked::DaemonPod { node, running }, Changed::Daemon))
        } else if owner.kind == "StatefulSet" {
            let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
            Some((Tracked::SetPod { running }, Changed::Set(format!("{ns}/{}", owner.name))))
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

    /// What it means that a key now shows `now` (`None`: deleted; `deleted` is then its last
    /// known state, if any). Reads the pods only; [`Bookkeeper::record`] applies it.
    pub fn classify(&self, now: Option<&Pod>, deleted: Option<&Pod>) -> Observation {
        match now {
            Some(pod) => match self.classifier.classify(pod) {
                Some((state, changed)) => {
                    Observation { state: Some(state), changed: Some(changed) }
                }
                None => Observation { state: None, changed: None },
            },
            None => Observation {
                state: None,
                changed: deleted.and_then(|p| self.classifier.classify(p)).map(|(_, c)| c),
            },
        }
    }

    /// Records `obs` for `key`; returns whose pod changed.
    pub fn record(&mut self, key: &Arc<str>, obs: Observation) -> Option<Changed> {
        let before = match obs.state {
            Some(state) => self.tracked.insert(key.clone(), state),
            None => self.tracked.remove(key),
        };
        self.count(before, false);
        self.count(obs.state, true);
        obs.changed
    }

    /// [`classify`](Self::classify) and [`record`](Self::record) at once.
    pub fn observe(
        &mut self,
        key: &Arc<str>,
        now: Option<&Pod>,
        deleted: Option<&Pod>,
    ) -> Option<Changed> {
        let obs = self.classify(now, deleted);
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
