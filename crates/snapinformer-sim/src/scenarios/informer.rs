//! The `informer` scenario: the whole informer (queue, batched apply and publish, a handler)
//! fed open loop in process, with paced readers, and its metrics served on `/metrics`.
//!
//! Updates are queued at `rate` per second on a fixed schedule, as watch events arrive. The
//! processing loop pops batches of up to 1000 deltas, applies each to the store in one
//! publication and notifies a counting handler. Staleness is measured by the informer itself:
//! from a delta's arrival in the queue to the publication that made it visible.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use prometheus_client::registry::Registry;
use snapinformer_core::{Informer, InformerBuilder, Notification, QueueKind};
use snapinformer_store::StoreBuilder;

use crate::{
    harness::{
        placement::{Placement, pin},
        stats::{Latency, Summary},
    },
    pods::{self, PodProfile, Shape},
    rows::snapshot::SnapshotReader,
    scenarios::{LoadArgs, store::readers::Readers},
};

/// Parameters of the `informer` scenario.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InformerParams {
    /// Pods listed initially.
    pub objects: usize,
    /// Nodes.
    pub nodes: usize,
    /// Reader threads.
    pub readers: usize,
    /// Open-loop length in seconds.
    pub duration_s: f64,
    /// Arrival rate in updates per second.
    pub rate: u64,
    /// How much of each pod is filled in.
    pub pod_profile: PodProfile,
    /// Where `/metrics` is served (loopback; port 0 picks one).
    pub metrics_addr: SocketAddr,
    /// Where the producer and the readers run.
    #[serde(default)]
    pub placement: Placement,
}

/// What the `informer` scenario measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InformerReport {
    /// Always `"informer"`.
    pub scenario: String,
    /// The parameters.
    pub params: InformerParams,
    /// Time to list, apply and publish the initial pods until the informer synced.
    pub initial_sync_s: f64,
    /// Staleness of the open-loop updates: queue arrival to publication, microseconds.
    pub staleness_us: Summary,
    /// Largest queue depth seen by the producer.
    pub queue_depth_max: u64,
    /// Publications during the open loop.
    pub publications: u64,
    /// Notifications the counting handler received (initial adds and updates).
    pub handler_notifications: u64,
    /// Owner-UID lookups by the readers, microseconds.
    pub index_us: Summary,
    /// Full lists by the readers, microseconds.
    pub list_us: Summary,
    /// Where `/metrics` was served.
    pub metrics_url: String,
    /// The `snapinformer_` sample lines of one scrape of `/metrics` at the end.
    pub metrics_sample: Vec<String>,
}

fn scrape(addr: SocketAddr) -> Result<String, String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    stream
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .map_err(|e| format!("writing to {addr}: {e}"))?;
    let mut body = String::new();
    stream.read_to_string(&mut body).map_err(|e| format!("reading /metrics: {e}"))?;
    if !body.starts_with("HTTP/1.1 200") {
        return Err(format!("GET /metrics answered: {}", body.lines().next().unwrap_or("nothing")));
    }
    Ok(body)
}

/// Runs the scenario; `progress` receives phase messages.
pub fn run(p: &InformerParams, progress: &dyn Fn(&str)) -> Result<InformerReport, String> {
    if !p.metrics_addr.ip().is_loopback() {
        eprintln!(
            "warning: serving /metrics on {} (not loopback): anyone who can reach it can read it",
            p.metrics_addr
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the tokio runtime: {e}"))?;
    let _guard = rt.enter();
    let shape = Shape::for_objects(p.objects, p.nodes).with_profile(p.pod_profile);

    let staleness = Arc::new(Mutex::new(Latency::default()));
    let recording = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publications = Arc::new(AtomicU64::new(0));
    let informer: Informer<Pod> = {
        let (staleness, recording, publications) =
            (staleness.clone(), recording.clone(), publications.clone());
        InformerBuilder::with_store(
            StoreBuilder::new(pods::access::<Pod>()).indexers(pods::pod_indexers()),
        )
        .name("pods")
        .queue(QueueKind::Real)
        .max_batch(1000)
        .on_publish(move |published| {
            if recording.load(Ordering::Relaxed) {
                publications.fetch_add(1, Ordering::Relaxed);
                let mut lat = staleness.lock().unwrap_or_else(|e| e.into_inner());
                for d in published.deltas {
                    lat.record(published.published_at.saturating_duration_since(d.enqueued_at));
                }
            }
        })
        .build()
        .map_err(|e| format!("building the informer: {e}"))?
    };
    let notified = Arc::new(AtomicU64::new(0));
    {
        let notified = notified.clone();
        informer
            .add_event_handler(move |_: &Notification<Pod>| {
                notified.fetch_add(1, Ordering::Relaxed);
            })
            .map_err(|e| format!("adding the handler: {e}"))?;
    }
    let mut registry = Registry::default();
    informer.register_metrics(&mut registry);
    let registry = Arc::new(registry);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(p.metrics_addr))
        .map_err(|e| format!("binding {}: {e}", p.metrics_addr))?;
    let metrics_addr = listener.local_addr().map_err(|e| e.to_string())?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move {
                match snapinformer_core::metrics::encode_text(&registry) {
                    Ok(text) => (
                        axum::http::StatusCode::OK,
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    ),
                    Err(e) => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        [(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                        format!("encoding metrics: {e}"),
                    ),
                }
            }
        }),
    );
    rt.spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("metrics server stopped: {e}");
        }
    });
    progress(&format!("metrics on http://{metrics_addr}/metrics"));
    informer.start().map_err(|e| format!("starting the informer: {e}"))?;

    progress(&format!("initial list of {} pods", shape.total()));
    let initial = pods::initial_pods(&shape);
    let t = Instant::now();
    informer.queue().replace(initial, &shape.total().to_string()).map_err(|e| e.to_string())?;
    if !rt.block_on(informer.wait_for_sync(Duration::from_secs(600))) {
        return Err("the informer did not sync its initial list within 600 s".into());
    }
    let initial_sync_s = t.elapsed().as_secs_f64();

    let count = (p.rate as f64 * p.duration_s) as usize;
    progress(&format!("generating {count} updates"));
    let first_rv = shape.total() as u64 + 1;
    let pool = pods::updates(&shape, count, first_rv, 17);
    let cores = p.placement.cores();
    pin(cores.writer);
    let readers = Readers::start(
        Arc::new(SnapshotReader(informer.reader())),
        p.readers,
        &shape,
        cores.readers,
        // As `store`'s readers: past the burst of their first reads before the open loop.
        super::store::readers::DEFAULT_WARMUP.min(Duration::from_secs_f64(p.duration_s / 4.0)),
        super::store::readers::Pacing::Duty,
    );
    progress(&format!(
        "open loop: {} updates/s for {:.0}s with {} readers",
        p.rate, p.duration_s, p.readers
    ));
    recording.store(true, Ordering::Relaxed);
    let ns_per = 1e9 / p.rate as f64;
    let start = Instant::now();
    let mut depth_max = 0u64;
    for (i, pod) in pool.into_iter().enumerate() {
        let at = start + Duration::from_nanos((i as f64 * ns_per) as u64);
        let now = Instant::now();
        if at > now {
            thread::sleep(at - now);
        }
        informer.queue().update(pod).map_err(|e| e.to_string())?;
        depth_max = depth_max.max(informer.queue().len() as u64);
    }
    let last_rv = first_rv + count as u64 - 1;
    rt.block_on(informer.wait_for(&last_rv.to_string(), Duration::from_secs(120)))
        .map_err(|e| format!("waiting for the last update to be published: {e}"))?;
    let lat = readers.stop();
    recording.store(false, Ordering::Relaxed);

    let scraped = scrape(metrics_addr)?;
    let metrics_sample: Vec<String> =
        scraped.lines().filter(|l| l.starts_with("snapinformer_")).map(str::to_owned).collect();
    if metrics_sample.is_empty() {
        return Err("/metrics answered without any snapinformer_ sample".into());
    }
    rt.block_on(informer.shutdown());
    let staleness_us = staleness.lock().unwrap_or_else(|e| e.into_inner()).summary();
    Ok(InformerReport {
        scenario: "informer".into(),
        params: p.clone(),
        initial_sync_s,
        staleness_us,
        queue_depth_max: depth_max,
        publications: publications.load(Ordering::Relaxed),
        handler_notifications: notified.load(Ordering::Relaxed),
        index_us: lat.index.summary(),
        list_us: lat.list.summary(),
        metrics_url: format!("http://{metrics_addr}/metrics"),
        metrics_sample,
    })
}

/// Arguments of `snapinformer-sim informer`.
#[derive(clap::Args, Debug, Clone)]
pub struct InformerArgs {
    /// Population, readers, open loop and placement.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Where to serve `/metrics` (loopback by default; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub metrics_addr: std::net::SocketAddr,
    /// A small version that runs in seconds: 5,000 pods, 4 readers, 2 s at 5,000/s.
    #[arg(long)]
    pub quick: bool,
    /// Directory for report.json and metrics.txt.
    #[arg(long, default_value = "out/informer")]
    pub out: std::path::PathBuf,
}

impl InformerArgs {
    /// The run's parameters (`--quick` replaces the load).
    pub fn params(&self) -> InformerParams {
        let l = &self.load;
        let mut p = InformerParams {
            objects: l.objects,
            nodes: l.nodes,
            readers: l.readers,
            duration_s: l.duration.as_secs_f64(),
            rate: l.rate.max(1),
            pod_profile: l.pod_profile,
            metrics_addr: self.metrics_addr,
            placement: l.placement,
        };
        if self.quick {
            p.objects = 5000;
            p.nodes = 50;
            p.readers = 4;
            p.duration_s = 2.0;
            p.rate = 5000;
        }
        p
    }
}

/// Runs `informer`: prints the figures, writes `report.json` and `metrics.txt`.
pub fn main(args: &InformerArgs) -> Result<(), String> {
    let params = args.params();
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let report = run(&params, &|msg| eprintln!("[informer] {msg}"))?;
    println!(
        "informer scenario: {} pods, {} readers {}, {}/s for {:.0}s\n  initial sync {:.2} s\n  staleness p50/p99/max {}/{}/{} us over {} updates, {} publications\n  queue depth max {}\n  handler notifications {}\n  readers: index p50/p99 {}/{} us, list p50/p99 {}/{} us\n  /metrics served at {} ({} samples scraped)",
        params.objects,
        params.readers,
        params.placement.name(),
        params.rate,
        params.duration_s,
        report.initial_sync_s,
        report.staleness_us.p50,
        report.staleness_us.p99,
        report.staleness_us.max,
        report.staleness_us.count,
        report.publications,
        report.queue_depth_max,
        report.handler_notifications,
        report.index_us.p50,
        report.index_us.p99,
        report.list_us.p50,
        report.list_us.p99,
        report.metrics_url,
        report.metrics_sample.len()
    );
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    let path = args.out.join("report.json");
    std::fs::write(&path, json).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let metrics = args.out.join("metrics.txt");
    std::fs::write(&metrics, report.metrics_sample.join("\n") + "\n")
        .map_err(|e| format!("writing {}: {e}", metrics.display()))?;
    println!("wrote {} and {}", path.display(), metrics.display());
    Ok(())
}
