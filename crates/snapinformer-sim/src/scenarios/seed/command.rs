//! The `seed` command: its arguments, the parent that runs every row of every mode in its own
//! worker process (repeated, aggregated), and the worker side.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use super::{
    Mode, Row, RowSpec, SeedParams,
    cluster::{StreamFill, StreamPriority},
    controllers::{DaemonListMode, PodManagement, SetListMode},
    report::{self, ModeReport, SeedReport, SeedRowReport},
};
use crate::{
    harness::{
        heap::{CurrentOnly, HeapMeter, KEEP_FREED_MEMORY_ENV, prefault},
        placement::{Placement, RowOrder},
        plot::{self, PlotRow},
        repeat::{RepeatInfo, aggregate_reports, run_file_name},
        report::{Environment, now_rfc3339, write_json},
        worker::{
            arg_name, duration_arg, phase_line, progress_bar, rest_before_row, rest_seconds,
            run_child,
        },
    },
    pods::PodProfile,
};

/// Arguments of `snapinformer-sim seed`.
#[derive(clap::Args, Debug, Clone)]
pub struct SeedArgs {
    /// StatefulSets (default 200; 10 when --mode includes real).
    #[arg(long)]
    pub sets: Option<usize>,
    /// Replicas per StatefulSet (default 1000; 200 when --mode includes real).
    #[arg(long)]
    pub replicas: Option<usize>,
    /// Nodes, one daemon pod each (default 1000; 50 kwok nodes when --mode includes real).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Modes to run (default: inproc and http). `real` starts a fresh real control plane per
    /// row (`scripts/real-cluster`: etcd, kube-apiserver, kwok; build it once with
    /// `scripts/real-cluster build`) and adds the row `kube-controller-manager`. Its defaults
    /// are what two cores hold with etcd, kube-apiserver and kwok beside the controllers:
    /// 10 StatefulSets x 200 replicas, a DaemonSet on 50 nodes, 120 s rows, one run.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub mode: Vec<Mode>,
    /// Rows to run: a cache, with `+ryw` for read-your-writes, or (real mode)
    /// `kube-controller-manager` (default: snapshot-bg, locked, locked-batch and kube-rs, each
    /// with and without read-your-writes; in real mode also kube-controller-manager).
    #[arg(long, alias = "backends", value_delimiter = ',', value_parser = RowSpec::parse)]
    pub rows: Vec<RowSpec>,
    /// StatefulSet controller workers (kube-controller-manager's
    /// `--concurrent-statefulset-syncs` default).
    #[arg(long, default_value_t = 5)]
    pub set_workers: usize,
    /// DaemonSet controller workers (kube-controller-manager's `--concurrent-daemonset-syncs`
    /// default).
    #[arg(long, default_value_t = 2)]
    pub daemon_workers: usize,
    /// inproc: events delivered into the cache's queue per second, open loop (writes first,
    /// kubelet status updates in the free slots).
    #[arg(long, default_value_t = 20_000)]
    pub rate: u64,
    /// Time from a pod's creation until the kubelet starts it.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    pub startup_delay: Duration,
    /// Time limit of one row; a row that has not converged by then reports "never" (default
    /// 40s; 120s when --mode includes real).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_time: Option<Duration>,
    /// How the StatefulSet controller finds a set's pods (the report's controller lists the
    /// namespace; 1.37's looks its UID up in the owner index).
    #[arg(long, value_enum, default_value_t = SetListMode::Namespace)]
    pub set_list: SetListMode,
    /// How the DaemonSet controller finds its pods (1.37: the owner index).
    #[arg(long, value_enum, default_value_t = DaemonListMode::OwnerIndex)]
    pub daemon_list: DaemonListMode,
    /// StatefulSet pod management policy.
    #[arg(long, value_enum, default_value_t = PodManagement::Parallel)]
    pub policy: PodManagement,
    /// Size of the StatefulSet pods (default: realistic in process; small over HTTP, where
    /// encoding and decoding 4 KB pods on both ends of the loopback would take the whole
    /// run's time on two cores).
    #[arg(long, value_enum)]
    pub pod_profile: Option<PodProfile>,
    /// Where the cache's writer and the controllers run: unpinned (as a controller manager
    /// runs) or pinned (writer on the first core, controllers on the last).
    #[arg(long, value_enum, default_value_t = Placement::Unpinned)]
    pub placement: Placement,
    /// inproc: how the cluster model's stream (the API server's watch) is scheduled: real-time,
    /// so that it keeps its schedule whatever the controllers do, or normal.
    #[arg(long, value_enum, default_value_t = StreamPriority::Realtime)]
    pub stream_priority: StreamPriority,
    /// inproc: what the stream delivers in a slot with no write and no pod to start: a status
    /// refresh of a running pod (the default, at the stream's exact rate), or nothing (`idle`,
    /// a control: a run whose controllers fall behind then gets no extra refreshes to apply
    /// and sync on).
    #[arg(long, value_enum, default_value_t = StreamFill::Refresh)]
    pub stream_fill: StreamFill,
    /// Every row's pods rebuilt in an arena of their own as they arrive
    /// (`snapinformer_kube::transform::into_arena`: over HTTP as the reflector's transform, in
    /// process on the stream's delivery, where a reflector would decode), so that freeing a
    /// replaced pod touches a few pages; for every Rust row alike (in real mode the
    /// kube-controller-manager row, in Go, is not touched).
    #[arg(long)]
    pub pod_arena: bool,
    /// The `snapinformer` rows' batch window (`InformerBuilder::batch_window`): when deltas
    /// arrive while a batch is applied, at most one publication per window unless a batch is
    /// full (default: the informer's, 250 µs; `0s`: none).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub informer_batch_window: Option<Duration>,
    /// The baselines' batch window (a control; default none, as client-go): their applier,
    /// after a batch that was not full during which deltas arrived, sleeps until this much has
    /// passed since the batch began, as our informer does by default. Shows how much of a
    /// difference is the window's and how much the store's.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub baseline_batch_window: Option<Duration>,
    /// Rest before each row's worker starts (default 15s, none with --quick): on a virtual
    /// machine whose host takes freed memory back, a row started right after another grows
    /// its heap on the memory the other freed, at a fraction of the cost of fresh memory
    /// (`harness::worker::DEFAULT_REST` gives the measurements). `0s` for none.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub rest: Option<Duration>,
    /// A control for machines where first touches of memory are dear: each worker touches
    /// this many GiB of heap and frees it before its row starts, and keeps freed memory
    /// (mimalloc's purge off), so that growing the heap costs the row nothing (default none).
    /// Peak heap is then the largest 100 ms sample, and RSS includes the prefaulted memory.
    /// inproc and http only, and only the worker (over HTTP the test API server in the parent
    /// is not prefaulted); refused in real mode.
    #[arg(long, default_value_t = 0.0)]
    pub prefault_gib: f64,
    /// Runs of every row; the report gives the median and the range of every figure (default
    /// 3, or 1 with --quick or when --mode includes real).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// The rows' order from run to run of a `--repeat`, in each mode: `rotate` (the default)
    /// starts each run one row later than the one before, so that no row holds the same place
    /// in every run; `fixed` runs them in the order `--rows` gives every time (as `store`).
    #[arg(long, value_enum, default_value_t = RowOrder::Rotate)]
    pub row_order: RowOrder,
    /// A scaled version for CI (under a minute): 10 sets x 200 replicas, 50 nodes, 8 s rows,
    /// one run (in real mode: 4 sets x 50 replicas, 10 nodes, 60 s rows).
    #[arg(long)]
    pub quick: bool,
    /// Directory for report.json, runs/ and the plots.
    #[arg(long, default_value = "out/seed")]
    pub out: PathBuf,
    /// Only redraw the plots of an existing report.json into --out (runs nothing).
    #[arg(long, value_name = "REPORT_JSON")]
    pub plot_from: Option<PathBuf>,
    /// Internal: run one row in this process.
    #[arg(long, hide = true, requires = "worker_out", value_parser = Row::parse)]
    pub worker: Option<Row>,
    /// Internal: the mode of the worker's row.
    #[arg(long, hide = true, value_enum)]
    pub worker_mode: Option<Mode>,
    /// Internal: where the worker writes its JSON.
    #[arg(long, hide = true)]
    pub worker_out: Option<PathBuf>,
    /// Internal: the API server's URL (http and real mode).
    #[arg(long, hide = true)]
    pub server_url: Option<String>,
    /// Internal: the kubeconfig of the real control plane (real mode).
    #[arg(long, hide = true)]
    pub kubeconfig: Option<PathBuf>,
}

impl SeedArgs {
    /// The run's parameters (`--quick` scales them down).
    pub fn params(&self) -> SeedParams {
        let real = self.real();
        let pick = |given: Option<usize>, real_default: usize, default: usize| {
            given.unwrap_or(if real { real_default } else { default })
        };
        let max_time = self.max_time.unwrap_or(Duration::from_secs(if real { 120 } else { 40 }));
        let mut p = SeedParams {
            sets: pick(self.sets, 10, 200),
            replicas: pick(self.replicas, 200, 1000),
            nodes: pick(self.nodes, 50, 1000),
            set_workers: self.set_workers,
            daemon_workers: self.daemon_workers,
            rate: self.rate,
            startup_delay_ms: self.startup_delay.as_millis() as u64,
            max_time_s: max_time.as_secs_f64(),
            settle_s: 2.0,
            set_list: self.set_list,
            daemon_list: self.daemon_list,
            policy: self.policy,
            pod_profile: self.pod_profile,
            http_pod_profile: self.pod_profile.unwrap_or(PodProfile::Small),
            placement: self.placement,
            stream_priority: self.stream_priority,
            stream_fill: self.stream_fill,
            pod_arena: self.pod_arena,
            informer_batch_window_s: self.informer_batch_window.map(|w| w.as_secs_f64()),
            informer_default_batch_window_s: Some(
                snapinformer_core::DEFAULT_BATCH_WINDOW.as_secs_f64(),
            ),
            baseline_batch_window_s: self.baseline_batch_window.map(|w| w.as_secs_f64()),
            prefault_gib: self.prefault_gib,
            rest_s: rest_seconds(self.rest, self.quick),
        };
        if self.quick && real {
            p.sets = 4;
            p.replicas = 50;
            p.nodes = 10;
            p.max_time_s = 60.0;
            p.settle_s = 1.0;
        } else if self.quick {
            p.sets = 10;
            p.replicas = 200;
            p.nodes = 50;
            p.rate = 5000;
            p.max_time_s = 8.0;
            p.settle_s = 1.0;
        }
        p
    }

    /// Whether real mode runs (in this parent, or as this worker's mode): its defaults apply.
    fn real(&self) -> bool {
        self.mode.contains(&Mode::Real) || self.worker_mode == Some(Mode::Real)
    }

    /// The rows of `mode`: kube-controller-manager's only in real mode.
    fn rows(&self, mode: Mode) -> Vec<RowSpec> {
        let rows = if self.rows.is_empty() {
            let mut rows: Vec<RowSpec> = Row::defaults().into_iter().map(RowSpec::Ours).collect();
            rows.push(RowSpec::KubeControllerManager);
            rows
        } else {
            self.rows.clone()
        };
        rows.into_iter()
            .filter(|r| mode == Mode::Real || *r != RowSpec::KubeControllerManager)
            .collect()
    }

    fn modes(&self) -> Vec<Mode> {
        if self.mode.is_empty() { vec![Mode::Inproc, Mode::Http] } else { self.mode.clone() }
    }

    fn repeat(&self) -> usize {
        self.repeat.unwrap_or(if self.quick || self.real() { 1 } else { 3 }).max(1)
    }
}

/// Runs `seed`: one worker's row when `--worker` is given, else every row of every mode.
pub fn main(args: &SeedArgs, heap: &'static dyn HeapMeter, allocator: &str) -> Result<(), String> {
    if let Some(path) = &args.plot_from {
        let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let report: SeedReport = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a seed report: {e}", path.display()))?;
        let Some(info) = report.repeat.as_ref().filter(|r| r.runs > 1) else {
            write_plots(&report, &args.out, 1);
            return Ok(());
        };
        // An aggregated report holds medians beside the first run's curves: plot that run, from
        // its own file, so that each legend gives the p99 of the curve it labels.
        let first = info.files.first().ok_or_else(|| {
            format!("{} aggregates {} runs but names no run file", path.display(), info.runs)
        })?;
        let run_path = path.parent().unwrap_or(Path::new(".")).join(first);
        let run: SeedReport = std::fs::read(&run_path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            .map_err(|e| {
                format!(
                    "{} aggregates {} runs and is plotted from its first run, {}, which could not be read: {e} (pass a run's own report instead)",
                    path.display(),
                    info.runs,
                    run_path.display()
                )
            })?;
        write_plots(&run, &args.out, info.runs);
        return Ok(());
    }
    let params = args.params();
    if let Some(row) = args.worker {
        return worker(args, row, &params, heap, allocator);
    }
    if params.sets == 0 || params.replicas == 0 || params.nodes == 0 {
        return Err("--sets, --replicas and --nodes must be at least 1".into());
    }
    if !(params.prefault_gib >= 0.0 && params.prefault_gib.is_finite()) {
        return Err(format!("--prefault-gib must be 0 or more, not {}", params.prefault_gib));
    }
    if params.prefault_gib > 0.0 && args.modes().contains(&Mode::Real) {
        return Err("--prefault-gib applies to the inproc and http modes only: in real mode the \
                    kube-controller-manager row is a Go process it cannot prefault"
            .into());
    }
    let (modes, repeat) = (args.modes(), args.repeat());
    let row_count: usize = modes.iter().map(|&m| args.rows(m).len()).sum();
    let runs_dir = args.out.join("runs");
    std::fs::create_dir_all(&runs_dir)
        .map_err(|e| format!("creating {}: {e}", runs_dir.display()))?;
    let started_at = now_rfc3339();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting runtime: {e}"))?;
    let bar = progress_bar((row_count * repeat) as u64, "rows");
    let (mut runs, mut files) = (Vec::new(), Vec::new());
    for i in 1..=repeat {
        let mut mode_reports = Vec::new();
        for &mode in &modes {
            let rows = args.rows(mode);
            let (reports, order) = args.row_order.run_rows(&rows, i - 1, |&row| {
                bar.set_message(format!(
                    "run {i}/{repeat} {} {}: starting",
                    mode.name(),
                    row.name()
                ));
                rest_before_row(
                    Duration::from_secs_f64(params.rest_s),
                    &format!("run {i}/{repeat} {} {}", mode.name(), row.name()),
                    &bar,
                );
                bar.set_message(format!(
                    "run {i}/{repeat} {} {}: timing the machine",
                    mode.name(),
                    row.name()
                ));
                let speed = crate::harness::speed::measure_for(args.quick);
                let mut report = run_parent_row(row, mode, args, &params, &runtime, &bar)?;
                report.machine_speed = Some(speed);
                bar.inc(1);
                Ok::<_, String>(report)
            })?;
            let targets = report::targets(mode, &reports);
            let run_order = order.iter().map(|&r| rows[r].name()).collect();
            mode_reports.push(ModeReport { mode, rows: reports, targets, run_order });
        }
        let run = SeedReport {
            scenario: "seed".into(),
            params: params.clone(),
            environment: Environment::capture(started_at.clone(), allocator),
            modes: mode_reports,
            repeat: None,
        };
        let file = run_file_name("seed", &started_at, i);
        write_json(&runs_dir.join(&file), &run)?;
        files.push(format!("runs/{file}"));
        runs.push(run);
    }
    bar.finish_and_clear();
    let aggregated = aggregate_reports(&runs).map_err(|e| e.to_string())?;
    let mut report = aggregated.median;
    for m in &mut report.modes {
        m.targets = report::targets(m.mode, &m.rows);
        m.run_order = Vec::new();
    }
    report.repeat = Some(RepeatInfo { runs: repeat, files, spread: aggregated.spread });
    println!("{}", report::describe(&params));
    if repeat > 1 {
        println!("median of {repeat} runs; [min-max] where runs differ");
    }
    for (m, mode) in report.modes.iter().enumerate() {
        println!(
            "\nmode {} (staleness {}):\n{}",
            mode.mode.name(),
            report::staleness_basis(mode.mode),
            report::table(&report, m)
        );
    }
    let json_path = args.out.join("report.json");
    write_json(&json_path, &report)?;
    println!(
        "wrote {} (and {repeat} run reports under {})",
        json_path.display(),
        runs_dir.display()
    );
    write_plots(&runs[0], &args.out, repeat);
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

/// The worker side: runs `row` in this process, writes its JSON, and exits without freeing the
/// cache.
fn worker(
    args: &SeedArgs,
    row: Row,
    params: &SeedParams,
    heap: &'static dyn HeapMeter,
    allocator: &str,
) -> Result<(), String> {
    let mode = args.worker_mode.ok_or("--worker needs --worker-mode")?;
    let out = args.worker_out.as_ref().expect("clap requires --worker-out with --worker");
    let server = args
        .server_url
        .clone()
        .map(|url| super::ServerInfo { url, kubeconfig: args.kubeconfig.clone() });
    let heap: &'static dyn HeapMeter = if params.prefault_gib > 0.0 {
        let bytes = (params.prefault_gib * (1u64 << 30) as f64) as u64;
        let took = prefault(bytes, allocator)?;
        phase_line(&format!(
            "prefaulted {} GiB of heap in {:.1} s",
            params.prefault_gib,
            took.as_secs_f64()
        ));
        Box::leak(Box::new(CurrentOnly(heap)))
    } else {
        heap
    };
    let report =
        super::run_row(row, mode, params, server.as_ref(), heap, &|msg| phase_line(msg), true)?;
    write_json(out, &report)?;
    // The row's cache is left for the OS to reclaim.
    std::process::exit(0);
}

/// Runs one row of one mode in a worker process, with a fresh test API server for http and a
/// fresh real control plane for real.
fn run_parent_row(
    spec: RowSpec,
    mode: Mode,
    args: &SeedArgs,
    params: &SeedParams,
    runtime: &tokio::runtime::Runtime,
    bar: &indicatif::ProgressBar,
) -> Result<SeedRowReport, String> {
    if mode == Mode::Real {
        let worker = |row: Row, server: &super::ServerInfo| {
            run_worker(row, mode, args, params, Some(server), bar)
        };
        return super::real::run_parent_row(spec, params, &args.out, runtime, bar, &worker);
    }
    let RowSpec::Ours(row) = spec else {
        return Err(format!("the row {} runs only in real mode", spec.name()));
    };
    let server = match mode {
        Mode::Http => {
            bar.set_message(format!(
                "{} {}: starting the test API server",
                mode.name(),
                row.name()
            ));
            Some(runtime.block_on(super::start_server(params))?)
        }
        Mode::Inproc | Mode::Real => None,
    };
    let info = server.as_ref().map(|s| super::ServerInfo { url: s.url(), kubeconfig: None });
    let result = run_worker(row, mode, args, params, info.as_ref(), bar);
    match server {
        Some(server) => {
            let cluster_pods = server.count(snapinformer_apiserver::ResourceKind::Pod) as u64;
            runtime.block_on(server.shutdown());
            let mut report = result?;
            report.cluster_pods = cluster_pods;
            Ok(report)
        }
        None => result,
    }
}

/// The flags of one seed worker: the resolved parameters (with `--quick` only when the parent
/// ran quick: the worker then applies the same scaled parameters), the row and mode, and where
/// the worker writes its report.
fn worker_flags(
    row: Row,
    mode: Mode,
    quick: bool,
    p: &SeedParams,
    server: Option<&super::ServerInfo>,
    out: &Path,
) -> Vec<std::ffi::OsString> {
    fn add(flags: &mut Vec<std::ffi::OsString>, items: &[&str]) {
        flags.extend(items.iter().map(std::ffi::OsString::from));
    }
    let mut flags = Vec::new();
    add(&mut flags, &["seed"]);
    add(&mut flags, &["--sets", &p.sets.to_string()]);
    add(&mut flags, &["--replicas", &p.replicas.to_string()]);
    add(&mut flags, &["--nodes", &p.nodes.to_string()]);
    add(&mut flags, &["--set-workers", &p.set_workers.to_string()]);
    add(&mut flags, &["--daemon-workers", &p.daemon_workers.to_string()]);
    add(&mut flags, &["--rate", &p.rate.to_string()]);
    add(&mut flags, &["--startup-delay", &format!("{}ms", p.startup_delay_ms)]);
    add(&mut flags, &["--max-time", &format!("{}ms", (p.max_time_s * 1e3).round() as u64)]);
    add(&mut flags, &["--set-list", &arg_name(&p.set_list)]);
    add(&mut flags, &["--daemon-list", &arg_name(&p.daemon_list)]);
    add(&mut flags, &["--policy", &arg_name(&p.policy)]);
    add(&mut flags, &["--placement", &arg_name(&p.placement)]);
    add(&mut flags, &["--stream-priority", &arg_name(&p.stream_priority)]);
    add(&mut flags, &["--stream-fill", &arg_name(&p.stream_fill)]);
    if p.pod_arena {
        add(&mut flags, &["--pod-arena"]);
    }
    add(&mut flags, &["--worker", &row.name()]);
    add(&mut flags, &["--worker-mode", mode.name()]);
    add(&mut flags, &["--worker-out"]);
    flags.push(out.into());
    if let Some(window) = p.informer_batch_window_s {
        add(&mut flags, &["--informer-batch-window", &duration_arg(window)]);
    }
    if let Some(window) = p.baseline_batch_window_s {
        add(&mut flags, &["--baseline-batch-window", &duration_arg(window)]);
    }
    if let Some(server) = server {
        add(&mut flags, &["--server-url", &server.url]);
        if let Some(kubeconfig) = &server.kubeconfig {
            add(&mut flags, &["--kubeconfig"]);
            flags.push(kubeconfig.into());
        }
    }
    if let Some(profile) = p.pod_profile {
        add(&mut flags, &["--pod-profile", &arg_name(&profile)]);
    }
    if p.prefault_gib > 0.0 {
        add(&mut flags, &["--prefault-gib", &p.prefault_gib.to_string()]);
    }
    // The settle time is not a flag: a quick run's parent passes --quick for it, and the
    // worker's --quick then applies the same scaled parameters the parent resolved.
    if quick {
        add(&mut flags, &["--quick"]);
    }
    flags
}

/// Runs one row of one mode in a worker process (its flags: [`worker_flags`]).
fn run_worker(
    row: Row,
    mode: Mode,
    args: &SeedArgs,
    p: &SeedParams,
    server: Option<&super::ServerInfo>,
    bar: &indicatif::ProgressBar,
) -> Result<SeedRowReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding own executable: {e}"))?;
    let out = args.out.join(format!(".worker-{}-{}.json", mode.name(), row.name()));
    let mut cmd = Command::new(exe);
    cmd.args(worker_flags(row, mode, args.quick, p, server, &out));
    if p.prefault_gib > 0.0 {
        let (name, value) = KEEP_FREED_MEMORY_ENV;
        cmd.env(name, value);
    }
    let label = format!("{} {}", mode.name(), row.name());
    run_child(cmd, &out, &label, bar)
}

/// Draws the plots of every mode of `report`, one run's report, into `out/<mode>/`: so that each
/// legend gives the p99 and maximum of the curve it labels; `repeat` is how many runs the set
/// had (the subtitle says "run 1 of N").
fn write_plots(report: &SeedReport, out: &Path, repeat: usize) {
    let params = &report.params;
    for m in &report.modes {
        let dir = out.join(m.mode.name());
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("warning: plots not written: creating {}: {e}", dir.display());
            continue;
        }
        let rows: Vec<PlotRow<'_>> = m
            .rows
            .iter()
            .map(|r| PlotRow {
                name: &r.name,
                staleness_p99_us: r.staleness_us.p99,
                staleness_cdf: &r.staleness_cdf,
                depth_max: r.queue_depth_max,
                depth_series: &r.depth_series,
            })
            .collect();
        let subtitle = format!(
            "seed {}, {} pods, {} nodes, staleness {}",
            m.mode.name(),
            params.sets * params.replicas,
            params.nodes,
            report::staleness_basis(m.mode)
        );
        match plot::write_plots(&dir, &rows, &plot::first_run_subtitle(&subtitle, repeat)) {
            Ok(files) => files.iter().for_each(|f| println!("wrote {}", f.display())),
            Err(e) => eprintln!("warning: plots not written: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;
    use crate::harness::worker::DEFAULT_REST;

    /// `seed` with `args` (the first one the command's name), as the command line parses it.
    fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<SeedArgs, clap::Error> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            seed: SeedArgs,
        }
        <Cli as clap::Parser>::try_parse_from(args).map(|cli| cli.seed)
    }

    fn given(flags: &[&str]) -> SeedArgs {
        parse(std::iter::once("seed").chain(flags.iter().copied()).map(OsString::from))
            .expect("valid flags")
    }

    fn has(flags: &[OsString], flag: &str) -> bool {
        flags.iter().any(|f| f == flag)
    }

    #[test]
    fn rows_rest_fifteen_seconds_by_default_none_when_quick_and_as_long_as_asked() {
        assert_eq!(given(&[]).params().rest_s, DEFAULT_REST.as_secs_f64());
        assert_eq!(given(&["--quick"]).params().rest_s, 0.0);
        assert_eq!(given(&["--rest", "0s"]).params().rest_s, 0.0);
        assert_eq!(given(&["--rest", "20s", "--quick"]).params().rest_s, 20.0);
        let p = given(&["--rest", "20s"]).params();
        let flags = worker_flags(
            Row::parse("locked").expect("a row"),
            Mode::Inproc,
            false,
            &p,
            None,
            Path::new("/tmp/w.json"),
        );
        assert!(!has(&flags, "--rest"), "the parent rests; its workers do not");
    }

    #[test]
    fn a_prefault_reaches_the_worker_and_parses_back() {
        let out = Path::new("/tmp/w.json");
        let row = Row::parse("snapshot-bg+ryw").expect("a row");
        let none = worker_flags(row, Mode::Inproc, false, &given(&[]).params(), None, out);
        assert!(!has(&none, "--prefault-gib"));
        let p = given(&["--prefault-gib", "16"]).params();
        let flags = worker_flags(row, Mode::Inproc, false, &p, None, out);
        let back = parse(flags).expect("the worker's flags parse");
        assert_eq!(back.params().prefault_gib, 16.0);
    }

    #[test]
    fn workers_get_both_batch_windows_and_parse_them_back() {
        let row = Row::parse("locked-batch+ryw").expect("a row");
        let out = Path::new("/tmp/worker.json");
        let default = given(&[]).params();
        assert_eq!(default.informer_batch_window_s, None, "the informer's own default");
        assert_eq!(
            default.informer_default_batch_window_s,
            Some(snapinformer_core::DEFAULT_BATCH_WINDOW.as_secs_f64()),
            "the report says what the informer's default was"
        );
        assert_eq!(default.baseline_batch_window_s, None, "none for the baselines");
        let head = crate::scenarios::seed::report::describe(&default);
        let shown = format!(
            "our informer's batch window the default, {:.3} ms",
            snapinformer_core::DEFAULT_BATCH_WINDOW.as_secs_f64() * 1e3
        );
        assert!(head.contains(&shown), "{head}");
        let flags = worker_flags(row, Mode::Inproc, false, &default, None, out);
        assert!(!has(&flags, "--informer-batch-window") && !has(&flags, "--baseline-batch-window"));

        let args = given(&["--informer-batch-window", "1500us", "--baseline-batch-window", "1ms"]);
        let p = args.params();
        assert_eq!(p.informer_batch_window_s, Some(0.0015));
        assert_eq!(p.baseline_batch_window_s, Some(0.001));
        let flags = worker_flags(row, Mode::Inproc, false, &p, None, out);
        let back = parse(flags.clone()).expect("workers parse their flags");
        assert_eq!(back.worker, Some(row));
        assert_eq!(back.worker_mode, Some(Mode::Inproc));
        assert_eq!(back.worker_out.as_deref(), Some(out));
        let back = back.params();
        assert_eq!(back.informer_batch_window_s, Some(0.0015));
        assert_eq!(back.baseline_batch_window_s, Some(0.001));
        assert!(!has(&flags, "--quick"), "a full run's workers are not quick");
        let soon = ["seed", "--baseline-batch-window", "soon"].map(OsString::from);
        assert!(parse(soon).is_err(), "not a duration: refused");
    }
}
