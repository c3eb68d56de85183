//! The `seed` scenario: the field report reproduced.
//!
//! 200 StatefulSets of 1000 replicas in one namespace and a DaemonSet over the nodes; the pods
//! are created by the StatefulSet and DaemonSet controllers of [`controllers`], moved to Running
//! by a simulated kubelet, and seen by the controllers through the cache under test
//! ([`cache`]), one row per backend, each in its own process. Two modes:
//!
//! - **http**: the test API server (`snapinformer-apiserver`, in the parent process) with its
//!   simulated kubelet; the worker runs the reflector over HTTP, the cache and the controllers,
//!   which create pods with POSTs and get real 409s.
//! - **inproc**: an in-process cluster model ([`cluster::InprocCluster`]) delivers its writes
//!   and its kubelet's status updates into the cache's queue at a fixed rate, open loop (as the
//!   `store` scenario does), so the cache alone decides how stale the controllers' view gets.
//!
//! A row ends when the cache shows every desired pod Running (plus a short settle time, to catch
//! late wrong decisions), or at the time limit.

pub mod cache;
pub mod cluster;
pub mod controllers;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    apps::v1::{DaemonSet, StatefulSet},
    core::v1::{Node, Pod},
};
use kube::api::{Api, ListParams};
use snapinformer_core::Queue;

use crate::{
    backends::{BackendKind, SimReader},
    pods::{self, NAMESPACE, PodProfile},
    stats::{Latency, Summary},
    store_scenario::{HeapMeter, Progress},
};
use cache::{Cache, Classifier};
use cluster::{Cluster, HttpCluster, InprocCluster};
use controllers::{
    ControllerConfig, Controllers, DaemonSpec, PodManagement, Queues, SetListMode, SetSpec,
};

/// Namespace and name of the daemon set.
pub const DAEMON_NAMESPACE: &str = "kube-system";
/// Name of the daemon set (the report's example).
pub const DAEMON_NAME: &str = "kube-proxy";

/// How events reach the cache.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Test API server, reflector over HTTP: end to end.
    #[serde(alias = "Http")]
    Http,
    /// In-process cluster model, events straight into the queue, kubelet open loop.
    #[serde(alias = "Inproc")]
    Inproc,
}

impl Mode {
    /// Report name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Http => "http",
            Mode::Inproc => "inproc",
        }
    }
}

/// One row of the report: a backend, with or without read-your-writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The store.
    pub backend: BackendKind,
    /// Whether the controllers wait for their own writes.
    pub read_your_writes: bool,
}

impl Row {
    /// Report name: the backend's, with `+ryw` when read-your-writes is on.
    pub fn name(self) -> String {
        if self.read_your_writes {
            format!("{}+ryw", self.backend.name())
        } else {
            self.backend.name().to_owned()
        }
    }

    /// Parses [`Row::name`].
    pub fn parse(s: &str) -> Result<Row, String> {
        let (backend, ryw) = match s.strip_suffix("+ryw") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let backend = <BackendKind as clap::ValueEnum>::from_str(backend, false)
            .map_err(|_| format!("unknown backend {backend:?} in row {s:?}"))?;
        Ok(Row { backend, read_your_writes: ryw })
    }
}

/// Parameters of a run (all rows share them).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SeedParams {
    /// StatefulSets.
    pub sets: usize,
    /// Replicas per set.
    pub replicas: usize,
    /// Nodes (one daemon pod each).
    pub nodes: usize,
    /// StatefulSet controller workers.
    pub set_workers: usize,
    /// DaemonSet controller workers.
    pub daemon_workers: usize,
    /// inproc: events delivered into the queue per second (open loop).
    pub rate: u64,
    /// Time from a pod's creation to its start by the kubelet, milliseconds.
    pub startup_delay_ms: u64,
    /// A row ends at this time even if not every pod runs, seconds.
    pub max_time_s: f64,
    /// Time a row goes on after every pod runs, seconds.
    pub settle_s: f64,
    /// How the StatefulSet controller finds a set's pods.
    pub set_list: SetListMode,
    /// StatefulSet pod management policy.
    pub policy: PodManagement,
    /// Size of the StatefulSet pods in process (`None`: realistic).
    pub pod_profile: Option<PodProfile>,
    /// Size of the StatefulSet pods over HTTP.
    pub http_pod_profile: PodProfile,
}

impl SeedParams {
    /// The pod profile of `mode`.
    pub fn profile(&self, mode: Mode) -> PodProfile {
        match mode {
            Mode::Http => self.http_pod_profile,
            Mode::Inproc => self.pod_profile.unwrap_or(PodProfile::Realistic),
        }
    }
}

/// Everything measured for one row in one mode.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SeedBackendReport {
    /// Row name (`snapshot`, `snapshot+ryw`, `locked`, ...).
    pub name: String,
    /// The store.
    pub backend: String,
    /// Whether read-your-writes was on.
    pub read_your_writes: bool,
    /// Deltas applied per second of applier time (lock waits included).
    pub apply_per_s: f64,
    /// Time from a delta entering the queue to its visibility to the controllers, microseconds.
    pub staleness_us: Summary,
    /// Largest queue depth (keys queued, as client-go's DeltaFIFO counts).
    pub queue_depth_max: u64,
    /// Queue depth when the row ended.
    pub queue_depth_end: u64,
    /// inproc: the most writes waiting in the cluster model for delivery (the watch's send
    /// buffer; large when writes come faster than the stream rate, or the stream thread lacks
    /// CPU).
    pub undelivered_max: u64,
    /// inproc: the most events the stream delivered at once after waking up late (its thread
    /// was descheduled); such a burst reaches the cache as one large batch.
    pub stream_burst_max: u64,
    /// Namespace list latency seen by the controllers, microseconds.
    pub list_us: Summary,
    /// Index lookup latency seen by the controllers, microseconds.
    pub index_us: Summary,
    /// Peak heap of the worker process.
    pub peak_heap_bytes: u64,
    /// Resident set size of the worker process at the end of the row.
    pub rss_bytes: u64,
    /// Creates answered 409 AlreadyExists: decisions made on a stale cache.
    pub conflicts_409: u64,
    /// Daemon pods created on a node that already had one.
    pub duplicate_daemon_pods: u64,
    /// Time from the controllers' start until the cache showed every desired pod Running;
    /// `None` if that did not happen within the time limit.
    pub time_to_all_running_s: Option<f64>,
    /// How long the row ran, seconds.
    pub run_s: f64,
    /// Deltas applied to the cache.
    pub events_applied: u64,
    /// StatefulSet pods created.
    pub set_creates: u64,
    /// StatefulSet pods deleted.
    pub set_deletes: u64,
    /// Daemon pods created.
    pub daemon_creates: u64,
    /// Extra daemon pods deleted.
    pub daemon_deletes: u64,
    /// Writes that failed for another reason than 409.
    pub write_errors: u64,
    /// Controller syncs.
    pub syncs: u64,
    /// Syncs put off by read-your-writes.
    pub ryw_deferrals: u64,
    /// Pods in the cache at the end, after it drained.
    pub cache_pods: u64,
    /// Pods in the cluster at the end.
    pub cluster_pods: u64,
    /// `(seconds since the controllers started, queue depth)` samples.
    pub depth_series: Vec<(f64, u64)>,
    /// `(staleness us, cumulative fraction)` points.
    pub staleness_cdf: Vec<(u64, f64)>,
}

/// What the parent tells a worker in http mode.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// Base URL of the test API server.
    pub url: String,
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn summary(l: &std::sync::Mutex<Latency>) -> Summary {
    l.lock().expect("latency lock").summary()
}

/// The world a row runs in: where the sets and nodes come from and where writes go.
struct World {
    sets: Vec<SetSpec>,
    daemon: DaemonSpec,
    cluster: Arc<dyn Cluster>,
    inproc: Option<Arc<InprocCluster>>,
    reflector: Option<snapinformer_kube::ReflectorHandle>,
    client: Option<kube::Client>,
}

fn set_index(name: &str) -> usize {
    name.rsplit('-').next().and_then(|i| i.parse().ok()).unwrap_or(0)
}

/// Runs one row in this process. With `leak_at_end`, the cache is not freed at the end (for a
/// worker process that exits right after).
pub fn run_row(
    row: Row,
    mode: Mode,
    params: &SeedParams,
    server: Option<&ServerInfo>,
    heap: &dyn HeapMeter,
    progress: Progress<'_>,
    leak_at_end: bool,
) -> Result<SeedBackendReport, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting runtime: {e}"))?;
    let store = row.backend.build();
    let reader: Box<dyn SimReader> = store.reader();
    let queues = Queues::new(format!("{DAEMON_NAMESPACE}/{DAEMON_NAME}"));

    // Sets, nodes and the daemon set: from the server, or made up for the in-process model.
    let (sets, daemon, client) = match mode {
        Mode::Http => {
            let url = &server.ok_or("http mode needs a server")?.url;
            let uri = url.parse().map_err(|e| format!("server URL {url}: {e}"))?;
            let mut config = kube::Config::new(uri);
            config.read_timeout = Some(Duration::from_secs(330));
            let client = {
                let _guard = runtime.enter();
                kube::Client::try_from(config).map_err(|e| format!("kube client: {e}"))?
            };
            let (sets, daemon) = runtime.block_on(discover(client.clone()))?;
            (sets, daemon, Some(client))
        }
        Mode::Inproc => {
            let sets = (0..params.sets)
                .map(|i| SetSpec {
                    namespace: NAMESPACE.into(),
                    name: format!("web-{i}"),
                    uid: pods::owner_uid(i),
                    replicas: params.replicas,
                    index: i,
                })
                .collect();
            let daemon = DaemonSpec {
                namespace: DAEMON_NAMESPACE.into(),
                name: DAEMON_NAME.into(),
                uid: "d5e0c0de-0000-4000-8000-000000000001".into(),
                nodes: (0..params.nodes).map(pods::node_name).collect(),
            };
            (sets, daemon, None)
        }
    };
    let classifier = Classifier {
        nodes: daemon.nodes.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect(),
        daemon_uid: daemon.uid.clone(),
    };
    // The store scenario's placement: the applier (the cache's writer) on the first core, the
    // controllers on the last, so readers never take the writer's core.
    let cores = crate::store_scenario::placement();
    let (writer_core, reader_core) = (cores.map(|c| c.0), cores.map(|c| c.1));
    let cache = Cache::start(store, classifier, Arc::new(queues.clone()), writer_core);
    let kubelet_stop = Arc::new(AtomicBool::new(false));
    let mut kubelet = None;
    let world = match mode {
        Mode::Http => {
            let client = client.expect("http mode has a client");
            let reflector = {
                let _guard = runtime.enter();
                snapinformer_kube::Reflector::new(
                    Api::<Pod>::all(client.clone()),
                    cache.queue.clone(),
                    snapinformer_kube::ReflectorConfig::new().name("seed-pods"),
                )
                .spawn()
            };
            let deadline = Instant::now() + Duration::from_secs(60);
            while !cache.queue.has_synced() {
                if Instant::now() > deadline {
                    return Err("the pod reflector did not sync within 60 s".into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let cluster = Arc::new(HttpCluster::new(runtime.handle().clone(), client.clone()));
            World {
                sets,
                daemon,
                cluster,
                inproc: None,
                reflector: Some(reflector),
                client: Some(client),
            }
        }
        Mode::Inproc => {
            let inproc = Arc::new(InprocCluster::new(
                cache.queue.clone(),
                Duration::from_millis(params.startup_delay_ms),
            ));
            // The stream is not pinned: it stands for the API server, which is neither the
            // cache's writer nor a controller. (Pinned to the writer's core it made every row
            // slower in a trial run; on the controllers' core it would get a twelfth of a core.)
            kubelet = Some(inproc.run_stream(params.rate, kubelet_stop.clone(), None));
            World {
                sets,
                daemon,
                cluster: inproc.clone(),
                inproc: Some(inproc),
                reflector: None,
                client: None,
            }
        }
    };
    let nodes = world.daemon.nodes.len();
    let config = ControllerConfig {
        read_your_writes: row.read_your_writes,
        set_list: params.set_list,
        policy: params.policy,
        set_workers: params.set_workers,
        daemon_workers: params.daemon_workers,
        profile: params.profile(mode),
        daemon_list_once: !row.backend.has_indexes(),
    };
    let controllers = Controllers::new(
        config,
        world.sets,
        world.daemon,
        world.cluster.clone(),
        cache.visible.clone(),
        queues.clone(),
    );
    let desired = controllers.desired_set_pods();
    progress(&format!(
        "{} {}: controllers start ({desired} set pods, {nodes} nodes)",
        mode.name(),
        row.name()
    ));
    let started = Instant::now();
    let workers = controllers.start(&*reader, reader_core);

    let mut depth_series = Vec::new();
    let mut undelivered_max = 0;
    let mut converged_at: Option<f64> = None;
    let mut last_report = 0.0;
    let counters = &cache.counters;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let t = started.elapsed().as_secs_f64();
        let depth = cache.queue.len() as u64;
        depth_series.push((t, depth));
        if let Some(inproc) = &world.inproc {
            undelivered_max = undelivered_max.max(inproc.undelivered() as u64);
        }
        let running = counters.set_pods_running.load(Ordering::Relaxed);
        let daemon_nodes = counters.nodes_with_running_daemon.load(Ordering::Relaxed);
        if converged_at.is_none() && running >= desired && daemon_nodes >= nodes {
            converged_at = Some(t);
        }
        if t - last_report >= 1.0 {
            last_report = t;
            progress(&format!(
                "{} {}: {t:.0}s, running in cache {running}/{desired} + {daemon_nodes}/{nodes} daemon, queue {depth}, 409s {}, duplicates {}",
                mode.name(),
                row.name(),
                controllers.counters.conflicts_409.load(Ordering::Relaxed),
                controllers.duplicate_daemon_pods(),
            ));
        }
        if converged_at.is_some_and(|c| t - c >= params.settle_s) || t >= params.max_time_s {
            break;
        }
    }
    let run_s = started.elapsed().as_secs_f64();
    let queue_depth_end = cache.queue.len() as u64;
    let peak_heap_bytes = heap.peak();
    let rss = rss_bytes();

    // Stop writing, let the cache drain, compare it with the cluster.
    progress(&format!("{} {}: stopping, draining the cache", mode.name(), row.name()));
    queues.shut_down();
    controllers.stop_writing();
    for w in workers {
        let _ = w.join();
    }
    kubelet_stop.store(true, Ordering::Relaxed);
    if let Some(k) = kubelet {
        let _ = k.join();
    }
    let cluster_pods = match &world.inproc {
        Some(inproc) => {
            cache.visible.wait_for(inproc.resource_version(), Duration::from_secs(120));
            inproc.pod_count() as u64
        }
        None => {
            let client = world.client.clone().expect("http mode has a client");
            let count = runtime
                .block_on(async {
                    Api::<Pod>::all(client).list_metadata(&ListParams::default()).await
                })
                .map(|l| l.items.len() as u64)
                .unwrap_or(0);
            // Wait until the queue stays empty for a moment: the watch has delivered the rest.
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut quiet_since = Instant::now();
            while Instant::now() < deadline {
                if cache.queue.len() > 0 {
                    quiet_since = Instant::now();
                } else if quiet_since.elapsed() > Duration::from_millis(1500) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            count
        }
    };
    let cache_pods = reader.list_all() as u64;
    if let Some(r) = &world.reflector {
        runtime.block_on(r.stop());
    }
    let applied = counters.applied.load(Ordering::Relaxed);
    let apply_nanos = counters.apply_nanos.load(Ordering::Relaxed).max(1);
    let queue_depth_max = counters.depth_max.load(Ordering::Relaxed) as u64;
    let (store, staleness) = cache.stop();
    if leak_at_end {
        // A worker process exits right after: freeing gigabytes of pods object by object
        // would only add seconds to the run.
        std::mem::forget(store);
        std::mem::forget(reader);
        std::mem::forget(controllers.clone());
    }
    let c = &controllers.counters;
    Ok(SeedBackendReport {
        name: row.name(),
        backend: row.backend.name().into(),
        read_your_writes: row.read_your_writes,
        apply_per_s: applied as f64 / (apply_nanos as f64 / 1e9),
        staleness_us: staleness.summary(),
        queue_depth_max,
        queue_depth_end,
        undelivered_max,
        stream_burst_max: world.inproc.as_ref().map_or(0, |i| i.burst_max.load(Ordering::Relaxed)),
        list_us: summary(&controllers.reads.list),
        index_us: summary(&controllers.reads.index),
        peak_heap_bytes,
        rss_bytes: rss,
        conflicts_409: c.conflicts_409.load(Ordering::Relaxed),
        duplicate_daemon_pods: controllers.duplicate_daemon_pods(),
        time_to_all_running_s: converged_at,
        run_s,
        events_applied: applied,
        set_creates: c.set_creates.load(Ordering::Relaxed),
        set_deletes: c.set_deletes.load(Ordering::Relaxed),
        daemon_creates: c.daemon_creates.load(Ordering::Relaxed),
        daemon_deletes: c.daemon_deletes.load(Ordering::Relaxed),
        write_errors: c.write_errors.load(Ordering::Relaxed),
        syncs: c.syncs.load(Ordering::Relaxed),
        ryw_deferrals: c.ryw_deferrals.load(Ordering::Relaxed),
        cache_pods,
        cluster_pods,
        depth_series,
        staleness_cdf: staleness.cdf(),
    })
}

/// Reads the sets, the daemon set and the nodes from the server, as the controllers' informers
/// would at start.
async fn discover(client: kube::Client) -> Result<(Vec<SetSpec>, DaemonSpec), String> {
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NAMESPACE);
    let sets = sets.list(&ListParams::default()).await.map_err(|e| format!("listing sets: {e}"))?;
    let sets = sets
        .items
        .into_iter()
        .map(|s| {
            let name = s.metadata.name.clone().unwrap_or_default();
            SetSpec {
                namespace: NAMESPACE.into(),
                index: set_index(&name),
                uid: s.metadata.uid.clone().unwrap_or_default(),
                replicas: s.spec.and_then(|s| s.replicas).unwrap_or(1).max(0) as usize,
                name,
            }
        })
        .collect();
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), DAEMON_NAMESPACE);
    let ds = ds.get(DAEMON_NAME).await.map_err(|e| format!("reading the daemon set: {e}"))?;
    let nodes: Api<Node> = Api::all(client);
    let nodes =
        nodes.list(&ListParams::default()).await.map_err(|e| format!("listing nodes: {e}"))?;
    let daemon = DaemonSpec {
        namespace: DAEMON_NAMESPACE.into(),
        name: DAEMON_NAME.into(),
        uid: ds.metadata.uid.unwrap_or_default(),
        nodes: nodes.items.into_iter().filter_map(|n| n.metadata.name).collect(),
    };
    Ok((sets, daemon))
}

/// Starts a test API server for one http row: nodes, sets and the daemon set created, the
/// simulated kubelet on. Call inside a Tokio runtime.
pub async fn start_server(
    params: &SeedParams,
) -> Result<snapinformer_apiserver::ServerHandle, String> {
    use snapinformer_apiserver::{Config, KubeletConfig, TestApiServer, generate};
    let config = Config {
        kubelet: Some(KubeletConfig {
            startup_delay: Duration::from_millis(params.startup_delay_ms),
            schedule: false,
        }),
        history_size: (params.sets * params.replicas * 2).max(100_000),
        ..Config::default()
    };
    let server = TestApiServer::start(config)
        .await
        .map_err(|e| format!("starting the test API server: {e}"))?;
    server
        .bulk_create_nodes(generate::nodes(params.nodes))
        .map_err(|e| format!("creating nodes: {e}"))?;
    let sets = (0..params.sets)
        .map(|i| generate::statefulset(NAMESPACE, &format!("web-{i}"), params.replicas as i32));
    server.bulk_create(sets).map_err(|e| format!("creating sets: {e}"))?;
    server
        .create(&generate::daemonset(DAEMON_NAMESPACE, DAEMON_NAME))
        .map_err(|e| format!("creating the daemon set: {e}"))?;
    Ok(server)
}

/// The report of every row of one mode.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ModeReport {
    /// `http` or `inproc`.
    pub mode: Mode,
    /// One entry per row.
    pub backends: Vec<SeedBackendReport>,
    /// The targets checked on this mode.
    pub targets: Vec<SeedTarget>,
}

/// The whole `seed` report.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SeedReport {
    /// `"seed"`.
    pub scenario: String,
    /// Parameters.
    pub params: SeedParams,
    /// Where and how it ran.
    pub environment: crate::report::Environment,
    /// One report per mode.
    pub modes: Vec<ModeReport>,
}

/// One target of the issue, as measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SeedTarget {
    /// What is checked.
    pub name: String,
    /// What was measured.
    pub value: String,
    /// What it must be.
    pub target: String,
    /// Whether it is met.
    pub pass: bool,
}

fn check(name: &str, value: String, target: String, pass: bool) -> SeedTarget {
    SeedTarget { name: name.into(), value, target, pass }
}

/// The targets for one mode.
pub fn targets(mode: Mode, rows: &[SeedBackendReport]) -> Vec<SeedTarget> {
    let mut out = Vec::new();
    let find = |name: &str| rows.iter().find(|r| r.name == name);
    for r in rows {
        out.push(check(
            &format!("{}: the cache equals the cluster once drained", r.name),
            format!("{} cached, {} in the cluster", r.cache_pods, r.cluster_pods),
            "equal".into(),
            r.cache_pods == r.cluster_pods,
        ));
    }
    if let Some(ours) = find("snapshot+ryw") {
        out.push(check(
            "snapshot+ryw: zero 409 conflicts and zero duplicate daemon pods",
            format!("{} conflicts, {} duplicates", ours.conflicts_409, ours.duplicate_daemon_pods),
            "0 and 0".into(),
            ours.conflicts_409 == 0 && ours.duplicate_daemon_pods == 0,
        ));
        out.push(check(
            "snapshot+ryw: every pod Running within the time limit",
            ours.time_to_all_running_s.map_or("not converged".into(), |t| format!("{t:.1} s")),
            "converged".into(),
            ours.time_to_all_running_s.is_some(),
        ));
    }
    for name in ["snapshot", "snapshot+ryw"] {
        let Some(ours) = find(name) else { continue };
        // A bounded queue: what is left at the end is no more than one batch's worth.
        out.push(check(
            &format!("{name}: queue depth bounded (no backlog at the end)"),
            format!("max {}, end {}", ours.queue_depth_max, ours.queue_depth_end),
            format!("end <= {}", cache::MAX_BATCH),
            ours.queue_depth_end <= cache::MAX_BATCH as u64,
        ));
        if mode == Mode::Inproc {
            out.push(check(
                &format!("{name}: staleness p99 under 1 ms (inproc)"),
                format!("{} us", ours.staleness_us.p99),
                "< 1000 us".into(),
                ours.staleness_us.p99 < 1000,
            ));
        }
    }
    out
}

/// The side-by-side table of one mode.
pub fn table(report: &ModeReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<18} {:>10} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>7} {:>6} {:>9} {:>8}",
        "row",
        "apply/s",
        "stale p50",
        "stale p99",
        "stale max",
        "depth max",
        "list p99",
        "index p99",
        "409s",
        "dups",
        "running",
        "heap MB"
    );
    for r in &report.backends {
        let _ = writeln!(
            s,
            "{:<18} {:>10.0} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>7} {:>6} {:>9} {:>8.0}",
            r.name,
            r.apply_per_s,
            fmt_us(r.staleness_us.p50),
            fmt_us(r.staleness_us.p99),
            fmt_us(r.staleness_us.max),
            r.queue_depth_max,
            fmt_us(r.list_us.p99),
            fmt_us(r.index_us.p99),
            r.conflicts_409,
            r.duplicate_daemon_pods,
            r.time_to_all_running_s.map_or("never".to_owned(), |t| format!("{t:.1}s")),
            r.peak_heap_bytes as f64 / 1e6,
        );
    }
    for t in &report.targets {
        let _ = writeln!(
            s,
            "  [{}] {}: {} (target {})",
            if t.pass { "ok" } else { "MISS" },
            t.name,
            t.value,
            t.target
        );
    }
    s
}

/// Microseconds for a table cell.
pub fn fmt_us(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.1}s", us as f64 / 1e6)
    } else if us >= 1000 {
        format!("{:.1}ms", us as f64 / 1e3)
    } else {
        format!("{us}us")
    }
}
