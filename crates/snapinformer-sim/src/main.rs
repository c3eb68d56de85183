//! `snapinformer-sim`: runs the scenarios and writes their reports.

use std::{
    io::{BufRead, BufReader, IsTerminal},
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use snapinformer_sim::{
    backends::BackendKind,
    plot,
    pods::PodProfile,
    report::{self, Environment, StoreReport},
    seed,
    store_scenario::{self, BackendReport, HeapMeter, StoreParams},
};

/// Every backend runs on mimalloc, counted by `cap`. Copy-on-write allocates and frees many small
/// blocks; on glibc's malloc (`--features system-alloc`) the snapshot store applied 19% fewer
/// updates per second and the locked store 10% fewer (BENCHMARKS.md), so the comparison runs on
/// the allocator services that care use.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static HEAP: cap::Cap<mimalloc::MiMalloc> = cap::Cap::new(mimalloc::MiMalloc, usize::MAX);
#[cfg(not(feature = "system-alloc"))]
const ALLOCATOR: &str = "mimalloc";

/// With `--features system-alloc`: the platform allocator (glibc malloc on Linux).
#[cfg(feature = "system-alloc")]
#[global_allocator]
static HEAP: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);
#[cfg(feature = "system-alloc")]
const ALLOCATOR: &str = "system";

struct GlobalHeap;

impl HeapMeter for GlobalHeap {
    fn current(&self) -> u64 {
        HEAP.allocated() as u64
    }
    fn peak(&self) -> u64 {
        HEAP.max_allocated() as u64
    }
}

/// Reproduces the informer-cache contention of the field report and measures the stores side by
/// side.
#[derive(Parser, Debug)]
#[command(name = "snapinformer-sim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// The store alone: one writer (saturated, then open loop) and paced readers, per backend.
    Store(StoreArgs),
    /// The whole informer fed open loop in process, with paced readers and `/metrics` served.
    Informer(InformerArgs),
    /// The field report reproduced: StatefulSet and DaemonSet controllers on 200,000 pods, per
    /// backend, over HTTP and in process.
    Seed(SeedArgs),
    /// Pod churn with watch faults for a long time, then checks cache, handlers and heap.
    Soak(snapinformer_sim::soak::SoakArgs),
}

#[derive(Args, Debug, Clone)]
struct SeedArgs {
    /// StatefulSets.
    #[arg(long, default_value_t = 200)]
    sets: usize,
    /// Replicas per StatefulSet.
    #[arg(long, default_value_t = 1000)]
    replicas: usize,
    /// Nodes (one daemon pod each).
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Modes to run (default: both).
    #[arg(long, value_enum, value_delimiter = ',')]
    mode: Vec<seed::Mode>,
    /// Rows to run: a backend, with `+ryw` for read-your-writes on (default: snapshot+ryw,
    /// snapshot, locked, locked-batch, kube-rs).
    #[arg(long, value_delimiter = ',', value_parser = seed::Row::parse)]
    backends: Vec<seed::Row>,
    /// StatefulSet controller workers.
    #[arg(long, default_value_t = 8)]
    set_workers: usize,
    /// DaemonSet controller workers.
    #[arg(long, default_value_t = 2)]
    daemon_workers: usize,
    /// inproc: events delivered into the cache's queue per second, open loop (writes first,
    /// kubelet status updates in the free slots).
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// Time from a pod's creation until the kubelet starts it.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    startup_delay: Duration,
    /// Time limit of one row (a row that has not converged by then reports "never").
    #[arg(long, default_value = "40s", value_parser = humantime::parse_duration)]
    max_time: Duration,
    /// How the StatefulSet controller finds a set's pods.
    #[arg(long, value_enum, default_value_t = seed::controllers::SetListMode::Namespace)]
    set_list: seed::controllers::SetListMode,
    /// StatefulSet pod management policy.
    #[arg(long, value_enum, default_value_t = seed::controllers::PodManagement::Parallel)]
    policy: seed::controllers::PodManagement,
    /// Size of the StatefulSet pods (default: realistic in process; small over HTTP, where
    /// encoding and decoding 4 KB pods on both ends of the loopback would take the whole
    /// run's time on two cores).
    #[arg(long, value_enum)]
    pod_profile: Option<PodProfile>,
    /// A scaled version for CI (under a minute): 10 sets x 200 replicas, 50 nodes, 8 s rows.
    #[arg(long)]
    quick: bool,
    /// Directory for report.json and the plots.
    #[arg(long, default_value = "out/seed")]
    out: PathBuf,
    /// Only redraw the plots of an existing report.json into --out (runs nothing).
    #[arg(long, value_name = "REPORT_JSON")]
    plot_from: Option<PathBuf>,
    /// Internal: run one row in this process.
    #[arg(long, hide = true, requires = "worker_out", value_parser = seed::Row::parse)]
    worker: Option<seed::Row>,
    /// Internal: the mode of the worker's row.
    #[arg(long, hide = true, value_enum)]
    worker_mode: Option<seed::Mode>,
    /// Internal: where the worker writes its JSON.
    #[arg(long, hide = true)]
    worker_out: Option<PathBuf>,
    /// Internal: the test API server's URL (http mode).
    #[arg(long, hide = true)]
    server_url: Option<String>,
}

impl SeedArgs {
    fn params(&self) -> seed::SeedParams {
        let mut p = seed::SeedParams {
            sets: self.sets,
            replicas: self.replicas,
            nodes: self.nodes,
            set_workers: self.set_workers,
            daemon_workers: self.daemon_workers,
            rate: self.rate,
            startup_delay_ms: self.startup_delay.as_millis() as u64,
            max_time_s: self.max_time.as_secs_f64(),
            settle_s: 2.0,
            set_list: self.set_list,
            policy: self.policy,
            pod_profile: self.pod_profile,
            http_pod_profile: self.pod_profile.unwrap_or(PodProfile::Small),
        };
        if self.quick {
            p.sets = 10;
            p.replicas = 200;
            p.nodes = 50;
            p.rate = 5000;
            p.max_time_s = 8.0;
            p.settle_s = 1.0;
        }
        p
    }

    fn rows(&self) -> Vec<seed::Row> {
        if !self.backends.is_empty() {
            return self.backends.clone();
        }
        let row = |backend, read_your_writes| seed::Row { backend, read_your_writes };
        vec![
            row(BackendKind::Snapshot, true),
            row(BackendKind::Snapshot, false),
            row(BackendKind::Locked, false),
            row(BackendKind::LockedBatch, false),
            row(BackendKind::KubeRs, false),
        ]
    }

    fn modes(&self) -> Vec<seed::Mode> {
        if self.mode.is_empty() {
            vec![seed::Mode::Inproc, seed::Mode::Http]
        } else {
            self.mode.clone()
        }
    }
}

/// The load shared by the scenarios: population, readers and the open loop.
#[derive(Args, Debug, Clone)]
struct LoadArgs {
    /// Pods in the store (200 owners of 1000 pods at the default).
    #[arg(long, default_value_t = 200_000)]
    objects: usize,
    /// Nodes the pods are spread over.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Reader threads (paced to use at most one core together).
    #[arg(long, default_value_t = 10)]
    readers: usize,
    /// Length of the open-loop phase.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Open-loop arrival rate in updates per second (for `store`, 0 runs saturation only).
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// How much of each pod to fill in (`small` for a million pods on 24 GiB).
    #[arg(long, value_enum, default_value_t = PodProfile::Realistic)]
    pod_profile: PodProfile,
}

#[derive(Args, Debug, Clone)]
struct InformerArgs {
    #[command(flatten)]
    load: LoadArgs,
    /// Where to serve `/metrics` (loopback by default; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    metrics_addr: std::net::SocketAddr,
    /// A small version that runs in seconds: 5,000 pods, 4 readers, 2 s at 5,000/s.
    #[arg(long)]
    quick: bool,
    /// Directory for report.json and metrics.txt.
    #[arg(long, default_value = "out/informer")]
    out: PathBuf,
}

#[derive(Args, Debug, Clone)]
struct StoreArgs {
    #[command(flatten)]
    load: LoadArgs,
    /// Updates applied in each saturation phase (default: as many as objects, at least 20,000).
    #[arg(long)]
    updates: Option<usize>,
    /// Backends to run (default: all).
    #[arg(long, value_delimiter = ',')]
    backends: Vec<BackendKind>,
    /// Directory for report.json and the plots.
    #[arg(long, default_value = "out/store")]
    out: PathBuf,
    /// A small version that runs in seconds (for CI): 5,000 pods, 4 readers, 2 s at 5,000/s.
    #[arg(long)]
    quick: bool,
    /// Internal: run one backend in this process and write its JSON here.
    #[arg(long, hide = true, requires = "worker_out")]
    worker: Option<BackendKind>,
    /// Internal: where the worker writes its JSON.
    #[arg(long, hide = true)]
    worker_out: Option<PathBuf>,
}

impl StoreArgs {
    fn params(&self) -> StoreParams {
        if self.quick {
            return StoreParams {
                objects: 5000,
                nodes: 50,
                readers: 4,
                duration_s: 2.0,
                rate: 5000,
                updates: 20_000,
                open_loop: true,
                pod_profile: self.load.pod_profile,
            };
        }
        StoreParams {
            objects: self.load.objects,
            nodes: self.load.nodes,
            readers: self.load.readers,
            duration_s: self.load.duration.as_secs_f64(),
            rate: self.load.rate,
            updates: self.updates.unwrap_or(self.load.objects.max(20_000)),
            open_loop: self.load.rate > 0,
            pod_profile: self.load.pod_profile,
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Store(args) => run_store(args),
        Cmd::Informer(args) => run_informer(args),
        Cmd::Seed(args) => run_seed(args),
        Cmd::Soak(args) => snapinformer_sim::soak::main(&args, &GlobalHeap),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run_store(args: StoreArgs) -> Result<(), String> {
    let params = args.params();
    if let Some(kind) = args.worker {
        let out = args.worker_out.as_ref().expect("clap requires --worker-out with --worker");
        let report = store_scenario::run_backend(kind, &params, &GlobalHeap, &|msg| {
            eprintln!("phase: {msg}")
        });
        let json = serde_json::to_vec(&report).map_err(|e| e.to_string())?;
        return std::fs::write(out, json).map_err(|e| format!("writing {}: {e}", out.display()));
    }
    if params.objects == 0 {
        return Err("--objects must be at least 1".into());
    }
    let kinds =
        if args.backends.is_empty() { BackendKind::ALL.to_vec() } else { args.backends.clone() };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let bar = progress_bar(kinds.len() as u64);
    let mut backends = Vec::new();
    for kind in &kinds {
        bar.set_message(format!("{}: starting", kind.name()));
        backends.push(run_worker(*kind, &args, &bar)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut targets = Vec::new();
    for ours in [BackendKind::Snapshot, BackendKind::SnapshotBg, BackendKind::SnapshotHamt] {
        if kinds.contains(&ours) {
            targets.extend(report::targets(&backends, ours.name(), params.open_loop));
        }
    }
    let report = StoreReport {
        scenario: "store".into(),
        params: params.clone(),
        environment: environment(started_at),
        backends,
        targets,
    };
    println!("{}", report::table(&report));
    let json_path = args.out.join("report.json");
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json)
        .map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    println!("wrote {}", json_path.display());
    let subtitle =
        format!("{} pods, {} readers, {}/s", params.objects, params.readers, params.rate);
    if params.open_loop {
        match plot::write_plots(&args.out, &report.backends, &subtitle) {
            Ok(files) => files.iter().for_each(|f| println!("wrote {}", f.display())),
            Err(e) => eprintln!("warning: plots not written: {e}"),
        }
    }
    Ok(())
}

fn run_informer(args: InformerArgs) -> Result<(), String> {
    use snapinformer_sim::informer_scenario::{self, InformerParams};
    let params = if args.quick {
        InformerParams {
            objects: 5000,
            nodes: 50,
            readers: 4,
            duration_s: 2.0,
            rate: 5000,
            pod_profile: args.load.pod_profile,
            metrics_addr: args.metrics_addr,
        }
    } else {
        InformerParams {
            objects: args.load.objects,
            nodes: args.load.nodes,
            readers: args.load.readers,
            duration_s: args.load.duration.as_secs_f64(),
            rate: args.load.rate.max(1),
            pod_profile: args.load.pod_profile,
            metrics_addr: args.metrics_addr,
        }
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let report = informer_scenario::run(&params, &|msg| eprintln!("[informer] {msg}"))?;
    println!(
        "informer scenario: {} pods, {} readers, {}/s for {:.0}s\n  initial sync {:.2} s\n  staleness p50/p99/max {}/{}/{} us over {} updates, {} publications\n  queue depth max {}\n  handler notifications {}\n  readers: index p50/p99 {}/{} us, list p50/p99 {}/{} us\n  /metrics served at {} ({} samples scraped)",
        params.objects,
        params.readers,
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

fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} backends  {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Runs one backend in a child process, relaying its phase messages to the progress bar (or to
/// stderr as plain lines when stderr is not a terminal).
fn run_worker(
    kind: BackendKind,
    args: &StoreArgs,
    bar: &ProgressBar,
) -> Result<BackendReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding own executable: {e}"))?;
    let out = args.out.join(format!(".worker-{}.json", kind.name()));
    let mut cmd = Command::new(exe);
    cmd.arg("store")
        .args(["--objects", &args.load.objects.to_string()])
        .args(["--nodes", &args.load.nodes.to_string()])
        .args(["--readers", &args.load.readers.to_string()])
        .args(["--duration", &format!("{}ms", args.load.duration.as_millis())])
        .args(["--rate", &args.load.rate.to_string()])
        .args([
            "--pod-profile",
            args.load.pod_profile.to_possible_value().expect("no skipped variants").get_name(),
        ])
        .args(["--worker", kind.name()])
        .arg("--worker-out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(u) = args.updates {
        cmd.args(["--updates", &u.to_string()]);
    }
    if args.quick {
        cmd.arg("--quick");
    }
    run_child(cmd, &out, kind.name(), bar, |msg| format!("{}: {msg}", kind.name()))
}

/// Runs a worker process built by `cmd`, which writes its JSON to `out`: relays its
/// `phase: ` lines to the progress bar (and to stderr as plain lines when stderr is not a
/// terminal), keeps its other output for the error message, and parses its JSON.
fn run_child<T: serde::de::DeserializeOwned>(
    mut cmd: Command,
    out: &std::path::Path,
    label: &str,
    bar: &ProgressBar,
    message: impl Fn(&str) -> String,
) -> Result<T, String> {
    let mut child = cmd.spawn().map_err(|e| format!("starting worker for {label}: {e}"))?;
    let plain = !std::io::stderr().is_terminal();
    let mut tail = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(msg) = line.strip_prefix("phase: ") {
                if plain {
                    eprintln!("[{label}] {msg}");
                }
                bar.set_message(message(msg));
            } else {
                tail.push(line);
            }
        }
    }
    let status = child.wait().map_err(|e| format!("waiting for worker {label}: {e}"))?;
    if !status.success() {
        return Err(format!("worker for {label} failed ({status}):\n{}", tail.join("\n")));
    }
    let bytes = std::fs::read(out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let _ = std::fs::remove_file(out);
    serde_json::from_slice(&bytes).map_err(|e| format!("parsing worker output for {label}: {e}"))
}

fn run_seed(args: SeedArgs) -> Result<(), String> {
    if let Some(path) = &args.plot_from {
        let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let report: seed::SeedReport = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a seed report: {e}", path.display()))?;
        write_seed_plots(&report, &args.out);
        return Ok(());
    }
    let params = args.params();
    if let Some(row) = args.worker {
        let mode = args.worker_mode.ok_or("--worker needs --worker-mode")?;
        let out = args.worker_out.as_ref().expect("clap requires --worker-out with --worker");
        let server = args.server_url.clone().map(|url| seed::ServerInfo { url });
        let report = seed::run_row(
            row,
            mode,
            &params,
            server.as_ref(),
            &GlobalHeap,
            &|msg| eprintln!("phase: {msg}"),
            true,
        )?;
        let json = serde_json::to_vec(&report).map_err(|e| e.to_string())?;
        std::fs::write(out, json).map_err(|e| format!("writing {}: {e}", out.display()))?;
        // The row's cache is left for the OS to reclaim.
        std::process::exit(0);
    }
    if params.sets == 0 || params.replicas == 0 || params.nodes == 0 {
        return Err("--sets, --replicas and --nodes must be at least 1".into());
    }
    let rows = args.rows();
    let modes = args.modes();
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting runtime: {e}"))?;
    let bar = progress_bar((rows.len() * modes.len()) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} rows  {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut reports = Vec::new();
    for mode in &modes {
        let mut backends = Vec::new();
        for row in &rows {
            bar.set_message(format!("{} {}: starting", mode.name(), row.name()));
            let server = match mode {
                seed::Mode::Http => {
                    bar.set_message(format!(
                        "{} {}: starting the test API server",
                        mode.name(),
                        row.name()
                    ));
                    Some(runtime.block_on(seed::start_server(&params))?)
                }
                seed::Mode::Inproc => None,
            };
            let result =
                run_seed_worker(*row, *mode, &args, server.as_ref().map(|s| s.url()), &bar);
            if let Some(server) = server {
                let cluster_pods = server.count(snapinformer_apiserver::ResourceKind::Pod) as u64;
                runtime.block_on(server.shutdown());
                let mut report = result?;
                report.cluster_pods = cluster_pods;
                backends.push(report);
            } else {
                backends.push(result?);
            }
            bar.inc(1);
        }
        let targets = seed::targets(*mode, &backends);
        reports.push(seed::ModeReport { mode: *mode, backends, targets });
    }
    bar.finish_and_clear();
    let report = seed::SeedReport {
        scenario: "seed".into(),
        params: params.clone(),
        environment: environment(started_at),
        modes: reports,
    };
    println!(
        "seed: {} StatefulSets x {} replicas in one namespace + a DaemonSet on {} nodes",
        params.sets, params.replicas, params.nodes
    );
    for m in &report.modes {
        println!("\nmode {}:\n{}", m.mode.name(), seed::table(m));
    }
    let json_path = args.out.join("report.json");
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json)
        .map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    println!("wrote {}", json_path.display());
    write_seed_plots(&report, &args.out);
    let missed: Vec<String> = report
        .modes
        .iter()
        .flat_map(|m| {
            m.targets
                .iter()
                .filter(|t| !t.pass)
                .map(move |t| format!("{}: {}", m.mode.name(), t.name))
        })
        .collect();
    if !missed.is_empty() {
        println!("targets missed: {}", missed.join("; "));
    }
    Ok(())
}

/// Where and how this run happens.
fn environment(started_at: String) -> Environment {
    Environment {
        started_at,
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        allocator: ALLOCATOR.to_string(),
    }
}

/// Draws the seed plots of every mode of `report` into `out/<mode>/`.
fn write_seed_plots(report: &seed::SeedReport, out: &std::path::Path) {
    let params = &report.params;
    for m in &report.modes {
        let dir = out.join(m.mode.name());
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("warning: plots not written: creating {}: {e}", dir.display());
            continue;
        }
        let series: Vec<BackendReport> = m
            .backends
            .iter()
            .map(|b| BackendReport {
                name: b.name.clone(),
                staleness_us: b.staleness_us,
                queue_depth_max: b.queue_depth_max,
                depth_series: b.depth_series.clone(),
                staleness_cdf: b.staleness_cdf.clone(),
                ..BackendReport::default()
            })
            .collect();
        let subtitle = format!(
            "seed {}, {} pods, {} nodes",
            m.mode.name(),
            params.sets * params.replicas,
            params.nodes
        );
        match plot::write_plots(&dir, &series, &subtitle) {
            Ok(files) => files.iter().for_each(|f| println!("wrote {}", f.display())),
            Err(e) => eprintln!("warning: plots not written: {e}"),
        }
    }
}

/// Runs one seed row in a child process, relaying its progress.
fn run_seed_worker(
    row: seed::Row,
    mode: seed::Mode,
    args: &SeedArgs,
    server_url: Option<String>,
    bar: &ProgressBar,
) -> Result<seed::SeedBackendReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding own executable: {e}"))?;
    let out = args.out.join(format!(".worker-{}-{}.json", mode.name(), row.name()));
    let mut cmd = Command::new(exe);
    cmd.arg("seed")
        .args(["--sets", &args.sets.to_string()])
        .args(["--replicas", &args.replicas.to_string()])
        .args(["--nodes", &args.nodes.to_string()])
        .args(["--set-workers", &args.set_workers.to_string()])
        .args(["--daemon-workers", &args.daemon_workers.to_string()])
        .args(["--rate", &args.rate.to_string()])
        .args(["--startup-delay", &format!("{}ms", args.startup_delay.as_millis())])
        .args(["--max-time", &format!("{}ms", args.max_time.as_millis())])
        .args([
            "--set-list",
            args.set_list.to_possible_value().expect("no skipped variants").get_name(),
        ])
        .args([
            "--policy",
            args.policy.to_possible_value().expect("no skipped variants").get_name(),
        ])
        .args(["--worker", &row.name()])
        .args(["--worker-mode", mode.name()])
        .arg("--worker-out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(url) = server_url {
        cmd.args(["--server-url", &url]);
    }
    if let Some(profile) = args.pod_profile {
        cmd.args([
            "--pod-profile",
            profile.to_possible_value().expect("no skipped variants").get_name(),
        ]);
    }
    if args.quick {
        cmd.arg("--quick");
    }
    let label = format!("{} {}", mode.name(), row.name());
    run_child(cmd, &out, &label, bar, str::to_owned)
}
