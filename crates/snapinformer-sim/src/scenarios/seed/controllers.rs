//! The StatefulSet and DaemonSet controllers of the field report, as reconcile functions on
//! the controller runtime (`snapinformer-runtime`), reading the cache under test through
//! [`PodCache`] and writing through a [`Cluster`].
//!
//! Every row runs them the same way: the same runtime, kube-controller-manager's worker counts
//! (5 StatefulSet, 2 DaemonSet), the runtime's read-your-writes switched on or off for the row
//! (`+ryw`), the same expectations. Only the cache behind the runtime's
//! [`VersionedCache`](snapinformer_runtime::VersionedCache)
//! (our informer, or a baseline's pipeline) and behind [`PodCache`] differs
//! ([`SeedCache::attach`](super::cache::SeedCache::attach)).
//!
//! Both follow client-go 1.37's decision logic, reduced to what matters for the cache:
//!
//! - **StatefulSet** (`Parallel`): read the set's pods (by listing the namespace with the set's
//!   selector, as the controller of the report does, or through the owner-UID index, as 1.37's
//!   `getPodsForStatefulSet` does), then walk the ordinals in client-go's `slowStartBatch`
//!   (the runtime's [`slow_start_batch`]): concurrent batches of 1, 2, 4, ... ordinals (at most
//!   500), creating the missing ones, stopping after the first batch in which a write failed;
//!   the sync then fails and the set is queued again with backoff. Ordinals at or above
//!   `replicas` are deleted the same way. `OrderedReady` creates the first missing ordinal once
//!   every lower one runs. A create answered 409 AlreadyExists means the cache did not show a
//!   pod that exists: a stale-cache conflict, counted by the runtime
//!   ([`Stats::already_exists`]).
//! - **DaemonSet**: read the daemon set's pods (through the owner-UID index, as 1.37's
//!   `getDaemonPods` does, or one node-index lookup per node), group them by node, create the
//!   daemon pod where a node has none (at most 250 per sync, client-go's `BurstReplicas`, in
//!   slow-start batches from 1) and delete extras where a node has several (all at once,
//!   concurrently). Daemon pods have generated names, so a stale cache yields a second pod on a
//!   node, not a 409: every create beyond one per node is a duplicate.
//!
//! With **read-your-writes** on (`+ryw` rows), before a key's reconcile the runtime waits until
//! the cache shows the versions of that key's last writes (bounded by its timeout, 5 s), and
//! the reconcile puts itself off while the key's own creates and deletes have not all come back
//! through the cache (the runtime's expectations, as client-go's DaemonSet controller keeps
//! them): their events queue the key again. Without it the controllers act on whatever the
//! cache shows, the setting in which the report saw 409 storms and duplicate pods. (client-go's
//! DaemonSet controller always checks its expectations; here they go with read-your-writes, so
//! that the rows without it show what a stale cache does to a controller that does not wait.)

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, StatefulSet},
        core::v1::{Container, Pod, PodSpec, PodStatus},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::api::{DeleteParams, PostParams};
use snapinformer_runtime::{
    Action, Config, Context, Controller, Handle, ObjectKey, ReadYourWrites,
    SLOW_START_INITIAL_BATCH, Stats, Stopped, backoff_on_error, slow_start_batch,
};
use tokio::task::JoinHandle;

use super::{cache::PodCache, cluster::Cluster};
use crate::{
    harness::stats::Latency,
    pods::{self, PodProfile, Shape},
};

/// The StatefulSet controller's largest slow-start batch (`MaxBatchSize`).
pub const STATEFULSET_MAX_BATCH: usize = 500;
/// The DaemonSet controller's most creates (and deletes) per sync (`BurstReplicas`).
pub const DAEMONSET_BURST_REPLICAS: usize = 250;
/// How long a stopping controller lets its running reconciles finish before it cancels them.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

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
    /// `namespace/name`, the controller's key.
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(Some(&self.namespace), &self.name)
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
    /// Read-your-writes on (the runtime's, and the expectations check).
    pub read_your_writes: bool,
    /// How sets find their pods.
    pub set_list: SetListMode,
    /// How the daemon set finds its pods.
    pub daemon_list: DaemonListMode,
    /// Pod management policy.
    pub policy: PodManagement,
    /// StatefulSet controller workers.
    pub set_workers: usize,
    /// DaemonSet controller workers.
    pub daemon_workers: usize,
    /// Pod profile of created StatefulSet pods.
    pub profile: PodProfile,
    /// Give StatefulSet pods a container when their profile has none: kube-apiserver rejects
    /// a pod without one (the test API server and the in-process model take it).
    pub with_container: bool,
}

/// What the controllers count beyond the runtime's [`Stats`].
#[derive(Debug, Default)]
pub struct ControllerCounters {
    /// Reconciles that read the cache and acted on it.
    pub syncs: AtomicU64,
    /// Reconciles put off because the key's own creates and deletes had not all come back
    /// through the cache yet (rows with read-your-writes).
    pub expectation_deferrals: AtomicU64,
    /// StatefulSet status writes that failed.
    pub status_errors: AtomicU64,
}

/// Cache read latencies seen by the controllers.
#[derive(Debug, Default)]
pub struct ReadLatencies {
    /// Namespace lists (StatefulSet controller, namespace mode).
    pub list: Mutex<Latency>,
    /// Index lookups (owner index, node index).
    pub index: Mutex<Latency>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The StatefulSet and DaemonSet controllers of one row, built, not yet running: a cache is
/// attached to them ([`SeedCache::attach`](super::cache::SeedCache::attach)), then they are
/// [`spawn`](Controllers::spawn)ed.
pub struct Controllers {
    /// The StatefulSet controller.
    pub sets: Controller<StatefulSet>,
    /// The DaemonSet controller.
    pub daemons: Controller<DaemonSet>,
}

impl Controllers {
    /// Both controllers with `config`'s workers and read-your-writes, the runtime's defaults
    /// otherwise.
    pub fn new(config: &ControllerConfig) -> Self {
        let runtime = |workers: usize| {
            Config::default()
                .workers(workers)
                .read_your_writes(config.read_your_writes)
                .shutdown_timeout(SHUTDOWN_TIMEOUT)
        };
        Controllers {
            sets: Controller::new("statefulset").config(runtime(config.set_workers)),
            daemons: Controller::new("daemonset").config(runtime(config.daemon_workers)),
        }
    }

    /// Runs both controllers on the current Tokio runtime over `sets` and `daemon`, reading
    /// `pods` and writing to `cluster`; every set and the daemon set are queued first (as an
    /// informer's initial list queues them).
    pub fn spawn<C: Cluster>(
        self,
        config: ControllerConfig,
        sets: Vec<SetSpec>,
        daemon: DaemonSpec,
        cluster: C,
        pods: Arc<dyn PodCache>,
    ) -> Running {
        let replicas = sets.first().map_or(1, |s| s.replicas).max(1);
        let shape = Shape {
            owners: sets.len().max(1),
            per_owner: replicas,
            nodes: daemon.nodes.len().max(1),
            profile: config.profile,
        };
        let counters = Arc::new(ControllerCounters::default());
        let reads = Arc::new(ReadLatencies::default());
        let seed = Arc::new(Seed {
            config,
            cluster,
            pods,
            sets: sets.into_iter().map(|s| (s.key(), s)).collect(),
            daemon_key: ObjectKey::new(Some(&daemon.namespace), &daemon.name),
            daemon,
            shape,
            statuses: Mutex::new(HashMap::new()),
            next_daemon_pod: AtomicU64::new(0),
            counters: counters.clone(),
            reads: reads.clone(),
        });
        let (set_handle, daemon_handle) = (self.sets.handle(), self.daemons.handle());
        let mut keys: Vec<&ObjectKey> = seed.sets.keys().collect();
        keys.sort();
        for key in keys {
            set_handle.enqueue(key.clone());
        }
        daemon_handle.enqueue(seed.daemon_key.clone());
        let tasks = vec![
            tokio::spawn(self.sets.run(reconcile_set::<C>, backoff_on_error, seed.clone())),
            tokio::spawn(self.daemons.run(reconcile_daemon::<C>, backoff_on_error, seed.clone())),
        ];
        Running {
            sets: set_handle,
            daemons: daemon_handle,
            tasks,
            desired_set_pods: seed.sets.values().map(|s| s.replicas).sum(),
            nodes: seed.daemon.nodes.len() as u64,
            counters,
            reads,
        }
    }
}

/// The two controllers running.
pub struct Running {
    sets: Handle<StatefulSet>,
    daemons: Handle<DaemonSet>,
    tasks: Vec<JoinHandle<snapinformer_runtime::Result<Stopped>>>,
    desired_set_pods: usize,
    nodes: u64,
    /// What the controllers counted beyond the runtime's statistics.
    pub counters: Arc<ControllerCounters>,
    /// Cache read latencies.
    pub reads: Arc<ReadLatencies>,
}

impl Running {
    /// The StatefulSet controller's handle.
    pub fn sets(&self) -> &Handle<StatefulSet> {
        &self.sets
    }

    /// The DaemonSet controller's handle.
    pub fn daemons(&self) -> &Handle<DaemonSet> {
        &self.daemons
    }

    /// Total pods the sets want.
    pub fn desired_set_pods(&self) -> usize {
        self.desired_set_pods
    }

    /// What the StatefulSet controller did (the runtime's count).
    pub fn set_stats(&self) -> Stats {
        self.sets.stats()
    }

    /// What the DaemonSet controller did (the runtime's count).
    pub fn daemon_stats(&self) -> Stats {
        self.daemons.stats()
    }

    /// Creates answered 409 AlreadyExists, both controllers.
    pub fn conflicts_409(&self) -> u64 {
        self.set_stats().already_exists + self.daemon_stats().already_exists
    }

    /// Daemon pods created beyond one per node: each is a second pod on a node.
    pub fn duplicate_daemon_pods(&self) -> u64 {
        self.daemon_stats().created.saturating_sub(self.nodes)
    }

    /// Stops both controllers gracefully and waits for them: when this returns, they write no
    /// more.
    pub async fn stop(&mut self) -> Result<(), String> {
        self.sets.shutdown();
        self.daemons.shutdown();
        for task in self.tasks.drain(..) {
            task.await
                .map_err(|e| format!("a controller task failed: {e}"))?
                .map_err(|e| format!("a controller failed: {e}"))?;
        }
        Ok(())
    }
}

/// What both controllers' reconciles share.
struct Seed<C> {
    config: ControllerConfig,
    cluster: C,
    pods: Arc<dyn PodCache>,
    sets: HashMap<ObjectKey, SetSpec>,
    daemon: DaemonSpec,
    daemon_key: ObjectKey,
    shape: Shape,
    /// Last status written per set: (replicas, ready).
    statuses: Mutex<HashMap<ObjectKey, (i32, i32)>>,
    next_daemon_pod: AtomicU64,
    counters: Arc<ControllerCounters>,
    reads: Arc<ReadLatencies>,
}

/// Whether `pod` is controlled by the owner with `uid`.
fn controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.controller == Some(true))
}

/// The first error of `results`, if any.
fn first_error<E>(results: impl IntoIterator<Item = Result<(), E>>) -> Result<(), E> {
    results.into_iter().collect()
}

/// One StatefulSet: creates its missing ordinals, deletes the ordinals at or above its
/// replicas, writes its status. Fails (and is backed off) when a write failed.
async fn reconcile_set<C: Cluster>(
    ctx: Context<StatefulSet>,
    seed: Arc<Seed<C>>,
) -> Result<Action, kube::Error> {
    let seed = &*seed;
    let Some(set) = seed.sets.get(ctx.key()) else { return Ok(Action::await_change()) };
    if seed.own_writes_pending(&ctx) {
        return Ok(Action::await_change());
    }
    seed.counters.syncs.fetch_add(1, Ordering::Relaxed);
    let (present, surplus) = seed.set_pods(set);
    let writes = ctx.track(seed.cluster.pods(&set.namespace));
    let (present_ref, surplus_ref, writes_ref) = (&present, &surplus, &writes);
    let create = |ordinal: usize| async move {
        if present_ref[ordinal].is_some() {
            return Ok(());
        }
        writes_ref.create(&PostParams::default(), &seed.set_pod(set, ordinal)).await.map(drop)
    };
    let created = match seed.config.policy {
        PodManagement::Parallel => slow_start_batch(
            set.replicas,
            SLOW_START_INITIAL_BATCH,
            Some(STATEFULSET_MAX_BATCH),
            create,
        )
        .await
        .into_result()
        .map(drop),
        // The first ordinal that does not run: created if missing, else waited for.
        PodManagement::OrderedReady => match present.iter().position(|p| *p != Some(true)) {
            Some(ordinal) if present[ordinal].is_none() => create(ordinal).await,
            _ => Ok(()),
        },
    };
    let deleted = match created {
        Err(_) => Ok(()),
        Ok(()) => slow_start_batch(
            surplus.len(),
            SLOW_START_INITIAL_BATCH,
            Some(STATEFULSET_MAX_BATCH),
            |i| async move {
                writes_ref.delete(&surplus_ref[i], &DeleteParams::default()).await.map(drop)
            },
        )
        .await
        .into_result()
        .map(drop),
    };
    seed.write_status(set, ctx.key(), &present).await;
    created.and(deleted).map(|()| Action::await_change())
}

/// The daemon set: a pod on every node that has none, extras deleted where a node has
/// several. Fails (and is backed off) when a write failed.
async fn reconcile_daemon<C: Cluster>(
    ctx: Context<DaemonSet>,
    seed: Arc<Seed<C>>,
) -> Result<Action, kube::Error> {
    let seed = &*seed;
    if *ctx.key() != seed.daemon_key {
        return Ok(Action::await_change());
    }
    if seed.own_writes_pending(&ctx) {
        return Ok(Action::await_change());
    }
    seed.counters.syncs.fetch_add(1, Ordering::Relaxed);
    let (needing, extras) = seed.daemon_work();
    let writes = ctx.track(seed.cluster.pods(&seed.daemon.namespace));
    let (needing_ref, writes_ref) = (&needing, &writes);
    let created = slow_start_batch(needing.len(), SLOW_START_INITIAL_BATCH, None, |i| async move {
        writes_ref.create(&PostParams::default(), &seed.daemon_pod(&needing_ref[i])).await.map(drop)
    })
    .await
    .into_result()
    .map(drop);
    // client-go deletes every extra at once, whatever the creates did.
    let dp = DeleteParams::default();
    let deleted = first_error(
        futures::future::join_all(extras.iter().map(|name| writes.delete(name, &dp)))
            .await
            .into_iter()
            .map(|r| r.map(drop)),
    );
    created.and(deleted).map(|()| Action::await_change())
}

impl<C: Cluster> Seed<C> {
    /// With read-your-writes on, the runtime has waited (up to its timeout) until the cache
    /// shows this key's last writes; this also puts the sync off while the key's own creates
    /// and deletes have not all come back through the cache (the runtime's expectations).
    /// Their events queue the key again.
    fn own_writes_pending<P>(&self, ctx: &Context<P>) -> bool {
        if *ctx.read_your_writes() == ReadYourWrites::Off || ctx.expectations_satisfied() {
            return false;
        }
        self.counters.expectation_deferrals.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The set's pods as the cache shows them, read as `set_list` says.
    fn read_set_pods(&self, set: &SetSpec) -> Vec<Arc<Pod>> {
        let started = Instant::now();
        match self.config.set_list {
            SetListMode::Namespace => {
                let pods = self.pods.pods_in_namespace(&set.namespace, "app", &set.name);
                lock(&self.reads.list).record(started.elapsed());
                pods
            }
            SetListMode::OwnerIndex => {
                let pods = self.pods.pods_by_owner(&set.uid);
                lock(&self.reads.index).record(started.elapsed());
                pods
            }
        }
    }

    /// Per ordinal below `replicas`, whether the cache shows its pod (`Some(running)`); and
    /// the names of the set's pods at ordinals at or above `replicas`.
    fn set_pods(&self, set: &SetSpec) -> (Vec<Option<bool>>, Vec<String>) {
        let mut present: Vec<Option<bool>> = vec![None; set.replicas];
        let mut surplus = Vec::new();
        let prefix = format!("{}-", set.name);
        for pod in self.read_set_pods(set).iter().filter(|p| controlled_by(p, &set.uid)) {
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
        (present, surplus)
    }

    /// Writes the set's status if it changed since the last write.
    async fn write_status(&self, set: &SetSpec, key: &ObjectKey, present: &[Option<bool>]) {
        let replicas = present.iter().filter(|p| p.is_some()).count() as i32;
        let ready = present.iter().filter(|p| **p == Some(true)).count() as i32;
        let changed =
            lock(&self.statuses).insert(key.clone(), (replicas, ready)) != Some((replicas, ready));
        if changed
            && let Err(e) =
                self.cluster.set_status(&set.namespace, &set.name, replicas, ready).await
        {
            tracing::debug!(error = %e, set = %key, "status write failed");
            self.counters.status_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The daemon set's pods by node, read as `daemon_list` says.
    fn read_daemon_pods(&self) -> HashMap<String, Vec<String>> {
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
                let pods = self.pods.pods_by_owner(&ds.uid);
                lock(&self.reads.index).record(started.elapsed());
                add(pods);
            }
            DaemonListMode::NodeIndex => {
                for node in &ds.nodes {
                    let started = Instant::now();
                    let pods = self.pods.pods_by_node(node);
                    lock(&self.reads.index).record(started.elapsed());
                    add(pods);
                }
            }
        }
        by_node
    }

    /// The nodes that need a daemon pod, and the extra daemon pods to delete (the oldest pod
    /// of a node stays), at most `BurstReplicas` of each.
    fn daemon_work(&self) -> (Vec<String>, Vec<String>) {
        let mut by_node = self.read_daemon_pods();
        let mut needing = Vec::new();
        let mut extras = Vec::new();
        for node in &self.daemon.nodes {
            let mut mine = by_node.remove(node).unwrap_or_default();
            if mine.is_empty() {
                needing.push(node.clone());
            } else if mine.len() > 1 {
                // Keep the oldest (names are numbered in creation order).
                mine.sort();
                extras.extend(mine.drain(1..));
            }
        }
        needing.truncate(DAEMONSET_BURST_REPLICAS);
        extras.truncate(DAEMONSET_BURST_REPLICAS);
        (needing, extras)
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
            if self.config.with_container && spec.containers.is_empty() {
                spec.containers.push(Container {
                    name: "app".into(),
                    image: Some("registry.k8s.io/pause:3.10".into()),
                    ..Default::default()
                });
            }
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
