//! The StatefulSet and DaemonSet controllers of the field report, reading the cache under test.
//!
//! Both follow the decision logic the report describes, reduced to what matters for the cache:
//!
//! - **StatefulSet**: list the set's pods (by listing the namespace with the set's selector, as
//!   the controller of the report does, or through the owner-UID index), create every missing
//!   ordinal (`Parallel`) or the first missing one once all lower ordinals run (`OrderedReady`),
//!   delete ordinals at or above `replicas`, and write the status. A create answered with 409
//!   AlreadyExists means the cache did not show a pod that exists: a stale-cache conflict.
//! - **DaemonSet**: for every node, look up its pods through the node index; create the daemon
//!   pod where there is none and delete extras where there are several. Daemon pods have
//!   generated names, so a stale cache yields a second pod on a node, not a 409.
//!
//! With **read-your-writes** on, a controller that wrote (created or deleted) for a set records
//! the resource version of its last write, and does not act on that set again until the cache's
//! visible resource version includes it (the expectation idea of client-go's controllers, built
//! on the cache's waitable version instead of counting events).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::core::v1::{Container, Pod, PodSpec, PodStatus},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use snapinformer_core::workqueue::{WorkQueue, WorkQueueConfig, default_controller_rate_limiter};

use super::{
    cache::{Notify, Visible},
    cluster::{Cluster, WriteError},
};
use crate::{
    backends::SimReader,
    pods::{self, PodProfile, Shape},
    stats::Latency,
};

/// How the StatefulSet controller finds a set's pods.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum SetListMode {
    /// List the namespace and filter by the set's selector (the controller of the report).
    Namespace,
    /// Look the set's UID up in the owner index.
    OwnerIndex,
}

/// The StatefulSet pod management policy.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum PodManagement {
    /// Create and delete all pods at once.
    Parallel,
    /// One pod at a time, each once the lower ordinals are Running.
    OrderedReady,
}

/// A StatefulSet as the controller knows it.
#[derive(Debug, Clone)]
pub struct SetSpec {
    /// Namespace.
    pub namespace: String,
    /// Name (`web-<index>`).
    pub name: String,
    /// UID, for owner references.
    pub uid: String,
    /// Desired replicas.
    pub replicas: usize,
    /// Position among the sets (selects the pod template of the generator).
    pub index: usize,
}

impl SetSpec {
    /// `namespace/name`, the work queue key.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The daemon set as the controller knows it.
#[derive(Debug, Clone)]
pub struct DaemonSpec {
    /// Namespace.
    pub namespace: String,
    /// Name; also its pods' `app` label and name prefix.
    pub name: String,
    /// UID, for owner references.
    pub uid: String,
    /// Node names it runs on.
    pub nodes: Vec<String>,
}

/// Controller settings.
#[derive(Debug, Clone, Copy)]
pub struct ControllerConfig {
    /// Read-your-writes on.
    pub read_your_writes: bool,
    /// How sets find their pods.
    pub set_list: SetListMode,
    /// Pod management policy.
    pub policy: PodManagement,
    /// StatefulSet worker threads.
    pub set_workers: usize,
    /// DaemonSet worker threads.
    pub daemon_workers: usize,
    /// Pod profile of created StatefulSet pods.
    pub profile: PodProfile,
    /// The daemon set controller lists its pods once per sync and groups them by node, instead
    /// of one node-index lookup per node (for a store without indexes: kube-rs).
    pub daemon_list_once: bool,
}

/// What the controllers did.
#[derive(Debug, Default)]
pub struct ControllerCounters {
    /// Creates answered 409 AlreadyExists.
    pub conflicts_409: AtomicU64,
    /// StatefulSet pods created.
    pub set_creates: AtomicU64,
    /// StatefulSet pods deleted.
    pub set_deletes: AtomicU64,
    /// Daemon pods created.
    pub daemon_creates: AtomicU64,
    /// Daemon pods deleted as extras.
    pub daemon_deletes: AtomicU64,
    /// Writes that failed otherwise (retried with backoff).
    pub write_errors: AtomicU64,
    /// Syncs run.
    pub syncs: AtomicU64,
    /// Syncs put off because the cache did not yet include the controller's last write.
    pub ryw_deferrals: AtomicU64,
}

/// Cache read latencies seen by the controllers.
#[derive(Debug, Default)]
pub struct ReadLatencies {
    /// Namespace lists (StatefulSet controller, namespace mode).
    pub list: Mutex<Latency>,
    /// Index lookups (owner index, node index).
    pub index: Mutex<Latency>,
}

/// The controllers' work queues; also the cache's event handler.
#[derive(Clone)]
pub struct Queues {
    /// StatefulSet keys.
    pub sets: WorkQueue<String>,
    /// DaemonSet key.
    pub daemons: WorkQueue<String>,
    daemon_key: String,
}

impl Queues {
    /// Queues for the sets and for the daemon set `daemon_key`.
    pub fn new(daemon_key: String) -> Self {
        Queues {
            sets: WorkQueue::new(
                WorkQueueConfig::new("statefulset")
                    .rate_limiter(default_controller_rate_limiter::<String>()),
            ),
            daemons: WorkQueue::new(
                WorkQueueConfig::new("daemonset")
                    .rate_limiter(default_controller_rate_limiter::<String>()),
            ),
            daemon_key,
        }
    }

    /// Stops both queues; workers return once their current item is done.
    pub fn shut_down(&self) {
        self.sets.shut_down();
        self.daemons.shut_down();
    }
}

impl Notify for Queues {
    fn set_pod_changed(&self, set: &str) {
        self.sets.add(set.to_owned());
    }
    fn daemon_pod_changed(&self) {
        self.daemons.add(self.daemon_key.clone());
    }
}

/// Everything the workers share.
pub struct Controllers {
    config: ControllerConfig,
    sets: HashMap<String, SetSpec>,
    daemon: DaemonSpec,
    shape: Shape,
    cluster: Arc<dyn Cluster>,
    visible: Arc<Visible>,
    queues: Queues,
    /// Resource version of each key's last write (read-your-writes).
    expectations: Mutex<HashMap<String, u64>>,
    /// Last status written per set: (replicas, ready).
    statuses: Mutex<HashMap<String, (i32, i32)>>,
    next_daemon_pod: AtomicU64,
    stopping: AtomicBool,
    /// What the controllers did.
    pub counters: ControllerCounters,
    /// Read latencies.
    pub reads: ReadLatencies,
}

/// How long a deferred key waits before it is tried again even without an event.
const DEFER_RECHECK: Duration = Duration::from_millis(500);

impl Controllers {
    /// Controllers over `sets` and `daemon`, writing to `cluster`.
    pub fn new(
        config: ControllerConfig,
        sets: Vec<SetSpec>,
        daemon: DaemonSpec,
        cluster: Arc<dyn Cluster>,
        visible: Arc<Visible>,
        queues: Queues,
    ) -> Arc<Self> {
        let replicas = sets.first().map_or(1, |s| s.replicas).max(1);
        let shape = Shape {
            owners: sets.len().max(1),
            per_owner: replicas,
            nodes: daemon.nodes.len().max(1),
            profile: config.profile,
        };
        Arc::new(Controllers {
            config,
            sets: sets.into_iter().map(|s| (s.key(), s)).collect(),
            daemon,
            shape,
            cluster,
            visible,
            queues,
            expectations: Mutex::new(HashMap::new()),
            statuses: Mutex::new(HashMap::new()),
            next_daemon_pod: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            counters: ControllerCounters::default(),
            reads: ReadLatencies::default(),
        })
    }

    /// Queues every set and the daemon set, and starts the workers, each with its own reader
    /// (pinned to `core` if given).
    pub fn start(
        self: &Arc<Self>,
        reader: &dyn SimReader,
        core: Option<core_affinity::CoreId>,
    ) -> Vec<thread::JoinHandle<()>> {
        let mut keys: Vec<&String> = self.sets.keys().collect();
        keys.sort();
        for key in keys {
            self.queues.sets.add(key.clone());
        }
        self.queues.daemons.add(self.queues.daemon_key.clone());
        let mut handles = Vec::new();
        for i in 0..self.config.set_workers {
            let (this, reader) = (self.clone(), reader.boxed_clone());
            handles.push(
                thread::Builder::new()
                    .name(format!("sts-{i}"))
                    .spawn(move || {
                        if let Some(core) = core {
                            core_affinity::set_for_current(core);
                        }
                        this.set_worker(&*reader)
                    })
                    .expect("spawn worker"),
            );
        }
        for i in 0..self.config.daemon_workers {
            let (this, reader) = (self.clone(), reader.boxed_clone());
            handles.push(
                thread::Builder::new()
                    .name(format!("ds-{i}"))
                    .spawn(move || {
                        if let Some(core) = core {
                            core_affinity::set_for_current(core);
                        }
                        this.daemon_worker(&*reader)
                    })
                    .expect("spawn worker"),
            );
        }
        handles
    }

    /// Makes workers stop writing (a sync in progress returns at its next write).
    pub fn stop_writing(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    fn halted(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Total pods the sets want.
    pub fn desired_set_pods(&self) -> usize {
        self.sets.values().map(|s| s.replicas).sum()
    }

    /// Daemon pods created beyond one per node: each is a second pod on a node.
    pub fn duplicate_daemon_pods(&self) -> u64 {
        self.counters
            .daemon_creates
            .load(Ordering::Relaxed)
            .saturating_sub(self.daemon.nodes.len() as u64)
    }

    /// Runs one sync of work-queue `key` (a set's `namespace/name`, or the daemon set's) with
    /// `reader`, outside the workers (for tests). Returns false when the key should be retried.
    pub fn sync(&self, reader: &dyn SimReader, key: &str) -> bool {
        if key == self.queues.daemon_key {
            self.sync_daemon(reader, key)
        } else {
            self.sync_set(reader, key)
        }
    }

    fn set_worker(&self, reader: &dyn SimReader) {
        while let Some(key) = self.queues.sets.get() {
            if self.sync_set(reader, &key) {
                self.queues.sets.forget(&key);
            } else {
                self.queues.sets.add_rate_limited(key.clone());
            }
            self.queues.sets.done(&key);
        }
    }

    fn daemon_worker(&self, reader: &dyn SimReader) {
        while let Some(key) = self.queues.daemons.get() {
            if self.sync_daemon(reader, &key) {
                self.queues.daemons.forget(&key);
            } else {
                self.queues.daemons.add_rate_limited(key.clone());
            }
            self.queues.daemons.done(&key);
        }
    }

    /// With read-your-writes on: whether the cache includes this key's last write. If not, the
    /// sync is put off; the event of that write queues the key again once it is visible (and a
    /// timer does, in case).
    fn caught_up(&self, key: &str, queue: &WorkQueue<String>) -> bool {
        if !self.config.read_your_writes {
            return true;
        }
        let expected = self.expectations.lock().expect("expectations lock").get(key).copied();
        match expected {
            Some(rv) if !self.visible.includes(rv) => {
                self.counters.ryw_deferrals.fetch_add(1, Ordering::Relaxed);
                queue.add_after(key.to_owned(), DEFER_RECHECK);
                false
            }
            _ => true,
        }
    }

    fn expect(&self, key: &str, rv: u64) {
        if rv > 0 {
            let mut exp = self.expectations.lock().expect("expectations lock");
            let slot = exp.entry(key.to_owned()).or_default();
            *slot = (*slot).max(rv);
        }
    }

    /// One write; `Ok(rv)` on success, `Err(true)` when it should be retried.
    fn write(&self, result: Result<u64, WriteError>) -> Result<u64, bool> {
        match result {
            Ok(rv) => Ok(rv),
            Err(WriteError::AlreadyExists) => {
                self.counters.conflicts_409.fetch_add(1, Ordering::Relaxed);
                Err(false)
            }
            Err(WriteError::NotFound) => Err(false),
            Err(WriteError::Other(e)) => {
                tracing::debug!(error = %e, "write failed");
                self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                Err(true)
            }
        }
    }

    /// Returns false when the set must be retried.
    fn sync_set(&self, reader: &dyn SimReader, key: &str) -> bool {
        let Some(set) = self.sets.get(key) else { return true };
        if !self.caught_up(key, &self.queues.sets) {
            return true;
        }
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let pods = match self.config.set_list {
            SetListMode::Namespace => {
                let pods = reader.pods_in_namespace(&set.namespace, "app", &set.name);
                self.reads.list.lock().expect("latency lock").record(started.elapsed());
                pods
            }
            SetListMode::OwnerIndex => {
                let pods = reader.pods_by_owner(&set.uid);
                self.reads.index.lock().expect("latency lock").record(started.elapsed());
                pods
            }
        };
        // Ordinals the cache shows: Some(running).
        let mut present: Vec<Option<bool>> = vec![None; set.replicas];
        let mut surplus = Vec::new();
        let prefix = format!("{}-", set.name);
        for pod in &pods {
            let owned = pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == set.uid && o.controller == Some(true));
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let Some(ordinal) = name.strip_prefix(&prefix).and_then(|o| o.parse::<usize>().ok())
            else {
                continue;
            };
            if !owned {
                continue;
            }
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            match present.get_mut(ordinal) {
                Some(slot) => *slot = Some(running),
                None => surplus.push(name.to_owned()),
            }
        }
        drop(pods);
        let mut last_rv = 0;
        let mut retry = false;
        let create = |ordinal: usize, last_rv: &mut u64, retry: &mut bool| {
            if self.halted() {
                return;
            }
            let pod = self.set_pod(set, ordinal);
            match self.write(self.cluster.create_pod(pod)) {
                Ok(rv) => {
                    self.counters.set_creates.fetch_add(1, Ordering::Relaxed);
                    *last_rv = (*last_rv).max(rv);
                }
                Err(r) => *retry |= r,
            }
        };
        match self.config.policy {
            PodManagement::Parallel => {
                for ordinal in (0..set.replicas).filter(|o| present[*o].is_none()) {
                    create(ordinal, &mut last_rv, &mut retry);
                }
            }
            PodManagement::OrderedReady => {
                for (ordinal, state) in present.iter().enumerate() {
                    match state {
                        Some(true) => continue,
                        Some(false) => break,
                        None => {
                            create(ordinal, &mut last_rv, &mut retry);
                            break;
                        }
                    }
                }
            }
        }
        for name in &surplus {
            if self.halted() {
                break;
            }
            match self.write(self.cluster.delete_pod(&set.namespace, name)) {
                Ok(rv) => {
                    self.counters.set_deletes.fetch_add(1, Ordering::Relaxed);
                    last_rv = last_rv.max(rv);
                }
                Err(r) => retry |= r,
            }
        }
        self.expect(key, last_rv);
        let replicas = present.iter().filter(|p| p.is_some()).count() as i32;
        let ready = present.iter().filter(|p| **p == Some(true)).count() as i32;
        let changed =
            self.statuses.lock().expect("status lock").insert(key.to_owned(), (replicas, ready))
                != Some((replicas, ready));
        if changed
            && let Err(e) = self.cluster.set_status(&set.namespace, &set.name, replicas, ready)
        {
            tracing::debug!(error = %e, set = key, "status write failed");
            self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        }
        !retry
    }

    /// Returns false when the daemon set must be retried.
    fn sync_daemon(&self, reader: &dyn SimReader, key: &str) -> bool {
        if !self.caught_up(key, &self.queues.daemons) {
            return true;
        }
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        let ds = &self.daemon;
        let mut last_rv = 0;
        let mut retry = false;
        let owned = |p: &Pod| p.metadata.owner_references.iter().flatten().any(|o| o.uid == ds.uid);
        let mut by_node: HashMap<String, Vec<String>> = HashMap::new();
        if self.config.daemon_list_once {
            let started = Instant::now();
            let pods = reader.pods_in_namespace(&ds.namespace, "app", &ds.name);
            self.reads.list.lock().expect("latency lock").record(started.elapsed());
            for p in pods.iter().filter(|p| owned(p)) {
                if let (Some(node), Some(name)) = (pods::pod_node(p), &p.metadata.name) {
                    by_node.entry(node.to_owned()).or_default().push(name.clone());
                }
            }
        }
        for node in &ds.nodes {
            if self.halted() {
                break;
            }
            let mut mine: Vec<String> = if self.config.daemon_list_once {
                by_node.remove(node).unwrap_or_default()
            } else {
                let started = Instant::now();
                let pods = reader.pods_by_node(node);
                self.reads.index.lock().expect("latency lock").record(started.elapsed());
                pods.iter().filter(|p| owned(p)).filter_map(|p| p.metadata.name.clone()).collect()
            };
            if mine.is_empty() {
                match self.write(self.cluster.create_pod(self.daemon_pod(node))) {
                    Ok(rv) => {
                        self.counters.daemon_creates.fetch_add(1, Ordering::Relaxed);
                        last_rv = last_rv.max(rv);
                    }
                    Err(r) => retry |= r,
                }
            } else if mine.len() > 1 {
                // Keep the oldest (names are numbered in creation order).
                mine.sort();
                for extra in &mine[1..] {
                    match self.write(self.cluster.delete_pod(&ds.namespace, extra)) {
                        Ok(rv) => {
                            self.counters.daemon_deletes.fetch_add(1, Ordering::Relaxed);
                            last_rv = last_rv.max(rv);
                        }
                        Err(r) => retry |= r,
                    }
                }
            }
        }
        self.expect(key, last_rv);
        !retry
    }

    /// The pod of `set` with `ordinal`, as the controller creates it (Pending, no version).
    fn set_pod(&self, set: &SetSpec, ordinal: usize) -> Pod {
        let i = set.index * self.shape.per_owner + ordinal;
        let mut pod = pods::make_pod(&self.shape, i, 0, i % self.shape.nodes);
        pod.metadata.resource_version = None;
        pod.metadata.uid = None;
        pod.metadata.namespace = Some(set.namespace.clone());
        pod.metadata.name = Some(format!("{}-{ordinal}", set.name));
        if let Some(owner) = pod.metadata.owner_references.as_mut().and_then(|o| o.first_mut()) {
            owner.uid = set.uid.clone();
            owner.name = set.name.clone();
        }
        if let Some(labels) = pod.metadata.labels.as_mut() {
            labels.insert("app".into(), set.name.clone());
        }
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(self.daemon.nodes[i % self.daemon.nodes.len()].clone());
        }
        pod.status = Some(PodStatus { phase: Some("Pending".into()), ..Default::default() });
        pod
    }

    /// A new daemon pod bound to `node`, with a fresh generated name.
    fn daemon_pod(&self, node: &str) -> Pod {
        let ds = &self.daemon;
        let n = self.next_daemon_pod.fetch_add(1, Ordering::Relaxed);
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("{}-{n:06}", ds.name)),
                namespace: Some(ds.namespace.clone()),
                labels: Some([("app".to_owned(), ds.name.clone())].into()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "DaemonSet".into(),
                    name: ds.name.clone(),
                    uid: ds.uid.clone(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.to_owned()),
                containers: vec![Container {
                    name: "proxy".into(),
                    image: Some("registry.k8s.io/kube-proxy:v1.32.2".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
        }
    }
}
