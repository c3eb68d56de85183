//! `snapinformer-apiserver`: runs the test API server, prints its address and writes a
//! kubeconfig for it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use snapinformer_apiserver::{
    Config, DEFAULT_MAX_REQUEST_BODY_BYTES, FaultConfig, KubeletConfig, TestApiServer, generate,
};

/// A Kubernetes wire-compatible test API server (pods, nodes, namespaces, statefulsets,
/// daemonsets, controllerrevisions, persistentvolumeclaims, events, leases) for kubectl,
/// kube-rs and client-go (kube-controller-manager). `/metrics` has `apiserver_request_total`. Faults can be changed at run time with
/// `PUT /debug/snapinformer/faults` (JSON body) and history compacted with
/// `POST /debug/snapinformer/compact`.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address to listen on (port 0 picks a free port). Loopback unless told otherwise: the
    /// server has no authentication, so any other address is warned about on stderr.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = "./snapinformer.kubeconfig")]
    kubeconfig: PathBuf,
    /// Write an audit log of every resource request to this file (`audit.k8s.io/v1` events,
    /// level Metadata, one JSON object per line, as kube-apiserver's `--audit-log-path`).
    #[arg(long)]
    audit_log_path: Option<PathBuf>,
    /// Watch events kept in history (older watches get 410).
    #[arg(long, default_value_t = 100_000)]
    history_size: usize,
    /// Seconds between bookmarks on idle watches.
    #[arg(long, default_value_t = 60)]
    bookmark_interval_secs: u64,
    /// Run the simulated kubelet, moving bound pods to Running after this many milliseconds.
    #[arg(long)]
    kubelet_delay_ms: Option<u64>,
    /// With the kubelet: also bind pending pods without a node to nodes (a simple scheduler).
    #[arg(long)]
    schedule: bool,
    /// Create this many Ready nodes at start.
    #[arg(long, default_value_t = 0)]
    nodes: usize,
    /// Create this many StatefulSets (with their pods, bound round-robin to the nodes) at start.
    #[arg(long, default_value_t = 0)]
    statefulsets: usize,
    /// Replicas per created StatefulSet.
    #[arg(long, default_value_t = 1000)]
    replicas: i32,
    /// End watch streams after this many events.
    #[arg(long)]
    watch_cut_after: Option<u64>,
    /// Probability of ending a watch stream after each event.
    #[arg(long, default_value_t = 0.0)]
    watch_cut_probability: f64,
    /// Fraction of resource requests answered 429.
    #[arg(long, default_value_t = 0.0)]
    throttle_fraction: f64,
    /// Retry-After seconds of injected 429s.
    #[arg(long, default_value_t = 1)]
    retry_after: u64,
    /// Fraction of resource requests answered 500.
    #[arg(long, default_value_t = 0.0)]
    error_fraction: f64,
    /// Latency added to each resource request, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Largest request body accepted, in bytes (larger ones get 413).
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_BODY_BYTES)]
    max_request_body_bytes: usize,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if !args.listen.ip().is_loopback() {
        // Also logged through tracing by the library, but a log filter may hide that.
        eprintln!(
            "WARNING: --listen {} is not a loopback address. This test API server has no \
             authentication or authorization: anyone who can reach it can read, change and \
             delete every object. Bind 127.0.0.1 unless you mean it.",
            args.listen
        );
    }
    let config = Config {
        listen: args.listen,
        history_size: args.history_size,
        bookmark_interval: Duration::from_secs(args.bookmark_interval_secs),
        kubelet: args.kubelet_delay_ms.map(|ms| KubeletConfig {
            startup_delay: Duration::from_millis(ms),
            schedule: args.schedule,
        }),
        kubeconfig_path: Some(args.kubeconfig.clone()),
        max_request_body_bytes: args.max_request_body_bytes,
        audit_log_path: args.audit_log_path.clone(),
        faults: FaultConfig {
            watch_cut_after_events: args.watch_cut_after,
            watch_cut_probability: args.watch_cut_probability,
            throttle_fraction: args.throttle_fraction,
            retry_after_seconds: args.retry_after,
            error_fraction: args.error_fraction,
            latency_ms: args.latency_ms,
            ..FaultConfig::default()
        },
        ..Config::default()
    };
    let server = TestApiServer::start(config).await?;
    if args.nodes > 0 {
        server.bulk_create_nodes(generate::nodes(args.nodes))?;
    }
    let node_names: Vec<String> = (0..args.nodes).map(|i| format!("node-{i:05}")).collect();
    for i in 0..args.statefulsets {
        let set = server.create(&generate::statefulset(
            "default",
            &format!("sts-{i:04}"),
            args.replicas,
        ))?;
        server.bulk_create_pods(generate::statefulset_pods(&set, &node_names))?;
    }
    println!("listening on {}", server.url());
    println!("kubeconfig written to {}", args.kubeconfig.display());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
