//! The `store` command: its arguments, the parent that runs every row's worker process (repeated,
//! aggregated), and the worker side.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use super::{
    InProcessRow, OpenLoopUpdates, StoreParams, StoreRowReport,
    report::{self, LockCheck, StoreReport},
    rows::{self, Runner, StoreRow},
};
use crate::{
    harness::{
        heap::HeapMeter,
        placement::{
            InformerHandler, InformerProcessing, ReclaimerPriority, RowOrder, WriterPriority,
        },
        plot::{self, PlotRow, SweepLine},
        repeat::{RepeatInfo, aggregate_reports, run_file_name},
        report::{Environment, now_rfc3339, write_json},
        worker::{
            arg_name, duration_arg, phase_line, progress_bar, rest_before_row, rest_seconds,
            run_child,
        },
    },
    rows::{client_go, lock},
    scenarios::LoadArgs,
};

use super::readers::{DEFAULT_WARMUP, Pacing};

/// `--reader-rate`: operations a second, finite and not negative; `duty` (or 0) for duty pacing.
fn parse_reader_rate(s: &str) -> Result<f64, String> {
    if s.trim().eq_ignore_ascii_case("duty") {
        return Ok(0.0);
    }
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 0.0 => Ok(r),
        _ => Err(format!(
            "{s:?} is not a rate in operations a second (a number, 0 or more) nor `duty`"
        )),
    }
}

/// The readers' operations a second per reader when `--reader-rate` is not given: ten readers
/// make ten reads a second together, on every row alike.
pub const DEFAULT_READS_PER_READER_PER_S: f64 = 1.0;

/// The readers' warm-up with `--quick`, whose phases last about 2 s.
const QUICK_READER_WARMUP: Duration = Duration::from_millis(500);

/// Arguments of `snapinformer-sim store`.
#[derive(clap::Args, Debug, Clone)]
pub struct StoreArgs {
    /// Population, readers, open loop and placement.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Updates applied in each saturation phase (default: as many as objects, at least 20,000).
    #[arg(long)]
    pub updates: Option<usize>,
    /// Rows to run, by name (default: all; see `rows::registry`). The `client-go` and
    /// `client-go-indexer` rows run real client-go from `baselines/client-go`, built with
    /// `go build` (Go 1.26 or newer) on first use and cached.
    #[arg(long, alias = "backends", value_delimiter = ',')]
    pub rows: Vec<String>,
    /// How the writer is scheduled in the open loop and the sweep: `realtime` (SCHED_FIFO)
    /// takes the machine's other load out of the staleness figures, a diagnostic for busy
    /// machines. In-process rows only: the cache rows' writer, and in the informer rows every
    /// thread on an update's path (source, runtime, handler) for the open loop. The Go rows run
    /// at the normal policy beside them: Go cannot schedule one goroutine differently.
    #[arg(long, value_enum, default_value_t = WriterPriority::Normal)]
    pub writer_priority: WriterPriority,
    /// How the reclaimer threads of `snapinformer`, `snapshot-bg`, `snapshot-bg-covering` and
    /// `locked-bg` are scheduled: `normal` (the store's default) or `idle` (`SCHED_IDLE`, the
    /// store's `ReclaimPriority::Idle`).
    #[arg(long, value_enum, default_value_t = ReclaimerPriority::Normal)]
    pub reclaim_priority: ReclaimerPriority,
    /// Where the informer rows (`snapinformer`, `snapinformer-compact`) run their processing
    /// loop: `runtime` (the informer's default, a task beside the reflector) or `thread` (a
    /// thread of its own, `Processing::DedicatedThread`).
    #[arg(long, value_enum, default_value_t = InformerProcessing::Runtime)]
    pub informer_processing: InformerProcessing,
    /// Where the informer rows run their registered (visibility) handler: `thread` (the
    /// informer's default, a thread of its own) or `task` (a task on the informer's runtime,
    /// `HandlerExecution::Task`).
    #[arg(long, value_enum, default_value_t = InformerHandler::Thread)]
    pub informer_handler: InformerHandler,
    /// The informer rows' batch window (`InformerBuilder::batch_window`): when deltas arrive
    /// while a batch is applied, at most one publication per window unless a batch is full
    /// (default: the informer's, 250 µs; `0s`: none, a batch as soon as the loop is free).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub informer_batch_window: Option<Duration>,
    /// Offered rates of a sweep, run after the open loop (e.g. 5000,10000,20000,40000,80000):
    /// staleness p99 and queue depth against offered load, and each row's highest sustainable
    /// rate.
    #[arg(long, value_delimiter = ',')]
    pub sweep: Vec<u64>,
    /// Length of each point of the sweep (its updates are generated before it, rate x length
    /// pods in memory at once). A reader whose operation took `d` sleeps `d x (readers - 1)`,
    /// so a reader that waited a second sleeps nine: shorter points can end before a slow
    /// row's readers read again (client-go's did at 5 s on 2026-12-04), and the table marks
    /// such points with `~`.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub sweep_duration: Duration,
    /// Rest before each row's worker starts (default 15s, none with --quick): on a virtual
    /// machine whose host takes freed memory back, a row started right after another grows
    /// its heap on the memory the other freed, at a fraction of the cost of fresh memory
    /// (`harness::worker::DEFAULT_REST` gives the measurements). `0s` for none.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub rest: Option<Duration>,
    /// How long the readers run, unrecorded, before each phase with readers (saturation with
    /// readers, the open loop, each sweep point), every row alike (default 2s, 500ms with
    /// --quick). Ten readers started at the same instant first make a burst of ten concurrent
    /// reads, which a controller manager's readers, already running, do not; `0s` measures
    /// from their start, as runs before 2026-12-03 did.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub reader_warmup: Option<Duration>,
    /// Operations a second the readers make together, every row alike, each begun at its slot
    /// (default: one a second per reader, so 10 with ten readers). Every row gets the same
    /// reads, and what they cost shows as CPU taken from the writer. `duty` (or 0) paces them
    /// by duty instead, as every run before 2026-12-05 did: each reader sleeps
    /// `d x (readers - 1)` after an operation that took `d`, so the readers use about one core
    /// on every row and a slower cache gets fewer reads (see `readers::Pacing`).
    #[arg(long, value_name = "OPS|duty", value_parser = parse_reader_rate)]
    pub reader_rate: Option<f64>,
    /// How the open loop and the sweep get their updates, every row alike: `at-slot` builds
    /// each update when it arrives, on the row's source (the stand-in for decoding, so Go's
    /// collector sees the allocation a cluster's events make); `prebuilt` builds them all
    /// before the phase and holds them in a pool, as runs before 2026-12-04 did (Go's open loop
    /// then ran without a collection).
    #[arg(long, value_enum, default_value_t = OpenLoopUpdates::AtSlot)]
    pub open_loop_updates: OpenLoopUpdates,
    /// Runs of the whole set of rows; the report gives the median and the range of every
    /// figure (default 3, or 1 with --quick).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// The rows' order from run to run of a `--repeat`: `rotate` (the default) starts each run
    /// one row later than the one before (a, b, c; then b, c, a; ...), so that no row holds
    /// the same place in every run; `fixed` runs them in the order `--rows` gives every time.
    /// A row's place moved its tail in the one-read-a-second sets of 2026-12-07
    /// (BENCHMARKS.md, "A row's place in a run").
    #[arg(long, value_enum, default_value_t = RowOrder::Rotate)]
    pub row_order: RowOrder,
    /// Directory for report.json, runs/ and the plots.
    #[arg(long, default_value = "out/store")]
    pub out: PathBuf,
    /// A small version that runs in seconds (for CI): 5,000 pods, 4 readers, 2 s at 5,000/s, one
    /// run.
    #[arg(long)]
    pub quick: bool,
    /// Internal: run one row in this process and write its JSON to --worker-out.
    #[arg(long, hide = true, requires = "worker_out")]
    pub worker: Option<String>,
    /// Internal: where the worker writes its JSON.
    #[arg(long, hide = true)]
    pub worker_out: Option<PathBuf>,
}

impl StoreArgs {
    /// The run's parameters (`--quick` replaces the load).
    pub fn params(&self) -> StoreParams {
        let l = &self.load;
        let mut p = StoreParams {
            objects: l.objects,
            nodes: l.nodes,
            readers: l.readers,
            duration_s: l.duration.as_secs_f64(),
            rate: l.rate,
            updates: self.updates.unwrap_or(l.objects.max(20_000)),
            open_loop: l.rate > 0,
            pod_profile: l.pod_profile,
            placement: l.placement,
            writer_priority: self.writer_priority,
            reclaim_priority: self.reclaim_priority,
            informer_processing: self.informer_processing,
            informer_handler: self.informer_handler,
            informer_batch_window_s: self.informer_batch_window.map(|w| w.as_secs_f64()),
            sweep: self.sweep.clone(),
            sweep_duration_s: self.sweep_duration.as_secs_f64(),
            rest_s: rest_seconds(self.rest, self.quick),
            reader_warmup_s: self
                .reader_warmup
                .unwrap_or(if self.quick { QUICK_READER_WARMUP } else { DEFAULT_WARMUP })
                .as_secs_f64(),
            reader_pacing: Pacing::Duty, // set below, once the number of readers is known
            open_loop_updates: self.open_loop_updates,
        };
        if self.quick {
            p.objects = 5000;
            p.nodes = 50;
            p.readers = 4;
            p.duration_s = 2.0;
            p.rate = 5000;
            p.updates = 20_000;
            p.open_loop = true;
            p.sweep_duration_s = p.sweep_duration_s.min(1.0);
        }
        p.reader_pacing = Pacing::from_rate(Some(
            self.reader_rate.unwrap_or(p.readers as f64 * DEFAULT_READS_PER_READER_PER_S),
        ));
        p
    }

    fn repeat(&self) -> usize {
        self.repeat.unwrap_or(if self.quick { 1 } else { 3 }).max(1)
    }
}

/// Runs `store`: a worker's row when `--worker` is given, else every row in its own process.
pub fn main(args: &StoreArgs, heap: &'static dyn HeapMeter, allocator: &str) -> Result<(), String> {
    let params = args.params();
    if let Some(name) = &args.worker {
        let out = args.worker_out.as_ref().expect("clap requires --worker-out with --worker");
        let row = InProcessRow::parse(name)
            .ok_or_else(|| format!("{name:?} is not a row this executable runs"))?;
        let report = super::run_row(row, &params, heap, &|msg| phase_line(msg))?;
        let json = serde_json::to_vec(&report).map_err(|e| e.to_string())?;
        return std::fs::write(out, json).map_err(|e| format!("writing {}: {e}", out.display()));
    }
    if params.objects == 0 {
        return Err("--objects must be at least 1".into());
    }
    if params.sweep.contains(&0) {
        return Err("--sweep rates must be at least 1".into());
    }
    let rows = rows::select(&args.rows)?;
    if params.writer_priority != WriterPriority::Normal
        && !rows.iter().any(|r| matches!(r.runner, Runner::InProcess(_)))
    {
        return Err("--writer-priority applies to the in-process rows only, and none was chosen \
                    (the Go rows' goroutines cannot be given a priority one by one)"
            .into());
    }
    let runs_dir = args.out.join("runs");
    std::fs::create_dir_all(&runs_dir)
        .map_err(|e| format!("creating {}: {e}", runs_dir.display()))?;
    let started_at = now_rfc3339();
    let repeat = args.repeat();
    let lock_check = rows.iter().any(|r| r.name.starts_with("locked")).then(check_locks);
    let bar = progress_bar((rows.len() * repeat) as u64, "rows");
    // The Go worker is built (or found in the cache) before any row runs, so that a missing Go
    // toolchain or a failed build stops the run before it has spent time on other rows.
    let go_worker = if rows.iter().any(|r| r.runner == Runner::ClientGo) {
        let worker = client_go::worker_binary(&|msg| {
            bar.set_message(format!("client-go: {msg}"));
            if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                eprintln!("[client-go] {msg}");
            }
        })
        .map_err(|e| format!("client-go rows: {e}"))?;
        Some(worker)
    } else {
        None
    };
    let mut runs = Vec::new();
    let mut files = Vec::new();
    let mut orders = Vec::new();
    for i in 1..=repeat {
        let (reports, order) = args.row_order.run_rows(&rows, i - 1, |row| {
            bar.set_message(format!("run {i}/{repeat} {}: starting", row.name));
            rest_before_row(
                Duration::from_secs_f64(params.rest_s),
                &format!("run {i}/{repeat} {}", row.name),
                &bar,
            );
            bar.set_message(format!("run {i}/{repeat} {}: timing the machine", row.name));
            let speed = crate::harness::speed::measure_for(args.quick);
            let mut report = run_worker(row, go_worker.as_deref(), &params, &args.out, &bar)?;
            report.machine_speed = Some(speed);
            bar.inc(1);
            Ok::<_, String>(report)
        })?;
        check_workloads(&reports).map_err(|e| format!("run {i}: {e}"))?;
        let mut run = assemble(&params, allocator, &started_at, reports, lock_check.clone());
        run.run_order = order.iter().map(|&r| rows[r].name.clone()).collect();
        orders.push(run.run_order.clone());
        let file = run_file_name("store", &started_at, i);
        write_json(&runs_dir.join(&file), &run)?;
        files.push(format!("runs/{file}"));
        runs.push(run);
    }
    bar.finish_and_clear();
    let aggregated = aggregate_reports(&runs).map_err(|e| e.to_string())?;
    let mut report = aggregated.median;
    report.targets = all_targets(&report.rows, &params);
    report.notes = report::notes(&report.rows, &params);
    report.repeat = Some(RepeatInfo { runs: repeat, files, spread: aggregated.spread });
    report.run_order = Vec::new();
    report.run_orders = orders;
    println!("{}", report::table(&report));
    let json_path = args.out.join("report.json");
    write_json(&json_path, &report)?;
    println!(
        "wrote {} (and {repeat} run reports under {})",
        json_path.display(),
        runs_dir.display()
    );
    if let Some(digest) = report.rows.first().map(|r| &r.workload_digest) {
        println!("workload digest {digest}, the same for every row of every run");
    }
    write_plots(&args.out, &report, &runs[0], repeat);
    Ok(())
}

/// Measures how the locked rows' lock flavours treat a waiting reader (a fraction of a second).
fn check_locks() -> LockCheck {
    let (turns, hold) = (20, Duration::from_millis(5));
    LockCheck {
        turns,
        hold_ms: hold.as_secs_f64() * 1e3,
        hand_off: lock::reader_wait_turns(lock::LockFlavor::HandOff, turns, hold),
        std: lock::reader_wait_turns(lock::LockFlavor::Std, turns, hold),
    }
}

/// Checks that every row of one run reported the same workload digest.
pub fn check_workloads(rows: &[StoreRowReport]) -> Result<(), String> {
    if let Some(r) = rows.iter().find(|r| r.workload_digest.is_empty()) {
        return Err(format!(
            "row {} reported no workload digest (an outdated worker?); the rows cannot be shown to have applied the same workload",
            r.name
        ));
    }
    let first = rows.first().map(|r| r.workload_digest.as_str()).unwrap_or_default();
    if rows.iter().any(|r| r.workload_digest != first) {
        let each: Vec<String> =
            rows.iter().map(|r| format!("{} {}", r.name, r.workload_digest)).collect();
        return Err(format!(
            "the rows did not all apply the same workload (workload digests: {}); the figures are not comparable",
            each.join(", ")
        ));
    }
    Ok(())
}

fn all_targets(
    rows: &[StoreRowReport],
    p: &StoreParams,
) -> Vec<crate::harness::report::TargetCheck> {
    let mut all = report::all_targets(rows, p.open_loop);
    all.extend(report::compact_targets(rows, p.objects));
    all
}

fn assemble(
    params: &StoreParams,
    allocator: &str,
    started_at: &str,
    rows: Vec<StoreRowReport>,
    lock_check: Option<LockCheck>,
) -> StoreReport {
    StoreReport {
        scenario: "store".into(),
        params: params.clone(),
        environment: Environment::capture(started_at.to_owned(), allocator),
        targets: all_targets(&rows, params),
        notes: report::notes(&rows, params),
        rows,
        lock_check,
        repeat: None,
        run_order: Vec::new(),
        run_orders: Vec::new(),
    }
}

/// The flags every store worker gets: the resolved parameters, never `--quick`.
pub fn worker_args(p: &StoreParams) -> Vec<String> {
    worker_args_for(p, true)
}

/// [`worker_args`] for one row's worker: only this executable's own workers (in-process rows)
/// get `--writer-priority` and `--reclaim-priority`; the Go worker can schedule no goroutine
/// apart, has no reclaimer thread, and refuses flags it does not define.
fn worker_args_for(p: &StoreParams, in_process: bool) -> Vec<String> {
    let mut a = vec![
        "store".to_owned(),
        "--objects".into(),
        p.objects.to_string(),
        "--nodes".into(),
        p.nodes.to_string(),
        "--readers".into(),
        p.readers.to_string(),
        "--duration".into(),
        format!("{}ms", (p.duration_s * 1e3).round() as u64),
        "--rate".into(),
        p.rate.to_string(),
        "--updates".into(),
        p.updates.to_string(),
        "--pod-profile".into(),
        arg_name(&p.pod_profile),
        "--placement".into(),
        arg_name(&p.placement),
        "--reader-warmup".into(),
        format!("{}ms", (p.reader_warmup_s * 1e3).round() as u64),
        "--open-loop-updates".into(),
        arg_name(&p.open_loop_updates),
    ];
    // Always passed: a worker left to its own default would pace by rate, the Go worker by
    // duty. 0 means duty pacing to both.
    a.extend(["--reader-rate".into(), p.reader_pacing.rate().unwrap_or(0.0).to_string()]);
    if in_process && p.writer_priority != WriterPriority::Normal {
        a.extend(["--writer-priority".into(), arg_name(&p.writer_priority)]);
    }
    if in_process && p.reclaim_priority != ReclaimerPriority::Normal {
        a.extend(["--reclaim-priority".into(), arg_name(&p.reclaim_priority)]);
    }
    if in_process && p.informer_processing != InformerProcessing::Runtime {
        a.extend(["--informer-processing".into(), arg_name(&p.informer_processing)]);
    }
    if in_process && p.informer_handler != InformerHandler::Thread {
        a.extend(["--informer-handler".into(), arg_name(&p.informer_handler)]);
    }
    if let (true, Some(window)) = (in_process, p.informer_batch_window_s) {
        a.extend(["--informer-batch-window".into(), duration_arg(window)]);
    }
    if !p.sweep.is_empty() {
        let rates: Vec<String> = p.sweep.iter().map(u64::to_string).collect();
        a.extend([
            "--sweep".into(),
            rates.join(","),
            "--sweep-duration".into(),
            format!("{}ms", (p.sweep_duration_s * 1e3).round() as u64),
        ]);
    }
    a
}

/// Runs one row's worker process and reads its report; `go_worker` is the built client-go
/// worker, for the Go rows.
fn run_worker(
    row: &StoreRow,
    go_worker: Option<&Path>,
    params: &StoreParams,
    out_dir: &Path,
    bar: &indicatif::ProgressBar,
) -> Result<StoreRowReport, String> {
    let program = match &row.runner {
        Runner::InProcess(_) => {
            std::env::current_exe().map_err(|e| format!("finding own executable: {e}"))?
        }
        Runner::ClientGo => go_worker
            .ok_or_else(|| format!("{}: the client-go worker was not built", row.name))?
            .to_path_buf(),
        Runner::Program(path) => path.clone(),
    };
    let out = out_dir.join(format!(".worker-{}.json", row.name));
    let mut cmd = Command::new(program);
    cmd.args(worker_args_for(params, matches!(row.runner, Runner::InProcess(_))))
        .args(["--worker", &row.name])
        .arg("--worker-out")
        .arg(&out);
    let mut report: StoreRowReport = run_child(cmd, &out, &row.name, bar)?;
    report.name.clone_from(&row.name);
    Ok(report)
}

/// Writes the plots: the staleness CDF and the queue depth of `first_run` (one run's curves, with
/// that run's p99 and maximum in the legend, so that legend and curve agree), and the sweep's
/// points from `report` (the median of the runs).
fn write_plots(out: &Path, report: &StoreReport, first_run: &StoreReport, repeat: usize) {
    let p = &report.params;
    let readers = match p.reader_pacing.rate() {
        Some(rate) => format!("{} readers {} at {rate} reads/s", p.readers, p.placement.name()),
        None => format!("{} readers {}", p.readers, p.placement.name()),
    };
    let subtitle = format!("{} pods, {readers}, {}/s", p.objects, p.rate);
    let mut written = Vec::new();
    if p.open_loop {
        let run_subtitle = plot::first_run_subtitle(&subtitle, repeat);
        let rows: Vec<PlotRow<'_>> = first_run
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
        match plot::write_plots(out, &rows, &run_subtitle) {
            Ok(files) => written.extend(files),
            Err(e) => eprintln!("warning: plots not written: {e}"),
        }
    }
    if !p.sweep.is_empty() {
        let lines: Vec<SweepLine<'_>> = report
            .rows
            .iter()
            .map(|r| SweepLine {
                name: &r.name,
                points: r
                    .sweep
                    .iter()
                    .map(|s| (s.rate as f64, s.staleness_us.p99 as f64, s.queue_depth_max as f64))
                    .collect(),
            })
            .collect();
        let subtitle = format!("{} pods, {readers}", p.objects);
        match plot::write_sweep_plots(out, &lines, &subtitle) {
            Ok(files) => written.extend(files),
            Err(e) => eprintln!("warning: sweep plots not written: {e}"),
        }
    }
    for f in written {
        println!("wrote {}", f.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::worker::DEFAULT_REST;

    fn row(name: &str, digest: &str) -> StoreRowReport {
        StoreRowReport {
            name: name.into(),
            workload_digest: digest.into(),
            ..StoreRowReport::default()
        }
    }

    #[test]
    fn a_run_whose_rows_applied_different_workloads_is_refused() {
        let same = [row("snapshot", "00000000000000aa"), row("client-go", "00000000000000aa")];
        assert!(check_workloads(&same).is_ok());
        let differ = [row("snapshot", "00000000000000aa"), row("client-go", "00000000000000bb")];
        let err = check_workloads(&differ).unwrap_err();
        assert!(
            err.contains("snapshot 00000000000000aa") && err.contains("client-go 00000000000000bb"),
            "{err}"
        );
        let missing = [row("snapshot", "00000000000000aa"), row("client-go", "")];
        assert!(
            check_workloads(&missing)
                .unwrap_err()
                .contains("client-go reported no workload digest")
        );
    }

    /// `store` with `args`, as the command line parses it.
    fn parse(args: &[&str]) -> Result<StoreArgs, clap::Error> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            store: StoreArgs,
        }
        let args = std::iter::once("store").chain(args.iter().copied());
        <Cli as clap::Parser>::try_parse_from(args).map(|cli| cli.store)
    }

    #[test]
    fn readers_warm_up_two_seconds_by_default_half_a_second_when_quick_and_every_worker_is_told() {
        let warmup = |flags: &[&str]| parse(flags).expect("valid flags").params().reader_warmup_s;
        assert_eq!(warmup(&[]), 2.0);
        assert_eq!(warmup(&["--quick"]), 0.5);
        assert_eq!(warmup(&["--reader-warmup", "0s"]), 0.0);
        assert!(parse(&["--reader-warmup", "a while"]).is_err(), "a warm-up is a duration");
        let p = parse(&["--reader-warmup", "1500ms"]).expect("valid flags").params();
        for in_process in [true, false] {
            let args = worker_args_for(&p, in_process);
            let at = args.iter().position(|a| a == "--reader-warmup").expect("passed on");
            assert_eq!(args[at + 1], "1500ms", "in process: {in_process}");
        }
    }

    #[test]
    fn open_loop_updates_are_built_at_their_slots_by_default_and_every_worker_is_told() {
        let mode = |flags: &[&str]| parse(flags).expect("valid flags").params().open_loop_updates;
        assert_eq!(mode(&[]), OpenLoopUpdates::AtSlot);
        assert_eq!(mode(&["--quick"]), OpenLoopUpdates::AtSlot);
        assert_eq!(mode(&["--open-loop-updates", "prebuilt"]), OpenLoopUpdates::Prebuilt);
        assert!(parse(&["--open-loop-updates", "later"]).is_err(), "an unknown source is refused");
        for (flags, want) in
            [(&[][..], "at-slot"), (&["--open-loop-updates", "prebuilt"][..], "prebuilt")]
        {
            let p = parse(flags).expect("valid flags").params();
            for in_process in [true, false] {
                let args = worker_args_for(&p, in_process);
                let at = args.iter().position(|a| a == "--open-loop-updates").expect("passed on");
                assert_eq!(args[at + 1], want, "in process: {in_process}");
            }
        }
        // A report from before the field measured with pools.
        let old: StoreParams = serde_json::from_value(serde_json::json!({
            "objects": 1, "nodes": 1, "readers": 0, "duration_s": 1.0, "rate": 1,
            "updates": 1, "open_loop": true
        }))
        .expect("an old report's parameters parse");
        assert_eq!(old.open_loop_updates, OpenLoopUpdates::Prebuilt);
    }

    #[test]
    fn writer_priority_reaches_the_in_process_workers_only() {
        let p = parse(&["--writer-priority", "realtime"]).expect("valid flags").params();
        let args = worker_args_for(&p, true);
        let at = args.iter().position(|a| a == "--writer-priority").expect("passed on");
        assert_eq!(args[at + 1], "realtime");
        assert!(
            !worker_args_for(&p, false).iter().any(|a| a == "--writer-priority"),
            "the Go worker defines no such flag"
        );
        let normal = parse(&[]).expect("valid flags").params();
        assert!(!worker_args_for(&normal, true).iter().any(|a| a == "--writer-priority"));
    }

    #[test]
    fn rows_rest_fifteen_seconds_by_default_none_when_quick_and_as_long_as_asked() {
        let rest = |flags: &[&str]| parse(flags).expect("valid flags").params().rest_s;
        assert_eq!(rest(&[]), DEFAULT_REST.as_secs_f64());
        assert_eq!(DEFAULT_REST, Duration::from_secs(15));
        assert_eq!(rest(&["--quick"]), 0.0);
        assert_eq!(rest(&["--rest", "2s"]), 2.0);
        assert_eq!(rest(&["--quick", "--rest", "500ms"]), 0.5);
        assert!(parse(&["--rest", "soon"]).is_err(), "a rest is a duration");
    }

    #[test]
    fn sweep_points_last_twenty_seconds_unless_asked_or_quick() {
        let len = |flags: &[&str]| parse(flags).expect("valid flags").params().sweep_duration_s;
        assert_eq!(len(&["--sweep", "5000"]), 20.0);
        assert_eq!(len(&["--sweep", "5000", "--sweep-duration", "5s"]), 5.0);
        assert_eq!(len(&["--quick", "--sweep", "5000"]), 1.0);
    }

    #[test]
    fn workers_get_resolved_values_placement_and_sweep_but_never_quick() {
        let p = parse(&["--quick", "--sweep", "5000,20000", "--sweep-duration", "2s"])
            .expect("valid flags")
            .params();
        let flags = worker_args(&p);
        assert!(!flags.iter().any(|f| f == "--quick"));
        let after = |flag: &str| {
            flags.iter().position(|f| f == flag).map(|i| flags[i + 1].clone()).unwrap_or_default()
        };
        assert_eq!(after("--objects"), "5000");
        assert_eq!(after("--updates"), "20000");
        assert_eq!(after("--placement"), "unpinned");
        assert_eq!(after("--sweep"), "5000,20000");
        assert_eq!(after("--sweep-duration"), "1000ms", "quick caps sweep points at 1 s");
        assert!(!flags.iter().any(|f| f == "--reclaim-priority"), "normal is the default");
    }

    #[test]
    fn workers_get_the_reclaimers_priority_and_parse_it_back() {
        let p = parse(&["--reclaim-priority", "idle"]).expect("valid flags").params();
        assert_eq!(p.reclaim_priority, ReclaimerPriority::Idle);
        let flags = worker_args(&p);
        let i = flags.iter().position(|f| f == "--reclaim-priority").expect("passed to workers");
        assert_eq!(flags[i + 1], "idle");
        // The first argument is the subcommand's name.
        let worker: Vec<&str> = flags.iter().skip(1).map(String::as_str).collect();
        let back = parse(&worker).expect("workers parse it").params();
        assert_eq!(back.reclaim_priority, ReclaimerPriority::Idle);
        assert_eq!(worker_args(&back), flags, "a worker's own arguments round-trip");
        assert!(parse(&["--reclaim-priority", "low"]).is_err(), "unknown values are refused");
        // The Go worker gets everything else, and not the flag it does not define.
        let go = worker_args_for(&p, false);
        assert!(!go.iter().any(|f| f == "--reclaim-priority" || f == "idle"), "{go:?}");
        assert_eq!(go.len(), flags.len() - 2);
        assert_eq!(worker_args_for(&p, true), flags);
    }

    #[test]
    fn workers_get_the_informers_processing_placement_and_parse_it_back() {
        let default = parse(&[]).expect("valid flags").params();
        assert_eq!(default.informer_processing, InformerProcessing::Runtime);
        assert!(!worker_args(&default).iter().any(|f| f == "--informer-processing"));
        let p = parse(&["--informer-processing", "thread"]).expect("valid flags").params();
        let flags = worker_args(&p);
        let i = flags.iter().position(|f| f == "--informer-processing").expect("passed on");
        assert_eq!(flags[i + 1], "thread");
        let worker: Vec<&str> = flags.iter().skip(1).map(String::as_str).collect();
        let back = parse(&worker).expect("workers parse it").params();
        assert_eq!(back.informer_processing, InformerProcessing::Thread);
        assert_eq!(
            back.informer_processing.informer(),
            snapinformer_core::Processing::DedicatedThread
        );
        assert!(parse(&["--informer-processing", "own"]).is_err(), "unknown values are refused");
        let go = worker_args_for(&p, false);
        assert!(!go.iter().any(|f| f == "--informer-processing"), "the Go worker has no such flag");
    }

    #[test]
    fn workers_get_where_the_informers_handler_runs_and_parse_it_back() {
        let default = parse(&[]).expect("valid flags").params();
        assert_eq!(default.informer_handler, InformerHandler::Thread);
        assert!(!worker_args(&default).iter().any(|f| f == "--informer-handler"));
        let p = parse(&["--informer-handler", "task"]).expect("valid flags").params();
        let flags = worker_args(&p);
        let i = flags.iter().position(|f| f == "--informer-handler").expect("passed on");
        assert_eq!(flags[i + 1], "task");
        let worker: Vec<&str> = flags.iter().skip(1).map(String::as_str).collect();
        let back = parse(&worker).expect("workers parse it").params();
        assert_eq!(back.informer_handler, InformerHandler::Task);
        assert_eq!(back.informer_handler.execution(), snapinformer_core::HandlerExecution::Task);
        assert!(parse(&["--informer-handler", "fiber"]).is_err(), "unknown values are refused");
        let go = worker_args_for(&p, false);
        assert!(!go.iter().any(|f| f == "--informer-handler"), "the Go worker has no such flag");
    }

    #[test]
    fn workers_get_the_informers_batch_window_and_parse_it_back() {
        let default = parse(&[]).expect("valid flags").params();
        assert_eq!(default.informer_batch_window_s, None, "the informer's own default");
        assert!(!worker_args(&default).iter().any(|f| f == "--informer-batch-window"));
        for (given, secs) in [("1500us", 0.0015), ("0s", 0.0)] {
            let p = parse(&["--informer-batch-window", given]).expect("valid flags").params();
            assert_eq!(p.informer_batch_window_s, Some(secs));
            let flags = worker_args(&p);
            let i = flags.iter().position(|f| f == "--informer-batch-window").expect("passed on");
            let worker: Vec<&str> = flags.iter().skip(1).map(String::as_str).collect();
            let back = parse(&worker).expect("workers parse it").params();
            assert_eq!(back.informer_batch_window_s, Some(secs), "{}", flags[i + 1]);
        }
        let p = parse(&["--informer-batch-window", "1500us"]).expect("valid flags").params();
        assert!(parse(&["--informer-batch-window", "soon"]).is_err(), "not a duration: refused");
        let go = worker_args_for(&p, false);
        assert!(
            !go.iter().any(|f| f == "--informer-batch-window"),
            "the Go worker has no such flag"
        );
    }

    #[test]
    fn every_worker_gets_the_reader_rate_and_parses_it_back_and_bad_rates_are_refused() {
        let default = parse(&[]).expect("valid flags").params();
        assert_eq!(
            default.reader_pacing,
            Pacing::Rate { per_s: default.readers as f64 },
            "one read a second per reader unless asked"
        );
        let quick = parse(&["--quick"]).expect("valid flags").params();
        assert_eq!(quick.reader_pacing, Pacing::Rate { per_s: quick.readers as f64 });
        let fewer = parse(&["--readers", "3"]).expect("valid flags").params();
        assert_eq!(fewer.reader_pacing, Pacing::Rate { per_s: 3.0 }, "follows --readers");
        // What each worker (Rust in process, Go) is passed, and what a Rust worker reads back.
        let passed_on = |p: &StoreParams| -> Vec<(String, Pacing)> {
            [true, false]
                .into_iter()
                .map(|in_process| {
                    let flags = worker_args_for(p, in_process);
                    let i = flags.iter().position(|f| f == "--reader-rate").expect("passed on");
                    let worker: Vec<&str> = flags.iter().skip(1).map(String::as_str).collect();
                    let back = parse(&worker).expect("workers parse it").params();
                    (flags[i + 1].clone(), back.reader_pacing)
                })
                .collect()
        };
        for duty in ["0", "duty", "Duty"] {
            let p = parse(&["--reader-rate", duty]).expect("valid").params();
            assert_eq!(p.reader_pacing, Pacing::Duty, "{duty}");
            for (flag, back) in passed_on(&p) {
                assert_eq!(flag, "0", "duty pacing is 0 to both workers");
                assert_eq!(back, Pacing::Duty, "not the worker's own default");
            }
        }
        let p = parse(&["--reader-rate", "12.5"]).expect("valid flags").params();
        assert_eq!(p.reader_pacing, Pacing::Rate { per_s: 12.5 });
        for (flag, back) in passed_on(&p) {
            assert_eq!(flag, "12.5", "the Go worker gets it too");
            assert_eq!(back, p.reader_pacing);
        }
        for bad in ["-1", "fast", "inf", "NaN"] {
            let flag = format!("--reader-rate={bad}");
            let err = parse(&[&flag]).expect_err("refused").to_string();
            assert!(err.contains("operations a second"), "{bad}: {err}");
        }
    }
}
