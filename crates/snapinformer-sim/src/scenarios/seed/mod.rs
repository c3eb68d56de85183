//! The `seed` scenario: the field report reproduced.
//!
//! 200 StatefulSets of 1000 replicas in one namespace and a DaemonSet over the nodes; the pods
//! are created by the StatefulSet and DaemonSet controllers of [`controllers`], moved to Running
//! by a simulated kubelet, and seen by the controllers through the cache under test, one row per
//! cache (with and without read-your-writes), each in its own worker process. Three modes:
//!
//! - **http**: the test API server (`snapinformer-apiserver`, in the parent process) with its
//!   simulated kubelet; the worker runs the reflector over HTTP, the cache and the controllers,
//!   which create pods with POSTs and get real 409s.
//! - **real**: the real control plane (`scripts/real-cluster`: etcd, kube-apiserver and kwok,
//!   whose fake nodes run the pods), a fresh one per row; the worker is a client of
//!   kube-apiserver exactly as in http mode, and the row `kube-controller-manager` runs the
//!   real controller manager (and kube-scheduler) on the same workload instead ([`real`]).
//!   409s, duplicates and the time until every pod runs are counted from the server's side, the
//!   same way for every row.
//! - **inproc**: an in-process cluster model ([`cluster::InprocCluster`]) delivers its writes
//!   and its kubelet's status updates into the cache's queue at a fixed rate, open loop (as the
//!   `store` scenario does); staleness counts from each event's scheduled slot ([`slots`]).
//!
//! Our rows run through the product's public informer API ([`informer_cache`]); the baselines
//! through a harness pipeline doing the same work ([`pipeline`]). The controllers are reconcile
//! functions on the controller runtime (`snapinformer-runtime`), the same for every row: they
//! read either cache through [`cache::PodCache`], wait for their own writes through the
//! runtime's `VersionedCache` (the informer, or the pipeline's visible version) and write
//! through a [`cluster::Cluster`]. Threads are placed as a controller manager runs them
//! (unpinned; [`crate::harness::placement`]), with kube-controller-manager's default worker
//! counts: 5 StatefulSet workers (`--concurrent-statefulset-syncs`) and 2 DaemonSet workers
//! (`--concurrent-daemonset-syncs`).
//!
//! A row ends when the cache shows every desired pod Running (plus a short settle time, to catch
//! late wrong decisions), or at the time limit.

pub mod cache;
pub mod cluster;
pub mod command;
pub mod controllers;
pub mod informer_cache;
pub mod pipeline;
pub mod real;
pub mod report;
pub mod run;
pub mod slots;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{harness::placement::Placement, pods::PodProfile, rows::CacheKind};
use cluster::{StreamFill, StreamPriority};
use controllers::{DaemonListMode, PodManagement, SetListMode};

pub use run::run_row;

/// Namespace of the daemon set.
pub const DAEMON_NAMESPACE: &str = "kube-system";
/// Name of the daemon set (the report's example).
pub const DAEMON_NAME: &str = "kube-proxy";
/// The real-mode row of the real kube-controller-manager (`--rows kube-controller-manager`).
pub const KCM_ROW: &str = "kube-controller-manager";

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
    /// The real control plane (etcd, kube-apiserver, kwok), reflector over HTTPS: end to end,
    /// with the real kube-controller-manager as the anchor row.
    Real,
}

impl Mode {
    /// Report name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Http => "http",
            Mode::Inproc => "inproc",
            Mode::Real => "real",
        }
    }
}

/// One row of the report: a cache, with or without read-your-writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The cache under test.
    pub cache: CacheKind,
    /// Whether the controllers wait for their own writes.
    pub read_your_writes: bool,
}

impl Row {
    /// Report name: the cache's, with `+ryw` when read-your-writes is on.
    pub fn name(self) -> String {
        if self.read_your_writes {
            format!("{}+ryw", self.cache.name())
        } else {
            self.cache.name().to_owned()
        }
    }

    /// Parses [`Row::name`].
    pub fn parse(s: &str) -> Result<Row, String> {
        let (cache, ryw) = match s.strip_suffix("+ryw") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let cache = CacheKind::parse(cache)
            .ok_or_else(|| format!("unknown cache {cache:?} in row {s:?}"))?;
        Ok(Row { cache, read_your_writes: ryw })
    }

    /// The default rows, in report order: every cache of the headline with read-your-writes
    /// (compared like for like), then the same without. Ours is the store as it is built by
    /// default (`snapshot-bg`: background reclamation); `snapshot` (inline) is a named row.
    pub fn defaults() -> Vec<Row> {
        let caches =
            [CacheKind::SnapshotBg, CacheKind::Locked, CacheKind::LockedBatch, CacheKind::KubeRs];
        [true, false]
            .into_iter()
            .flat_map(|ryw| caches.map(|cache| Row { cache, read_your_writes: ryw }))
            .collect()
    }
}

/// A row as the command line names it: one of ours, or (real mode only) the real
/// kube-controller-manager ([`KCM_ROW`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowSpec {
    /// Our controllers over a cache.
    Ours(Row),
    /// The real kube-controller-manager on the real control plane.
    KubeControllerManager,
}

impl RowSpec {
    /// Report name.
    pub fn name(self) -> String {
        match self {
            RowSpec::Ours(row) => row.name(),
            RowSpec::KubeControllerManager => KCM_ROW.to_owned(),
        }
    }

    /// Parses [`RowSpec::name`].
    pub fn parse(s: &str) -> Result<RowSpec, String> {
        if s == KCM_ROW {
            Ok(RowSpec::KubeControllerManager)
        } else {
            Row::parse(s).map(RowSpec::Ours)
        }
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
    /// How the DaemonSet controller finds its pods.
    #[serde(default)]
    pub daemon_list: DaemonListMode,
    /// StatefulSet pod management policy.
    pub policy: PodManagement,
    /// Size of the StatefulSet pods in process (`None`: realistic).
    pub pod_profile: Option<PodProfile>,
    /// Size of the StatefulSet pods over HTTP.
    pub http_pod_profile: PodProfile,
    /// Where the cache's writer and the controllers run.
    #[serde(default)]
    pub placement: Placement,
    /// inproc: how the cluster model's stream is scheduled.
    #[serde(default)]
    pub stream_priority: StreamPriority,
    /// inproc: what the stream delivers in a slot with no write and no pod to start.
    #[serde(default)]
    pub stream_fill: StreamFill,
    /// Every row's pods rebuilt in arenas as they arrive (`--pod-arena`; the reflector's
    /// `into_arena` transform over HTTP, the stream's delivery in process).
    #[serde(default)]
    pub pod_arena: bool,
    /// The `snapinformer` rows' batch window in seconds (`None`: the informer's default; 0:
    /// none).
    #[serde(default)]
    pub informer_batch_window_s: Option<f64>,
    /// The informer's default batch window in the build that ran the report, in seconds
    /// (`snapinformer_core::DEFAULT_BATCH_WINDOW`): what `informer_batch_window_s: None`
    /// meant. `None` in reports from before 2026-12-07, whose default was 1 ms.
    #[serde(default)]
    pub informer_default_batch_window_s: Option<f64>,
    /// The baselines' batch window in seconds (`None` or 0: none, as client-go has none).
    #[serde(default)]
    pub baseline_batch_window_s: Option<f64>,
    /// GiB of heap each worker touched and freed before its row, keeping freed memory
    /// (`--prefault-gib`; 0: none).
    #[serde(default)]
    pub prefault_gib: f64,
    /// Seconds the parent waited before starting each row's worker, so that no row grows its
    /// heap on memory the previous row just freed (`--rest`; 0 in reports from before it).
    #[serde(default)]
    pub rest_s: f64,
}

impl SeedParams {
    /// The pod profile of `mode`.
    pub fn profile(&self, mode: Mode) -> PodProfile {
        match mode {
            Mode::Http | Mode::Real => self.http_pod_profile,
            Mode::Inproc => self.pod_profile.unwrap_or(PodProfile::Realistic),
        }
    }

    /// The startup delay.
    pub fn startup_delay(&self) -> Duration {
        Duration::from_millis(self.startup_delay_ms)
    }
}

/// The user agent of the controllers' client (and their reflector's) in http and real mode:
/// the server's audit log attributes their requests to `snapinformer-seed`.
pub const CONTROLLERS_USER_AGENT: &str = concat!("snapinformer-seed/", env!("CARGO_PKG_VERSION"));

/// What the parent tells a worker in http and real mode.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// Base URL of the API server (http mode: the test API server, no credentials).
    pub url: String,
    /// real mode: the kubeconfig to use instead of the bare URL (TLS and a bearer token).
    pub kubeconfig: Option<PathBuf>,
}

impl ServerInfo {
    /// The kube client configuration of this server: from the kubeconfig if there is one,
    /// else its bare URL (the test API server on loopback); with a read timeout above the
    /// watches' 300 s and the controllers' user agent ([`CONTROLLERS_USER_AGENT`]). Everything
    /// after this (discovery, the reflector, the controllers' writes) is the same for both.
    pub async fn client_config(&self) -> Result<kube::Config, String> {
        let mut config = match &self.kubeconfig {
            Some(path) => kubeconfig_config(path).await?,
            None => kube::Config::new(
                self.url.parse().map_err(|e| format!("server URL {}: {e}", self.url))?,
            ),
        };
        config.read_timeout = Some(Duration::from_secs(330));
        with_user_agent(&mut config, CONTROLLERS_USER_AGENT)?;
        Ok(config)
    }
}

/// The kube client configuration of the kubeconfig at `path` (kube's defaults otherwise).
pub async fn kubeconfig_config(path: &Path) -> Result<kube::Config, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("reading kubeconfig {}: {e}", path.display()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| format!("kubeconfig {}: {e}", path.display()))
}

/// Sends `agent` as the `User-Agent` of every request made with `config` (kube's client sends
/// none of its own), so that the server's audit log names the client.
pub fn with_user_agent(config: &mut kube::Config, agent: &str) -> Result<(), String> {
    let value =
        http::HeaderValue::from_str(agent).map_err(|e| format!("user agent {agent:?}: {e}"))?;
    config.headers.retain(|(name, _)| name != http::header::USER_AGENT);
    config.headers.push((http::header::USER_AGENT, value));
    Ok(())
}

/// Starts a test API server for one http row: nodes, sets and the daemon set created, the
/// simulated kubelet on. Call inside a Tokio runtime.
pub async fn start_server(
    params: &SeedParams,
) -> Result<snapinformer_apiserver::ServerHandle, String> {
    use snapinformer_apiserver::{Config, KubeletConfig, TestApiServer, generate};
    let config = Config {
        kubelet: Some(KubeletConfig { startup_delay: params.startup_delay(), schedule: false }),
        history_size: (params.sets * params.replicas * 2).max(100_000),
        ..Config::default()
    };
    let server = TestApiServer::start(config)
        .await
        .map_err(|e| format!("starting the test API server: {e}"))?;
    server
        .bulk_create_nodes(generate::nodes(params.nodes))
        .map_err(|e| format!("creating nodes: {e}"))?;
    let sets = (0..params.sets).map(|i| {
        generate::statefulset(crate::pods::NAMESPACE, &format!("web-{i}"), params.replicas as i32)
    });
    server.bulk_create(sets).map_err(|e| format!("creating sets: {e}"))?;
    server
        .create(&generate::daemonset(DAEMON_NAMESPACE, DAEMON_NAME))
        .map_err(|e| format!("creating the daemon set: {e}"))?;
    Ok(server)
}
