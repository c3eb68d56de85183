//! The StatefulSet and DaemonSet controllers of the field report, reading the cache under test
//! through [`PodCache`].
//!
//! Both follow client-go 1.37's decision logic, reduced to what matters for the cache:
//!
//! - **StatefulSet** (`Parallel`): read the set's pods (by listing the namespace with the set's
//!   selector, as the controller of the report does, or through the owner-UID index, as 1.37's
//!   `getPodsForStatefulSet` does), then walk the ordinals in client-go's `slowStartBatch`:
//!   batches of 1, 2, 4, ... ordinals (at most 500), creating the missing ones, stopping after
//!   the first batch in which a write failed; the sync then fails and the set is queued again
//!   with backoff. Ordinals at or above `replicas` are deleted the same way. `OrderedReady`
//!   creates the first missing ordinal once every lower one runs. A create answered with 409
//!   AlreadyExists means the cache did not show a pod that exists: a stale-cache conflict.
//! - **DaemonSet**: read the daemon set's pods (through the owner-UID index, as 1.37's
//!   `getDaemonPods` does, or one node-index lookup per node), group them by node, create the
//!   daemon pod where a node has none (at most 250 per sync, client-go's `BurstReplicas`, in
//!   slow-start batches from 1) and delete extras where a node has several. Daemon pods have
//!   generated names, so a stale cache yields a second pod on a node, not a 409.
//!
//! Within a batch client-go issues the writes concurrently; here they are issued one after the
//! other, every write of the batch being made before the batch's failure stops the sync, so the
//! writes (and 409s) counted are the same.
//!
//! With **read-your-writes** on, a controller that wrote (created or deleted) for a key records
//! the resource version of its last write, and does not act on that key again until the
//! cache's reads include it (the expectation idea of client-go's controllers, built on the
//! cache's waitable version instead of counting events); it is available to every row.

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
    cache::{Notify, PodCache},
    cluster::{Cluster, WriteError},
};
use crate::{
    harness::{placement::pin, stats::Latency},
    pods::{self, PodProfile, Shape},
};

/// client-go's `SlowStartInitialBatchSize`.
pub const SLOW_START_INITIAL_BATCH: usize = 1;
/// The StatefulSet controller's largest slow-start batch (`MaxBatchSize`).
pub const STATEFULSET_MAX_BATCH: usize = 500;
/// The DaemonSet controller's most creates (and deletes) per sync (`BurstReplicas`).
pub const DAEMONSET_BURST_REPLICAS: usize = 250;

/// client-go's `slowStartBatch`: calls `f` on `0..count` in batches of `initial`, then twice
/// the previous size (at most `max_batch` when given), and stops after the first batch in which
/// a call failed. Every call of that batch is made. Returns the successful calls and the first
/// error.
pub fn slow_start_batch<E>(
    count: usize,
    initial: usize,
    max_batch: Option<usize>,
    mut f: impl FnMut(usize) -> Result<(), E>,
) -> (usize, Option<E>) {
    let cap = max_batch.unwrap_or(usize::MAX).max(1);
    let (mut next, mut successes) = (0, 0);
    let mut size = initial.max(1).min(cap);
    while next < count {
        let end = (next + size).min(count);
        let mut first_error = None;
        for i in next..end {
            match f(i) {
                Ok(()) => successes += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if first_error.is_some() {
            return (successes, first_error);
        }
        next = end;
        size = (size * 2).min(cap);
    }
    (successes, None)
}

/// How the StatefulSet controller finds a set's pods.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum SetListMode {
    /// List the namespace and filter by the set's selector (the controller of the report).
    Namespace,
    /// Look the set's UID up in the owner index (client-go 1.37's `FilterPodsByOwner`).
    OwnerIndex,
}

/// How the DaemonSet controller finds its pods.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum DaemonListMode {
    /// One owner-index lookup of the daemon set's UID, grouped by node (client-go 1.37).
    #[default]
    OwnerIndex,
    /// One node-index lookup per node.
    NodeIndex,
}

/// The StatefulSet pod management policy.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum PodManagement {
    /// Create and delete pods in slow-start batches.
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
    /// How the daemon set finds its pods.
    pub daemon_list: DaemonListMode,
    /// Pod management policy.
    pub policy: PodManagement,
    /// StatefulSet worker threads.
    pub set_workers: usize,
    /// DaemonSet worker threads.
    pub daemon_workers: usize,
    /// Pod profile of created StatefulSet pods.
    pub profile: PodProfile,
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
    /// Writes that failed otherwise.
    pub write_errors: AtomicU64,
    /// Syncs run.
    pub syncs: AtomicU64,
    /// Syncs that failed (a write failed) and were queued again with backoff.
    pub failed_syncs: AtomicU64,
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

/// Whether `pod` is controlled by the owner with `uid`.
fn controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.controller == Some(true))
}

impl Controllers {
    /// Controllers over `sets` and `daemon`, writing to `cluster`.
    pub fn new(
        config: ControllerConfig,
        sets: Vec<SetSpec>,
        daemon: DaemonSpec,
        cluster: Arc<dyn Cluster>,
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
            queues,
            expectations: Mutex::new(HashMap::new()),
            statuses: Mutex::new(HashMap::new()),
            next_daemon_pod: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            counters: ControllerCounters::default(),
            reads: ReadLatencies::default(),
        })
    }

    /// Queues every set and the daemon set, and starts the workers, all reading `cache`
    /// (pinned to `core` if given).
    pub fn start(
        self: &Arc<Self>,
        cache: Arc<dyn PodCache>,
        core: Option<core_affinity::CoreId>,
    ) -> Vec<thread::JoinHandle<()>> {
        let mut keys: Vec<&String> = self.sets.keys().collect();
        keys.sort();
        for key in keys {
            self.queues.sets.add(key.clone());
        }
        self.queues.daemons.add(self.queues.daemon_key.clone());
        let mut handles = Vec::new();
        let workers = [("sts", self.config.set_workers), ("ds", self.config.daemon_workers)];
        for (kind, count) in workers {
            for i in 0..count {
                let (this, cache) = (self.clone(), cache.clone());
                handles.push(
                    thread::Builder::new()
                        .name(format!("{kind}-{i}"))
                        .spawn(move || {
                            pin(core);
                            if kind == "sts" {
                                this.worker(&this.queues.sets, &*cache)
                            } else {
                                this.worker(&this.queues.daemons, &*cache)
                            }
                        })
                        .expect("spawn worker"),
                );
            }
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

    /// Runs one sync of work-queue `key` (a set's `namespace/name`, or the daemon set's)
    /// reading `cache`, outside the workers (for tests). Returns false when the sync failed
    /// and the key would be queued again with backoff.
    pub fn sync(&self, cache: &dyn PodCache, key: &str) -> bool {
        if key == self.queues.daemon_key {
            self.sync_daemon(cache, key)
        } else {
            self.sync_set(cache, key)
        }
    }

    fn worker(&self, queue: &WorkQueue<String>, cache: &dyn PodCache) {
        while let Some(key) = queue.get() {
            if self.sync(cache, &key) {
                queue.forget(&key);
            } else {
                self.counters.failed_syncs.fetch_add(1, Ordering::Relaxed);
                queue.add_rate_limited(key.clone());
            }
            queue.done(&key);
        }
    }

    /// With read-your-writes on: whether the cache includes this key's last write. If not, the
    /// sync is put off; the event of that write queues the key again once it is visible (and a
    /// timer does, in case).
    fn caught_up(&self, cache: &dyn PodCache, key: &str, queue: &WorkQueue<String>) -> bool {
        if !self.config.read_your_writes {
            return true;
        }
        let expected = self.expectations.lock().expect("expectations lock").get(key).copied();
        match expected {
            Some(rv) if !cache.includes(rv) => {
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

    /// One write: its resource version, counted; a failure is counted (409s apart).
    fn write(&self, result: Result<u64, WriteError>) -> Result<u64, WriteError> {
        match result {
            Ok(rv) => Ok(rv),
            Err(WriteError::AlreadyExists) => {
                self.counters.conflicts_409.fetch_add(1, Ordering::Relaxed);
                Err(WriteError::AlreadyExists)
            }
            Err(WriteError::NotFound) => Err(WriteError::NotFound),
            Err(WriteError::Other(e)) => {
                tracing::debug!(error = %e, "write failed");
                self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                Err(WriteError::Other(e))
            }
        }
    }

    /// The set's pods as the cache shows them, read as `set_list` says.
    fn read_set_pods(&self, cache: &dyn PodCache, set: &SetSpec) -> Vec<Arc<Pod>> {
        let started = Instant::now();
        match self.config.set_list {
            SetListMode::Namespace => {
                let pods = cache.pods_in_namespace(&set.namespace, "app", &set.name);
                self.reads.list.lock().expect("latency lock").record(started.elapsed());
                pods
            }
            SetListMode::OwnerIndex => {
                let pods = cache.pods_by_owner(&set.uid);
                self.reads.index.lock().expect("latency lock").record(started.elapsed());
                pods
            }
        }
    }

    /// Returns false when the sync failed (the set is queued again with backoff).
    fn sync_set(&self, cache: &dyn PodCache, key: &str) -> bool {
        let Some(set) = self.sets.get(key) else { return true };
        if !self.caught_up(cache, key, &self.queues.sets) {
            return true;
        }
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        let pods = self.read_set_pods(cache, set);
        // Ordinals the cache shows: Some(running).
        let mut present: Vec<Option<bool>> = vec![None; set.replicas];
        let mut surplus = Vec::new();
        let prefix = format!("{}-", set.name);
        for pod in pods.iter().filter(|p| controlled_by(p, &set.uid)) {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let Some(ordinal) = name.strip_prefix(&prefix).and_then(|o| o.parse::<usize>().ok())
            else {
                continue;
            };
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            match present.get_mut(ordinal) {
                Some(slot) => *slot = Some(running),
                None => surplus.push(name.to_owned()),
            }
        }
        drop(pods);
        let mut last_rv = 0;
        let mut create = |ordinal: usize| -> Result<(), WriteError> {
            if present[ordinal].is_some() || self.halted() {
                return Ok(());
            }
            let rv = self.write(self.cluster.create_pod(self.set_pod(set, ordinal)))?;
            self.counters.set_creates.fetch_add(1, Ordering::Relaxed);
            last_rv = last_rv.max(rv);
            Ok(())
        };
        let failed = match self.config.policy {
            PodManagement::Parallel => {
                slow_start_batch(
                    set.replicas,
                    SLOW_START_INITIAL_BATCH,
                    Some(STATEFULSET_MAX_BATCH),
                    &mut create,
                )
                .1
            }
            PodManagement::OrderedReady => {
                let mut failed = None;
                for (ordinal, state) in present.iter().enumerate() {
                    match state {
                        Some(true) => continue,
                        Some(false) => break,
                        None => {
                            failed = create(ordinal).err();
                            break;
                        }
                    }
                }
                failed
            }
        }
        .is_some();
        let delete_failed = !failed
            && slow_start_batch(
                surplus.len(),
                SLOW_START_INITIAL_BATCH,
                Some(STATEFULSET_MAX_BATCH),
                |i| {
                    if self.halted() {
                        return Ok(());
                    }
                    let rv = self.write(self.cluster.delete_pod(&set.namespace, &surplus[i]))?;
                    self.counters.set_deletes.fetch_add(1, Ordering::Relaxed);
                    last_rv = last_rv.max(rv);
                    Ok::<(), WriteError>(())
                },
            )
            .1
            .is_some();
        self.expect(key, last_rv);
        self.write_status(set, key, &present);
        !(failed || delete_failed)
    }

    /// Writes the set's status if it changed since the last write.
    fn write_status(&self, set: &SetSpec, key: &str, present: &[Option<bool>]) {
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
    }

    /// The daemon set's pods by node, read as `daemon_list` says.
    fn read_daemon_pods(&self, cache: &dyn PodCache) -> HashMap<String, Vec<String>> {
        let ds = &self.daemon;
        let mut by_node: HashMap<String, Vec<String>> = HashMap::new();
        let mut add = |pods: Vec<Arc<Pod>>| {
            for p in pods.iter().filter(|p| controlled_by(p, &ds.uid)) {
                if let (Some(node), Some(name)) = (pods::pod_node(p), &p.metadata.name) {
                    by_node.entry(node.to_owned()).or_default().push(name.clone());
                }
            }
        };
        match self.config.daemon_list {
            DaemonListMode::OwnerIndex => {
                let started = Instant::now();
                let pods = cache.pods_by_owner(&ds.uid);
                self.reads.index.lock().expect("latency lock").record(started.elapsed());
                add(pods);
            }
            DaemonListMode::NodeIndex => {
                for node in &ds.nodes {
                    let started = Instant::now();
                    let pods = cache.pods_by_node(node);
                    self.reads.index.lock().expect("latency lock").record(started.elapsed());
                    add(pods);
                }
            }
        }
        by_node
    }

    /// Returns false when the sync failed (the daemon set is queued again with backoff).
    fn sync_daemon(&self, cache: &dyn PodCache, key: &str) -> bool {
        if !self.caught_up(cache, key, &self.queues.daemons) {
            return true;
        }
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        let ds = &self.daemon;
        let mut by_node = self.read_daemon_pods(cache);
        let mut needing = Vec::new();
        let mut extras = Vec::new();
        for node in &ds.nodes {
            let mut mine = by_node.remove(node).unwrap_or_default();
            if mine.is_empty() {
                needing.push(node.as_str());
            } else if mine.len() > 1 {
                // Keep the oldest (names are numbered in creation order).
                mine.sort();
                extras.extend(mine.drain(1..));
            }
        }
        needing.truncate(DAEMONSET_BURST_REPLICAS);
        extras.truncate(DAEMONSET_BURST_REPLICAS);
        let mut last_rv = 0;
        let (_, create_failed) =
            slow_start_batch(needing.len(), SLOW_START_INITIAL_BATCH, None, |i| {
                if self.halted() {
                    return Ok(());
                }
                let rv = self.write(self.cluster.create_pod(self.daemon_pod(needing[i])))?;
                self.counters.daemon_creates.fetch_add(1, Ordering::Relaxed);
                last_rv = last_rv.max(rv);
                Ok::<(), WriteError>(())
            });
        let mut delete_failed = false;
        for extra in &extras {
            if self.halted() {
                break;
            }
            match self.write(self.cluster.delete_pod(&ds.namespace, extra)) {
                Ok(rv) => {
                    self.counters.daemon_deletes.fetch_add(1, Ordering::Relaxed);
                    last_rv = last_rv.max(rv);
                }
                Err(_) => delete_failed = true,
            }
        }
        self.expect(key, last_rv);
        !(create_failed.is_some() || delete_failed)
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
