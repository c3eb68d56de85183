//! Realistic pods for the scenarios: StatefulSet-owned pods of about 3 KB, and their updates.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::{
    api::core::v1::{
        Container, ContainerPort, ContainerState, ContainerStateRunning, ContainerStatus, EnvVar,
        Pod, PodCondition, PodIP, PodSpec, PodStatus, ResourceRequirements, Toleration, Volume,
        VolumeMount,
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{ObjectMeta, OwnerReference, Time},
    },
    jiff::Timestamp,
};
use snapinformer_store::{IndexFn, Indexers};

/// The index names of every cache under test that has indexes: the Kubernetes layer's, so
/// that a pod informer built with `snapinformer_kube::pods` and the simulator's caches agree.
pub use snapinformer_kube::{NODE_NAME_INDEX, OWNER_UID_INDEX};
/// The namespace every scenario pod lives in (the report's worst case: one namespace).
pub const NAMESPACE: &str = "default";

/// How much of a pod the generator fills in.
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
pub enum PodProfile {
    /// A realistic StatefulSet pod: two containers with env, ports, resources and mounts, status
    /// with conditions and container statuses. About 3.5 KB as JSON, about 25 KB as a
    /// `k8s_openapi` `Pod` in memory.
    #[default]
    Realistic,
    /// Metadata (labels, owner reference), node name and phase only: for runs at a million pods
    /// on a 24 GiB machine, where realistic pods do not fit.
    Small,
}

/// Shape of a generated population.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Shape {
    /// Number of owners (StatefulSets).
    pub owners: usize,
    /// Pods per owner.
    pub per_owner: usize,
    /// Number of nodes pods are spread over.
    pub nodes: usize,
    /// How much of each pod is filled in.
    pub profile: PodProfile,
}

impl Shape {
    /// `objects` realistic pods in sets of 1000 (fewer if `objects` is small), over `nodes` nodes.
    pub fn for_objects(objects: usize, nodes: usize) -> Self {
        let per_owner = objects.clamp(1, 1000);
        Shape {
            owners: objects.div_ceil(per_owner),
            per_owner,
            nodes: nodes.max(1),
            profile: PodProfile::Realistic,
        }
    }

    /// The same shape with another pod profile.
    pub fn with_profile(mut self, profile: PodProfile) -> Self {
        self.profile = profile;
        self
    }

    /// Total pods.
    pub fn total(&self) -> usize {
        self.owners * self.per_owner
    }
}

/// UID of owner `i` (deterministic, UUID-shaped).
pub fn owner_uid(i: usize) -> String {
    format!("5e1f0c2a-{:04x}-4b7e-9d3c-{:012x}", i % 0xffff, i)
}

/// Name of node `i`.
pub fn node_name(i: usize) -> String {
    format!("ip-10-0-{}-{}.ec2.internal", i / 250, i % 250)
}

fn ts(secs: i64) -> Time {
    Time(Timestamp::from_second(1_764_000_000 + secs).expect("valid timestamp"))
}

/// Pod number `i` of `shape`, at resource version `rv`, on node `node`.
pub fn make_pod(shape: &Shape, i: usize, rv: u64, node: usize) -> Pod {
    match shape.profile {
        PodProfile::Realistic => realistic_pod(shape, i, rv, node),
        PodProfile::Small => small_pod(shape, i, rv, node),
    }
}

/// The controller reference of a pod of StatefulSet `set` (owner number `owner`).
fn owner_reference(set: String, owner: usize) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        name: set,
        uid: owner_uid(owner),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn small_pod(shape: &Shape, i: usize, rv: u64, node: usize) -> Pod {
    let owner = i / shape.per_owner;
    let set = format!("web-{owner}");
    let name = format!("{set}-{}", i % shape.per_owner);
    Pod {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([
                ("app".to_string(), set.clone()),
                ("statefulset.kubernetes.io/pod-name".to_string(), name.clone()),
            ])),
            name: Some(name),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("{:08x}-aaaa-4bbb-8ccc-{:012x}", i, i * 31)),
            resource_version: Some(rv.to_string()),
            owner_references: Some(vec![owner_reference(set, owner)]),
            ..Default::default()
        },
        spec: Some(PodSpec { node_name: Some(node_name(node)), ..Default::default() }),
        status: Some(PodStatus { phase: Some("Running".into()), ..Default::default() }),
    }
}

fn realistic_pod(shape: &Shape, i: usize, rv: u64, node: usize) -> Pod {
    let owner = i / shape.per_owner;
    let ordinal = i % shape.per_owner;
    let set = format!("web-{owner}");
    let name = format!("{set}-{ordinal}");
    let labels = BTreeMap::from([
        ("app".to_string(), set.clone()),
        ("controller-revision-hash".to_string(), format!("{set}-7c9d5f8b6d")),
        ("statefulset.kubernetes.io/pod-name".to_string(), name.clone()),
        ("apps.kubernetes.io/pod-index".to_string(), ordinal.to_string()),
        ("tier".to_string(), "backend".to_string()),
    ]);
    let annotations = BTreeMap::from([
        ("kubectl.kubernetes.io/default-container".to_string(), "app".to_string()),
        ("prometheus.io/scrape".to_string(), "true".to_string()),
        ("prometheus.io/port".to_string(), "9102".to_string()),
    ]);
    let env: Vec<EnvVar> = (0..6)
        .map(|e| EnvVar {
            name: format!("SETTING_{e}"),
            value: Some(format!("value-{e}-{set}")),
            ..Default::default()
        })
        .collect();
    let container = |cname: &str, image: &str, port: i32| Container {
        name: cname.to_string(),
        image: Some(image.to_string()),
        ports: Some(vec![ContainerPort {
            container_port: port,
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        env: Some(env.clone()),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("100m".into())),
                ("memory".to_string(), Quantity("128Mi".into())),
            ])),
            limits: Some(BTreeMap::from([("memory".to_string(), Quantity("256Mi".into()))])),
            ..Default::default()
        }),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "data".into(),
                mount_path: "/var/lib/data".into(),
                ..Default::default()
            },
            VolumeMount {
                name: "kube-api-access".into(),
                mount_path: "/var/run/secrets/kubernetes.io/serviceaccount".into(),
                read_only: Some(true),
                ..Default::default()
            },
        ]),
        termination_message_path: Some("/dev/termination-log".into()),
        termination_message_policy: Some("File".into()),
        image_pull_policy: Some("IfNotPresent".into()),
        ..Default::default()
    };
    let node = node_name(node);
    let cond = |t: &str, secs: i64| PodCondition {
        type_: t.to_string(),
        status: "True".into(),
        last_transition_time: Some(ts(secs)),
        ..Default::default()
    };
    let status_of = |cname: &str, image: &str| ContainerStatus {
        name: cname.to_string(),
        image: image.to_string(),
        image_id: format!("docker.io/library/{image}@sha256:{:064x}", i),
        container_id: Some(format!("containerd://{:064x}", i * 7 + 3)),
        ready: true,
        restart_count: 0,
        started: Some(true),
        state: Some(ContainerState {
            running: Some(ContainerStateRunning { started_at: Some(ts(30)) }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let ip = format!("10.1.{}.{}", (i / 250) % 250, i % 250);
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            generate_name: None,
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("{:08x}-aaaa-4bbb-8ccc-{:012x}", i, i * 31)),
            resource_version: Some(rv.to_string()),
            creation_timestamp: Some(ts(0)),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(set, owner)]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![
                container("app", "registry.example.com/web:1.27.3", 8080),
                container("sidecar", "registry.example.com/proxy:2.4.1", 15001),
            ],
            node_name: Some(node.clone()),
            hostname: None,
            restart_policy: Some("Always".into()),
            dns_policy: Some("ClusterFirst".into()),
            service_account_name: Some("default".into()),
            scheduler_name: Some("default-scheduler".into()),
            termination_grace_period_seconds: Some(30),
            priority: Some(0),
            enable_service_links: Some(true),
            preemption_policy: Some("PreemptLowerPriority".into()),
            tolerations: Some(vec![
                Toleration {
                    key: Some("node.kubernetes.io/not-ready".into()),
                    operator: Some("Exists".into()),
                    effect: Some("NoExecute".into()),
                    toleration_seconds: Some(300),
                    ..Default::default()
                },
                Toleration {
                    key: Some("node.kubernetes.io/unreachable".into()),
                    operator: Some("Exists".into()),
                    effect: Some("NoExecute".into()),
                    toleration_seconds: Some(300),
                    ..Default::default()
                },
            ]),
            volumes: Some(vec![
                Volume { name: "data".into(), ..Default::default() },
                Volume { name: "kube-api-access".into(), ..Default::default() },
            ]),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![
                cond("PodReadyToStartContainers", 20),
                cond("Initialized", 10),
                cond("Ready", 40),
                cond("ContainersReady", 40),
                cond("PodScheduled", 1),
            ]),
            host_ip: Some(format!("10.0.{}.{}", node.len(), i % 250)),
            pod_ip: Some(ip.clone()),
            pod_ips: Some(vec![PodIP { ip }]),
            start_time: Some(ts(5)),
            qos_class: Some("Burstable".into()),
            container_statuses: Some(vec![
                status_of("app", "web:1.27.3"),
                status_of("sidecar", "proxy:2.4.1"),
            ]),
            ..Default::default()
        }),
    }
}

/// Metadata accessors for any `kube::Resource`: the reflector crate's.
pub use snapinformer_kube::access;

/// A pod's node name, for the node index.
pub fn pod_node(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}

/// The indexes our store gets, as `snapinformer_kube::pods` builds them: owner UID and node
/// name, both holding keys (namespace is built in). The locked baselines get the same index
/// functions, as client-go's indexes are of keys too.
pub fn pod_indexers() -> Indexers<Pod> {
    pod_indexers_with(false)
}

/// The same indexes with a covering owner-UID index (its buckets hold the pods too): owner
/// lookups read the pods straight from the bucket, and every update that changes a pod writes
/// it into its owner's bucket as well (the default until 70aaa9b, 2026-12-04; now a control).
pub fn covering_pod_indexers() -> Indexers<Pod> {
    pod_indexers_with(true)
}

/// The pod indexes with an owner-UID index of keys ([`pod_indexers`]) or a covering one
/// ([`covering_pod_indexers`]).
pub fn pod_indexers_with(covering_owner: bool) -> Indexers<Pod> {
    let owner = IndexFn::owner_uid(access::<Pod>());
    let indexers = if covering_owner {
        Indexers::new().with_covering(OWNER_UID_INDEX, owner)
    } else {
        Indexers::new().with(OWNER_UID_INDEX, owner)
    };
    indexers.with(NODE_NAME_INDEX, IndexFn::field(pod_node))
}

/// The simulator's one seeded generator: xorshift64, deterministic from its seed (the figures
/// must not depend on a seed source; the soak seeds it from the clock on purpose).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    /// A generator seeded from the clock and `salt` (a run that should differ every time).
    pub fn from_clock(salt: u64) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Rng::new(now ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
    /// Next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform between `lo` and `hi` (microsecond steps).
    pub fn between(
        &mut self,
        lo: std::time::Duration,
        hi: std::time::Duration,
    ) -> std::time::Duration {
        let span = hi.saturating_sub(lo).as_micros() as u64;
        lo + std::time::Duration::from_micros(self.next_u64() % (span + 1))
    }
}

/// Builds `count` pods with `make(i)` on every core (generation is the slow part of a run, not
/// something measured).
pub fn generate(count: usize, make: impl Fn(usize) -> Pod + Sync) -> Vec<Arc<Pod>> {
    generate_arcs(count, &|i| Arc::new(make(i)))
}

fn generate_arcs(count: usize, make: &(dyn Fn(usize) -> Arc<Pod> + Sync)) -> Vec<Arc<Pod>> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 8);
    let per = count.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..count)
            .step_by(per)
            .map(|start| {
                s.spawn(move || (start..(start + per).min(count)).map(make).collect::<Vec<_>>())
            })
            .collect();
        parts.into_iter().flat_map(|h| h.join().expect("generator thread panicked")).collect()
    })
}

/// [`generate`], each pod then rebuilt in an arena of its own by the reflector transform a user
/// sets for it ([`snapinformer_kube::transform::into_arena`]), before it is wrapped in its `Arc`
/// (which stays on the ordinary heap, beside the other pods' `Arc`s); the decoded original is
/// dropped. Without [`snapinformer_arena::ArenaAlloc`] as the global allocator these are
/// ordinary pods.
pub fn generate_in_arenas(count: usize, make: impl Fn(usize) -> Pod + Sync) -> Vec<Arc<Pod>> {
    generate_arcs(count, &|i| in_arena(make(i)))
}

/// One decoded pod rebuilt in an arena of its own, as [`generate_in_arenas`] builds each.
pub fn in_arena(mut decoded: Pod) -> Arc<Pod> {
    snapinformer_kube::transform::into_arena(&mut decoded);
    Arc::new(decoded)
}

/// The initial population: pod `i` on node `i % nodes`, resource versions 1..=total.
pub fn initial_pods(shape: &Shape) -> Vec<Arc<Pod>> {
    generate(shape.total(), |i| make_pod(shape, i, i as u64 + 1, i % shape.nodes))
}

/// `count` updates of random pods with increasing resource versions from `first_rv`; about 5%
/// move the pod to another node. Returns the updates and each pod's node afterwards.
pub fn updates(shape: &Shape, count: usize, first_rv: u64, seed: u64) -> Vec<Arc<Pod>> {
    // Choose the pods and nodes sequentially (deterministic), build the objects in parallel.
    let plan = update_plan(shape, count, seed);
    generate(count, |u| make_pod(shape, plan[u].0, first_rv + u as u64, plan[u].1))
}

/// The plan of [`updates`]: `(pod, node afterwards)` for each update.
pub fn update_plan(shape: &Shape, count: usize, seed: u64) -> Vec<(usize, usize)> {
    let mut rng = Rng::new(seed);
    let mut node_of: Vec<usize> = (0..shape.total()).map(|i| i % shape.nodes).collect();
    (0..count)
        .map(|_| {
            let i = rng.below(shape.total());
            if rng.below(100) < 5 {
                node_of[i] = rng.below(shape.nodes);
            }
            (i, node_of[i])
        })
        .collect()
}

/// A digest of the workload a row applied, so that the parent can check that every row of a run
/// got the same one: FNV-1a (64 bits, not for security) over one line
/// `"<phase> <namespace>/<name> <resourceVersion> <nodeName>\n"` per pod, in the order applied.
/// The Go worker (`baselines/client-go`) computes the same function over its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadDigest(u64);

impl Default for WorkloadDigest {
    fn default() -> Self {
        WorkloadDigest(0xcbf2_9ce4_8422_2325)
    }
}

impl WorkloadDigest {
    fn write(&mut self, s: &str) {
        for b in s.bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Adds the pods of one phase, in the order they are applied.
    pub fn add(&mut self, phase: &str, pods: &[Arc<Pod>]) {
        for p in pods {
            let m = &p.metadata;
            self.add_fields(
                phase,
                m.namespace.as_deref().unwrap_or_default(),
                m.name.as_deref().unwrap_or_default(),
                m.resource_version.as_deref().unwrap_or_default(),
                pod_node(p).unwrap_or_default(),
            );
        }
    }

    /// Adds one pod of `phase` by the fields the digest covers (for pods in another form).
    pub fn add_fields(&mut self, phase: &str, namespace: &str, name: &str, rv: &str, node: &str) {
        for part in [phase, " ", namespace, "/", name, " ", rv, " ", node, "\n"] {
            self.write(part);
        }
    }

    /// The digest as 16 hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

#[cfg(test)]
mod digest_tests {
    use super::*;

    #[test]
    fn the_workload_digest_depends_on_phase_order_and_every_keyed_field() {
        let shape = Shape::for_objects(100, 10).with_profile(PodProfile::Small);
        let a = updates(&shape, 20, 101, 7);
        let b = updates(&shape, 20, 101, 11);
        let digest = |parts: &[(&str, &[Arc<Pod>])]| {
            let mut d = WorkloadDigest::default();
            for (phase, pods) in parts {
                d.add(phase, pods);
            }
            d.hex()
        };
        let base = digest(&[("x", &a), ("y", &b)]);
        assert_eq!(base.len(), 16);
        assert_eq!(base, digest(&[("x", &a), ("y", &b)]), "deterministic");
        assert_ne!(base, digest(&[("y", &b), ("x", &a)]), "phase order counts");
        assert_ne!(base, digest(&[("x", &a), ("z", &b)]), "phase names count");
        assert_ne!(base, digest(&[("x", &b), ("y", &a)]), "the pods count");
        // The FNV-1a reference value of the empty input.
        assert_eq!(WorkloadDigest::default().hex(), "cbf29ce484222325");
    }
}
