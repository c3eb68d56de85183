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
        environment: Environment {
            started_at,
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            allocator: ALLOCATOR.to_string(),
        },
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
    let mut child = cmd.spawn().map_err(|e| format!("starting worker for {}: {e}", kind.name()))?;
    let plain = !std::io::stderr().is_terminal();
    let mut tail = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(msg) = line.strip_prefix("phase: ") {
                if plain {
                    eprintln!("[{}] {msg}", kind.name());
                }
                bar.set_message(format!("{}: {msg}", kind.name()));
            } else {
                tail.push(line);
            }
        }
    }
    let status = child.wait().map_err(|e| format!("waiting for worker {}: {e}", kind.name()))?;
    if !status.success() {
        return Err(format!("worker for {} failed ({status}):\n{}", kind.name(), tail.join("\n")));
    }
    let bytes = std::fs::read(&out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let _ = std::fs::remove_file(&out);
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("parsing worker output for {}: {e}", kind.name()))
}
