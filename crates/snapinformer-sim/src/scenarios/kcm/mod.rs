//! The `kcm` scenario: the real kube-controller-manager (client-go as it ships) against the
//! test API server, at the field report's scale.
//!
//! The test API server runs in this process with its simulated kubelet (which also binds
//! pending pods, as a scheduler). The nodes, the StatefulSets (Parallel pod management, so that
//! a set's pods are created at once, as in the report) and a DaemonSet are created first; then
//! kube-controller-manager starts with `--controllers=statefulset,daemonset` and
//! `--leader-elect=false` against the server's kubeconfig, creates the 200,000 pods and keeps
//! the sets' and the DaemonSet's status, while a watch of the server (the [`observer`]) counts
//! what exists. The run ends when every pod runs (plus a settle time, to catch late duplicates)
//! or at the time limit.
//!
//! Everything is counted from outside kube-controller-manager, the same way for any server
//! (the real kube-apiserver too):
//!
//! - **requests by verb, resource and code** from the server's `apiserver_request_total`
//!   (`/metrics`, kube-apiserver's metric and labels);
//! - **requests by client** (a 409 of the StatefulSet controller rather than of another client)
//!   from the server's audit log in kube-apiserver's format ([`audit`]), since
//!   `apiserver_request_total` has no client label;
//! - **pods Running, duplicate daemon pods, time to all Running** from a watch of the server's
//!   pods ([`observer`]);
//! - **the controller manager's own view** from its `/metrics`, sampled through the run:
//!   `informer_queued_items` (the informer FIFO's depth, the report's DeltaFIFO backlog),
//!   `informer_store_resource_version` against the server's version (how stale its cache is),
//!   `workqueue_depth`, `workqueue_adds_total`, `workqueue_retries_total`,
//!   `workqueue_queue_duration_seconds`, the stale-sync skips of client-go 1.36+'s
//!   read-your-writes (`*_stale_sync_skips_total`); and its peak RSS (`VmHWM`) and CPU time
//!   from `/proc`.
//!
//! The controller manager talks protobuf, its default, as it does with the real kube-apiserver
//! (the test server reads and writes Kubernetes protobuf); `--kcm-content-type
//! application/json` makes it use JSON, whose decoding costs it several times more CPU.

pub mod process;
pub mod report;

pub use super::serverside::{audit, observer, prom};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use snapinformer_apiserver::{Config, KubeletConfig, ServerHandle, TestApiServer, generate};

use crate::harness::report::{Environment, load_average, now_rfc3339, write_json};
use crate::harness::worker::progress_bar;
use observer::Observer;
use process::{KcmLaunch, find_binary, free_port, metrics_client, proc_stats, scrape};
use report::{KcmReport, Sample, Samples};

/// How long the controller manager may take to serve `/metrics` before the run fails.
const KCM_START_LIMIT_S: f64 = 60.0;

/// Namespace of the StatefulSets (one namespace, as in the report).
pub const SET_NAMESPACE: &str = "default";
/// Namespace and name of the DaemonSet.
pub const DAEMON_NAMESPACE: &str = "kube-system";
/// See [`DAEMON_NAMESPACE`].
pub const DAEMON_NAME: &str = "kube-proxy";

/// Command-line arguments of `snapinformer-sim kcm`.
#[derive(clap::Args, Debug, Clone)]
pub struct KcmArgs {
    /// StatefulSets.
    #[arg(long, default_value_t = 200)]
    pub sets: usize,
    /// Replicas per StatefulSet.
    #[arg(long, default_value_t = 1000)]
    pub replicas: usize,
    /// Nodes (one daemon pod each).
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Output directory: report.json, samples, logs, metrics and the audit log.
    #[arg(long, default_value = "out/kcm")]
    pub out: PathBuf,
    /// The kube-controller-manager binary (default: `$SNAPINFORMER_KCM_BIN`, else the one
    /// `scripts/real-cluster build` cached).
    #[arg(long)]
    pub kcm_bin: Option<PathBuf>,
    /// Its `--kube-api-qps` (kcm's default of 20 would take hours to create 200,000 pods).
    #[arg(long, default_value_t = 5000.0)]
    pub kcm_qps: f64,
    /// Its `--kube-api-burst`.
    #[arg(long, default_value_t = 10000)]
    pub kcm_burst: u32,
    /// Its `--kube-api-content-type` (kcm's default, protobuf; `application/json` makes it
    /// send and ask for JSON).
    #[arg(long, default_value = "application/vnd.kubernetes.protobuf")]
    pub kcm_content_type: String,
    /// Its `--concurrent-statefulset-syncs` (kcm's default).
    #[arg(long, default_value_t = 5)]
    pub statefulset_syncs: u32,
    /// Its `--concurrent-daemonset-syncs` (kcm's default).
    #[arg(long, default_value_t = 2)]
    pub daemonset_syncs: u32,
    /// Extra flag for kube-controller-manager (repeatable).
    #[arg(long = "kcm-arg")]
    pub kcm_args: Vec<String>,
    /// StatefulSet pod management policy (`Parallel` creates a set's pods at once).
    #[arg(long, default_value = "Parallel")]
    pub policy: String,
    /// Time from a pod's binding until the simulated kubelet reports it Running.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    pub startup_delay: Duration,
    /// Give up after this long (from the controller manager's start).
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    pub max_time: Duration,
    /// Keep running this long after every pod runs (late duplicates would show).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub settle: Duration,
    /// How often the controller manager's and the server's metrics are sampled.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub sample_every: Duration,
}

/// The parameters a report records.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KcmParams {
    /// StatefulSets.
    pub sets: usize,
    /// Replicas per set.
    pub replicas: usize,
    /// Nodes.
    pub nodes: usize,
    /// StatefulSet pod management policy.
    pub policy: String,
    /// Kubelet startup delay, milliseconds.
    pub startup_delay_ms: u64,
    /// Time limit, seconds.
    pub max_time_s: f64,
    /// Settle time, seconds.
    pub settle_s: f64,
    /// The controller manager's `--kube-api-content-type`.
    pub kcm_content_type: String,
    /// The controller manager's binary.
    pub kcm_binary: String,
    /// Its full command line.
    pub kcm_args: Vec<String>,
}

/// Runs the scenario and writes `OUT/report.json`.
pub fn main(args: &KcmArgs) -> Result<(), String> {
    let binary = find_binary(args.kcm_bin.as_deref())?;
    if args.policy != "Parallel" && args.policy != "OrderedReady" {
        return Err(format!("--policy must be Parallel or OrderedReady, not {:?}", args.policy));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the Tokio runtime: {e}"))?;
    let report = runtime.block_on(run(args, binary))?;
    write_json(&args.out.join("report.json"), &report)?;
    println!("{}", report::render(&report));
    println!("report: {}", args.out.join("report.json").display());
    match &report.kcm_exit {
        Some(status) => Err(format!(
            "kube-controller-manager exited during the run ({status}); its log: {}",
            args.out.join("kcm.log").display()
        )),
        None => Ok(()),
    }
}

/// Starts the test API server with the kubelet, the nodes, the sets and the DaemonSet.
async fn start_server(args: &KcmArgs) -> Result<ServerHandle, String> {
    let pods = args.sets * args.replicas + args.nodes;
    let config = Config {
        kubelet: Some(KubeletConfig { startup_delay: args.startup_delay, schedule: true }),
        // Each pod is created, bound and started, and events come and go: keep enough history
        // that no watcher falls out of it under load.
        history_size: (pods * 4).max(100_000),
        kubeconfig_path: Some(args.out.join("kubeconfig")),
        audit_log_path: Some(args.out.join("audit.log")),
        ..Config::default()
    };
    let server = TestApiServer::start(config)
        .await
        .map_err(|e| format!("starting the test API server: {e}"))?;
    server
        .bulk_create_nodes(generate::nodes(args.nodes))
        .map_err(|e| format!("creating nodes: {e}"))?;
    let sets = (0..args.sets).map(|i| {
        let mut set =
            generate::statefulset(SET_NAMESPACE, &format!("web-{i}"), args.replicas as i32);
        if let Some(spec) = set.spec.as_mut() {
            spec.pod_management_policy = Some(args.policy.clone());
        }
        set
    });
    server.bulk_create(sets).map_err(|e| format!("creating StatefulSets: {e}"))?;
    server
        .create(&generate::daemonset(DAEMON_NAMESPACE, DAEMON_NAME))
        .map_err(|e| format!("creating the DaemonSet: {e}"))?;
    Ok(server)
}

async fn run(args: &KcmArgs, binary: PathBuf) -> Result<KcmReport, String> {
    let started_at = now_rfc3339();
    let environment = Environment::capture(started_at, "n/a (external process)");
    let server = start_server(args).await?;
    let server_client = server.client().map_err(|e| format!("server client: {e}"))?;
    let (observer, observer_task) = Observer::start(server_client.clone());
    let port = free_port()?;
    let launch = KcmLaunch {
        binary: binary.clone(),
        kubeconfig: server.kubeconfig_path().to_owned(),
        port,
        cert_dir: args.out.join("kcm-certs"),
        log: args.out.join("kcm.log"),
        qps: args.kcm_qps,
        burst: args.kcm_burst,
        content_type: args.kcm_content_type.clone(),
        statefulset_syncs: args.statefulset_syncs,
        daemonset_syncs: args.daemonset_syncs,
        extra: args.kcm_args.clone(),
    };
    let params = KcmParams {
        sets: args.sets,
        replicas: args.replicas,
        nodes: args.nodes,
        policy: args.policy.clone(),
        startup_delay_ms: args.startup_delay.as_millis() as u64,
        max_time_s: args.max_time.as_secs_f64(),
        settle_s: args.settle.as_secs_f64(),
        kcm_content_type: args.kcm_content_type.clone(),
        kcm_binary: binary.display().to_string(),
        kcm_args: launch.args(),
    };
    let desired_set_pods = (args.sets * args.replicas) as u64;
    let nodes = args.nodes as u64;
    let self_cpu_before = proc_stats(std::process::id()).map_or(0, |s| s.cpu_ms);

    let mut child = launch.spawn()?;
    let pid = child.id();
    let t0 = Instant::now();
    let kcm = metrics_client(port)?;
    let bar = progress_bar(desired_set_pods + nodes, "pods Running");
    let mut samples = Samples::default();
    let mut all_running_s = None;
    let mut exit_status = None;
    let mut last_kcm_metrics = String::new();
    loop {
        tokio::time::sleep(args.sample_every).await;
        let t = t0.elapsed().as_secs_f64();
        if let Some(status) = child.try_wait() {
            exit_status = Some(status.to_string());
            break;
        }
        let counts = observer.counts();
        let server_rv = server.resource_version();
        let kcm_text = scrape(&kcm).await.unwrap_or_default();
        if kcm_text.is_empty() && last_kcm_metrics.is_empty() && t >= KCM_START_LIMIT_S {
            return Err(format!(
                "kube-controller-manager did not serve /metrics on 127.0.0.1:{port} within \
                 {KCM_START_LIMIT_S} s; its log: {}",
                args.out.join("kcm.log").display()
            ));
        }
        let kcm_samples = prom::parse(&kcm_text);
        let server_samples = prom::parse(&server.metrics_text());
        let proc = proc_stats(pid).unwrap_or_default();
        let sample = Sample::take(t, &counts, server_rv, &kcm_samples, &server_samples, proc);
        bar.set_position(counts.set_pods_running + counts.nodes_with_running_daemon);
        bar.set_message(format!(
            "409s {}, extra daemon pods {}, kcm pod queue {}, kcm RSS {} MiB",
            sample.conflicts_409,
            counts.extra_daemon_pods,
            sample.kcm_informer_queued_pods,
            proc.rss_bytes >> 20
        ));
        if !kcm_text.is_empty() {
            last_kcm_metrics = kcm_text;
        }
        samples.push(sample);
        let done = counts.set_pods_running >= desired_set_pods
            && counts.nodes_with_running_daemon >= nodes
            && counts.set_pods >= desired_set_pods;
        if done && all_running_s.is_none() {
            all_running_s = Some(t);
        }
        if all_running_s.is_some_and(|at| t >= at + args.settle.as_secs_f64())
            || t >= args.max_time.as_secs_f64()
        {
            break;
        }
    }
    bar.finish_and_clear();
    let final_counts = observer.counts();
    let kcm_final = proc_stats(pid).unwrap_or_default();
    if exit_status.is_none() {
        // The last scrape, then stop it.
        if let Ok(text) = scrape(&kcm).await {
            last_kcm_metrics = text;
        }
        drop(child);
    }
    observer_task.abort();
    let server_metrics = server.metrics_text();
    let self_cpu_ms = proc_stats(std::process::id()).map_or(0, |s| s.cpu_ms) - self_cpu_before;
    let audit_path = args.out.join("audit.log");
    server.shutdown().await;
    std::fs::write(args.out.join("kcm-metrics.txt"), &last_kcm_metrics)
        .map_err(|e| format!("writing kcm metrics: {e}"))?;
    std::fs::write(args.out.join("apiserver-metrics.txt"), &server_metrics)
        .map_err(|e| format!("writing server metrics: {e}"))?;
    write_json(&args.out.join("samples.json"), &samples)?;
    let clients = audit::read(&audit_path)?;
    let kcm_log = std::fs::read_to_string(args.out.join("kcm.log")).unwrap_or_default();
    Ok(KcmReport::build(report::Inputs {
        environment,
        params,
        load_at_end: load_average(),
        all_running_s,
        final_counts,
        samples: &samples,
        kcm_metrics: &prom::parse(&last_kcm_metrics),
        server_metrics: &prom::parse(&server_metrics),
        clients,
        kcm_proc: kcm_final,
        sim_cpu_ms: self_cpu_ms,
        kcm_exit: exit_status,
        slow_handler_traces: report::SlowHandlerTraces::from_log(&kcm_log),
    }))
}
