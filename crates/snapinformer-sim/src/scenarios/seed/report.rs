//! The `seed` report: per row and mode, the targets, the like-for-like comparisons and the table.

use std::{collections::BTreeMap, fmt::Write as _};

use super::{KCM_ROW, Mode, SeedParams, cluster::StreamFill, pipeline::MAX_BATCH};
use crate::harness::{
    heap::MemoryTrace,
    repeat::RepeatInfo,
    report::{Environment, fmt_us},
    stats::Summary,
};
use crate::scenarios::kcm::report::{ClientCount, QueueFigures};

/// What the in-process cluster model's stream filled its slots with (a slot delivers the oldest
/// undelivered write, else the start of a pod whose startup delay has passed, else a refresh of
/// a running pod's status, so that the stream keeps its rate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamEvents {
    /// The controllers' writes (creates, updates, deletes).
    pub writes: u64,
    /// Pods started (Pending to Running).
    pub starts: u64,
    /// Refreshes of running pods: slots the controllers' writes and the starts left free.
    pub refreshes: u64,
    /// Slots with nothing to deliver.
    pub idle: u64,
}

/// Everything measured for one row in one mode.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SeedRowReport {
    /// Row name (`snapshot+ryw`, `locked`, ...).
    pub name: String,
    /// The cache under test.
    #[serde(alias = "backend")]
    pub cache: String,
    /// Whether read-your-writes was on.
    pub read_your_writes: bool,
    /// Deltas applied per second of processing time (apply, publish, hand to the handlers;
    /// lock waits included).
    pub apply_per_s: f64,
    /// Staleness, microseconds: in process from each event's scheduled slot in the cluster
    /// model's stream to its visibility to the controllers; over HTTP from its receipt (the
    /// server's watch has no schedule).
    pub staleness_us: Summary,
    /// Staleness from each event's entry into the queue, microseconds.
    #[serde(default)]
    pub staleness_from_queue_us: Summary,
    /// inproc: how late the cluster model's stream delivered events after their scheduled
    /// slots, microseconds (it shares the cores with everything measured).
    #[serde(default)]
    pub stream_lateness_us: Summary,
    /// inproc: the stream's time per slot (building and delivering one event), microseconds.
    #[serde(default)]
    pub stream_slot_us: Summary,
    /// inproc: the scheduling the stream ran with (`realtime`, or `normal` and why).
    #[serde(default)]
    pub stream_priority: String,
    /// inproc: CPU seconds the stream thread used (taken from the cores everything measured
    /// shares).
    #[serde(default)]
    pub stream_cpu_s: f64,
    /// CPU seconds each group of the worker's threads used while the controllers ran (from
    /// their start to convergence or the time limit), by thread name without its number
    /// (`controller`, `watch-stream`, `informer`, `handlers`, `applier`, the store's
    /// reclaimer...): where the two cores went.
    #[serde(default)]
    pub cpu_by_thread_s: std::collections::BTreeMap<String, f64>,
    /// Of that CPU, the seconds the whole process spent in the kernel over the same interval
    /// (`/proc/self/stat`): mostly first touches of fresh memory, where the machine charges for
    /// them (see `--rest`).
    #[serde(default)]
    pub kernel_cpu_s: f64,
    /// Minor page faults of the process over the same interval (a transparent huge page counts
    /// once).
    #[serde(default)]
    pub minor_faults: u64,
    /// Largest queue depth (deltas queued after a pop, plus the popped batch).
    pub queue_depth_max: u64,
    /// Queue depth when the row ended.
    pub queue_depth_end: u64,
    /// inproc: the most writes waiting in the cluster model for delivery (the watch's send
    /// buffer; large when writes come faster than the stream rate, or the stream thread lacks
    /// CPU).
    pub undelivered_max: u64,
    /// inproc: the most events the stream delivered at once after waking up late.
    pub stream_burst_max: u64,
    /// inproc: what the cluster model's stream delivered on schedule, slot by slot.
    #[serde(default)]
    pub stream_events: StreamEvents,
    /// Pods rebuilt in arenas during the row (`--pod-arena`; 0 without it).
    #[serde(default)]
    pub arena_objects: u64,
    /// Namespace list latency seen by the controllers, microseconds.
    pub list_us: Summary,
    /// Index lookup latency seen by the controllers, microseconds.
    pub index_us: Summary,
    /// Peak heap of the worker process (exact, from the allocator's count).
    pub peak_heap_bytes: u64,
    /// Peak resident set size of the worker process.
    pub rss_bytes: u64,
    /// Heap and RSS sampled through the row.
    #[serde(default)]
    pub memory_trace: MemoryTrace,
    /// Creates answered 409 AlreadyExists: decisions made on a stale cache (the runtime's
    /// count of both controllers' writes).
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
    /// Writes that failed otherwise than with 409 AlreadyExists or 404 Not Found (status
    /// writes included).
    pub write_errors: u64,
    /// Reconciles that read the cache and acted on it (not put off by expectations).
    pub syncs: u64,
    /// Syncs that failed (a write failed) and were queued again with backoff.
    #[serde(default)]
    pub failed_syncs: u64,
    /// Reconciles that waited for the cache to show their key's last writes (the runtime's
    /// read-your-writes waits).
    pub ryw_deferrals: u64,
    /// Read-your-writes waits that gave up after the runtime's timeout (the reconcile then ran,
    /// its expectations still guarding it).
    #[serde(default)]
    pub ryw_timeouts: u64,
    /// Reconciles put off because the key's own creates and deletes had not all come back
    /// through the cache (the runtime's expectations; rows with read-your-writes).
    #[serde(default)]
    pub expectation_deferrals: u64,
    /// Deep copies the cache made because an object it was handed was shared (0 unless the
    /// harness shares objects with a cache that takes them by value).
    #[serde(default)]
    pub extra_copies: u64,
    /// Pods in the cache at the end, after it drained.
    pub cache_pods: u64,
    /// Pods in the cluster at the end.
    pub cluster_pods: u64,
    /// `(seconds since the controllers started, queue depth)` samples.
    pub depth_series: Vec<(f64, u64)>,
    /// `(staleness us, cumulative fraction)` points.
    pub staleness_cdf: Vec<(u64, f64)>,
    /// real mode: what the server's side counted (the source of this row's 409s, duplicates
    /// and time to all Running), and the controllers' own counts beside it.
    #[serde(default)]
    pub server: Option<ServerFigures>,
    /// How fast the machine was just before the row's worker started, measured in the parent
    /// with the same fixed work for every row (`None` in reports written before 2026-12-08).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_speed: Option<crate::harness::speed::MachineSpeed>,
}

/// What a real-mode row counted from kube-apiserver's side: its `/metrics`, its audit log and
/// a watch of its pods, the same way for every row.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ServerFigures {
    /// The audit-log clients whose requests are the row's controllers' (`snapinformer-seed`;
    /// `statefulset-controller` and `daemon-set-controller` for kube-controller-manager).
    pub controller_clients: Vec<String>,
    /// Every 409 the server answered (`apiserver_request_total{code="409"}`, any client), by
    /// `VERB resource`.
    pub conflicts_409_by_request: BTreeMap<String, u64>,
    /// 409s by client, verb and resource (audit log).
    pub conflicts_409_by_client: Vec<ClientCount>,
    /// Pods the controllers created (201 answers to their pod creates, audit log).
    pub pod_creates: u64,
    /// Pod creates of the controllers answered otherwise than 201 or 409 (audit log).
    pub pod_create_failures: u64,
    /// Seconds from the workload's creation until the first StatefulSet pod existed.
    pub first_pod_s: Option<f64>,
    /// Largest number of daemon pods beyond one per node at one time (pod watch).
    pub extra_daemon_pods_peak: u64,
    /// Seconds `scripts/real-cluster start` took.
    pub control_plane_start_s: f64,
    /// Our rows: the 409s the controllers' runtime counted itself.
    pub client_conflicts_409: Option<u64>,
    /// Our rows: duplicate daemon pods as the controllers counted them.
    pub client_duplicate_daemon_pods: Option<u64>,
    /// Our rows: seconds from the controllers' start until their cache showed every pod
    /// Running.
    pub client_time_to_all_running_s: Option<f64>,
    /// The kube-controller-manager row: its own figures.
    pub kcm: Option<KcmFigures>,
}

/// The kube-controller-manager row's figures, from its `/metrics` and `/proc`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct KcmFigures {
    /// Its StatefulSet and DaemonSet work queues.
    pub queues: Vec<QueueFigures>,
    /// Largest `informer_queued_items{resource="pods"}` sampled (its pod informer's FIFO).
    pub informer_queued_pods_max: u64,
    /// Syncs skipped by client-go's read-your-writes, by metric name.
    pub stale_sync_skips: BTreeMap<String, u64>,
    /// Peak resident set (`VmHWM`), bytes.
    pub rss_peak_bytes: u64,
    /// Largest sampled `go_memstats_heap_alloc_bytes`.
    pub heap_peak_bytes: u64,
    /// CPU time, seconds.
    pub cpu_s: f64,
}

/// The report of every row of one mode.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ModeReport {
    /// `http` or `inproc`.
    pub mode: Mode,
    /// One entry per row.
    #[serde(alias = "backends")]
    pub rows: Vec<SeedRowReport>,
    /// The targets checked on this mode.
    pub targets: Vec<SeedTarget>,
    /// The order the rows ran in, in a run's own report (`rows` stays in `--rows` order);
    /// empty in the median of the runs (each run's file has its own) and in reports written
    /// before 2026-12-07.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_order: Vec<String>,
}

/// The whole `seed` report (one per run under `runs/`, the median as `report.json`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SeedReport {
    /// `"seed"`.
    pub scenario: String,
    /// Parameters.
    pub params: SeedParams,
    /// Where and how it ran.
    pub environment: Environment,
    /// One report per mode.
    pub modes: Vec<ModeReport>,
    /// For the median of repeated runs: the runs and every figure's range.
    #[serde(default)]
    pub repeat: Option<RepeatInfo>,
}

/// One target or comparison, as measured.
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

/// Our read-your-writes row, against which the baselines' read-your-writes rows are compared.
pub const HEADLINE: &str = "snapshot-bg+ryw";

/// The targets for one mode, and the like-for-like comparisons: our `+ryw` row against each
/// baseline's `+ryw` row (where we win, and where we do not).
pub fn targets(mode: Mode, rows: &[SeedRowReport]) -> Vec<SeedTarget> {
    let mut out = Vec::new();
    let find = |name: &str| rows.iter().find(|r| r.name == name);
    for r in rows.iter().filter(|r| r.name != KCM_ROW) {
        out.push(check(
            &format!("{}: the cache equals the cluster once drained", r.name),
            format!("{} cached, {} in the cluster", r.cache_pods, r.cluster_pods),
            "equal".into(),
            r.cache_pods == r.cluster_pods,
        ));
    }
    for r in rows.iter().filter(|r| r.read_your_writes) {
        out.push(check(
            &format!("{}: zero 409 conflicts and zero duplicate daemon pods", r.name),
            format!("{} conflicts, {} duplicates", r.conflicts_409, r.duplicate_daemon_pods),
            "0 and 0".into(),
            r.conflicts_409 == 0 && r.duplicate_daemon_pods == 0,
        ));
    }
    if let Some(ours) = find(HEADLINE) {
        out.push(check(
            &format!("{HEADLINE}: every pod Running within the time limit"),
            ours.time_to_all_running_s.map_or("not converged".into(), |t| format!("{t:.1} s")),
            "converged".into(),
            ours.time_to_all_running_s.is_some(),
        ));
        // A bounded queue: what is left at the end is no more than one batch's worth.
        out.push(check(
            &format!("{HEADLINE}: queue depth bounded (no backlog at the end)"),
            format!("max {}, end {}", ours.queue_depth_max, ours.queue_depth_end),
            format!("end <= {MAX_BATCH}"),
            ours.queue_depth_end <= MAX_BATCH as u64,
        ));
        if mode == Mode::Inproc {
            out.push(check(
                &format!("{HEADLINE}: staleness p99 under 1 ms (inproc, from scheduled slots)"),
                format!("{} us", ours.staleness_us.p99),
                "< 1000 us".into(),
                ours.staleness_us.p99 < 1000,
            ));
        }
        for base in rows.iter().filter(|r| r.read_your_writes && r.name != HEADLINE) {
            out.extend(compare(ours, base));
        }
        if let Some(kcm) = find(KCM_ROW) {
            out.extend(compare_kcm(ours, kcm));
        }
    }
    out
}

/// Our `+ryw` row against the real kube-controller-manager on the same real control plane,
/// on what both are counted by from the server's side.
fn compare_kcm(ours: &SeedRowReport, kcm: &SeedRowReport) -> Vec<SeedTarget> {
    let vs = format!("{} vs {KCM_ROW}", ours.name);
    let time = |r: &SeedRowReport| r.time_to_all_running_s.unwrap_or(f64::INFINITY);
    let secs = |r: &SeedRowReport| {
        r.time_to_all_running_s.map_or("never".to_owned(), |t| format!("{t:.1} s"))
    };
    vec![
        check(
            &format!("{vs}: 409s (server side)"),
            format!("{} vs {}", ours.conflicts_409, kcm.conflicts_409),
            "ours not more".into(),
            ours.conflicts_409 <= kcm.conflicts_409,
        ),
        check(
            &format!("{vs}: duplicate daemon pods (server side)"),
            format!("{} vs {}", ours.duplicate_daemon_pods, kcm.duplicate_daemon_pods),
            "ours not more".into(),
            ours.duplicate_daemon_pods <= kcm.duplicate_daemon_pods,
        ),
        check(
            &format!("{vs}: time until every pod Running (server side)"),
            format!("{} vs {}", secs(ours), secs(kcm)),
            "ours not later".into(),
            time(ours) <= time(kcm),
        ),
    ]
}

/// Where our `+ryw` row wins against `base` (also `+ryw`): time to converge, staleness, queue,
/// memory. `pass` says whether ours is at least as good.
fn compare(ours: &SeedRowReport, base: &SeedRowReport) -> Vec<SeedTarget> {
    let vs = format!("{} vs {}", ours.name, base.name);
    let time = |r: &SeedRowReport| r.time_to_all_running_s.unwrap_or(f64::INFINITY);
    let secs = |r: &SeedRowReport| {
        r.time_to_all_running_s.map_or("never".to_owned(), |t| format!("{t:.1} s"))
    };
    let heap = |r: &SeedRowReport| r.peak_heap_bytes as f64 / (1024.0 * 1024.0);
    vec![
        check(
            &format!("{vs}: time until every pod Running"),
            format!("{} vs {}", secs(ours), secs(base)),
            "ours not later".into(),
            time(ours) <= time(base),
        ),
        check(
            &format!("{vs}: staleness p99"),
            format!(
                "{} vs {} ({:.1}x lower)",
                fmt_us(ours.staleness_us.p99),
                fmt_us(base.staleness_us.p99),
                base.staleness_us.p99 as f64 / ours.staleness_us.p99.max(1) as f64
            ),
            "ours not higher".into(),
            ours.staleness_us.p99 <= base.staleness_us.p99,
        ),
        check(
            &format!("{vs}: queue depth max"),
            format!("{} vs {}", ours.queue_depth_max, base.queue_depth_max),
            "ours not higher".into(),
            ours.queue_depth_max <= base.queue_depth_max,
        ),
        check(
            &format!("{vs}: peak heap"),
            format!("{:.0} MiB vs {:.0} MiB", heap(ours), heap(base)),
            "ours not higher".into(),
            ours.peak_heap_bytes <= base.peak_heap_bytes,
        ),
    ]
}

/// A figure with its range across runs when there is one.
fn ranged(text: String, range: Option<(f64, f64)>, fmt: impl Fn(f64) -> String) -> String {
    match range {
        Some((lo, hi)) if lo != hi => format!("{text} [{}-{}]", fmt(lo), fmt(hi)),
        _ => text,
    }
}

/// The side-by-side table of mode number `m` of `report`.
pub fn table(report: &SeedReport, m: usize) -> String {
    let mode = &report.modes[m];
    let spread = report.repeat.as_ref().map(|r| &r.spread);
    let range =
        |i: usize, path: &str| spread.and_then(|s| s.range(&format!("/modes/{m}/rows/{i}{path}")));
    let us = |v: f64| fmt_us(v as u64);
    let int = |v: f64| format!("{v:.0}");
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<24} {:>10} {:>9} {:>22} {:>10} {:>9} {:>9} {:>9} {:>9} {:>16} {:>10} {:>20} {:>8} {:>8}",
        "row",
        "apply/s",
        "stale p50",
        "stale p99",
        "stale max",
        "from queue",
        "depth max",
        "list p99",
        "index p99",
        "409s",
        "dups",
        "all running",
        "heap MiB",
        "rss MiB"
    );
    for (i, r) in mode.rows.iter().enumerate() {
        // The controller manager's row has no cache of ours: those columns do not apply.
        let ours = r.name != KCM_ROW;
        let cell = |text: String| if ours { text } else { "-".to_owned() };
        let _ = writeln!(
            s,
            "{:<24} {:>10} {:>9} {:>22} {:>10} {:>9} {:>9} {:>9} {:>9} {:>16} {:>10} {:>20} {:>8} {:>8.0}",
            r.name,
            cell(format!("{:.0}", r.apply_per_s)),
            cell(fmt_us(r.staleness_us.p50)),
            cell(ranged(fmt_us(r.staleness_us.p99), range(i, "/staleness_us/p99"), us)),
            cell(fmt_us(r.staleness_us.max)),
            cell(fmt_us(r.staleness_from_queue_us.p99)),
            r.queue_depth_max,
            cell(fmt_us(r.list_us.p99)),
            cell(fmt_us(r.index_us.p99)),
            ranged(r.conflicts_409.to_string(), range(i, "/conflicts_409"), int),
            ranged(r.duplicate_daemon_pods.to_string(), range(i, "/duplicate_daemon_pods"), int),
            ranged(
                r.time_to_all_running_s.map_or("never".to_owned(), |t| format!("{t:.1}s")),
                range(i, "/time_to_all_running_s"),
                |v| format!("{v:.1}s")
            ),
            format!("{:.0}", r.peak_heap_bytes as f64 / (1024.0 * 1024.0)),
            r.rss_bytes as f64 / (1024.0 * 1024.0),
        );
    }
    if mode.mode == Mode::Real {
        let _ = writeln!(
            s,
            "  409s, dups and all running counted from kube-apiserver's side (audit log by user agent, pod watch; time from the workload's creation); kcm row: depth max = its pod informer's queued items, heap = Go heap"
        );
        for r in mode.rows.iter() {
            if let Some(server) = &r.server {
                s.push_str(&server_lines(r, server));
            }
        }
    }
    if mode.mode == Mode::Inproc {
        let late: Vec<String> = mode
            .rows
            .iter()
            .map(|r| {
                let e = r.stream_events;
                format!(
                    "{} {} ({:.1} s CPU, {}; {} writes, {} starts, {} refreshes)",
                    r.name,
                    fmt_us(r.stream_lateness_us.p99),
                    r.stream_cpu_s,
                    r.stream_priority,
                    e.writes,
                    e.starts,
                    e.refreshes
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "  cluster model's stream lateness p99 (included in staleness): {}",
            late.join(", ")
        );
    }
    for r in mode.rows.iter().filter(|r| !r.cpu_by_thread_s.is_empty()) {
        let _ = writeln!(s, "  CPU while the controllers ran, {}: {}", r.name, cpu_groups(r));
    }
    let machine: Vec<String> = mode
        .rows
        .iter()
        .filter_map(|r| {
            let m = r.machine_speed?;
            Some(format!("{} {:.2} µs / {:.1} ns", r.name, m.pod_build_ns / 1e3, m.memory_load_ns))
        })
        .collect();
    if !machine.is_empty() {
        let _ = writeln!(
            s,
            "  the machine before each row (the same fixed work in the parent: building one realistic pod / one load from memory): {}",
            machine.join(", ")
        );
    }
    for t in &mode.targets {
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

/// The server-side detail of one real-mode row.
fn server_lines(r: &SeedRowReport, server: &ServerFigures) -> String {
    let mut s = String::new();
    let by_client: Vec<String> = server
        .conflicts_409_by_client
        .iter()
        .map(|c| format!("{} {} {} {}", c.client, c.verb, c.resource, c.count))
        .collect();
    let secs = |t: Option<f64>| t.map_or("never".to_owned(), |t| format!("{t:.1}s"));
    let _ = writeln!(
        s,
        "  {}: 409s by client [{}], every 409 {:?}; pods created {} ({} failed); first pod {}; extra daemon pods peak {}; control plane started in {:.1}s",
        r.name,
        by_client.join(", "),
        server.conflicts_409_by_request,
        server.pod_creates,
        server.pod_create_failures,
        secs(server.first_pod_s),
        server.extra_daemon_pods_peak,
        server.control_plane_start_s
    );
    if let Some(c) = server.client_conflicts_409 {
        let _ = writeln!(
            s,
            "    the controllers' own count: 409s {c}, duplicates {}, all running in their cache {} after their start",
            server.client_duplicate_daemon_pods.unwrap_or(0),
            secs(server.client_time_to_all_running_s)
        );
    }
    if let Some(k) = &server.kcm {
        let queues: Vec<String> = k
            .queues
            .iter()
            .map(|q| {
                format!(
                    "{} depth max {} adds {} retries {}",
                    q.name, q.depth_max, q.adds, q.retries
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "    kcm: {}; pod informer queued max {}; stale-sync skips {:?}; peak RSS {:.0} MiB, Go heap max {:.0} MiB, CPU {:.1}s",
            queues.join("; "),
            k.informer_queued_pods_max,
            k.stale_sync_skips,
            k.rss_peak_bytes as f64 / 1048576.0,
            k.heap_peak_bytes as f64 / 1048576.0,
            k.cpu_s
        );
    }
    s
}

/// The staleness definition of `mode`, for titles.
pub fn staleness_basis(mode: Mode) -> &'static str {
    match mode {
        Mode::Inproc => "from the scheduled slot",
        Mode::Http | Mode::Real => "from receipt",
    }
}

/// A row's CPU by thread group, largest first, groups under 0.1 s left out: `controller 30.2 s,
/// watch-stream 20.1 s, ...`.
fn cpu_groups(r: &SeedRowReport) -> String {
    let mut groups: Vec<(&String, &f64)> =
        r.cpu_by_thread_s.iter().filter(|(_, s)| **s >= 0.1).collect();
    groups.sort_by(|a, b| b.1.total_cmp(a.1));
    let total: f64 = r.cpu_by_thread_s.values().sum();
    let parts: Vec<String> = groups.iter().map(|(g, s)| format!("{g} {s:.1} s")).collect();
    format!(
        "{total:.1} s in all, {:.1} s of it in the kernel ({} page faults): {}",
        r.kernel_cpu_s,
        r.minor_faults,
        parts.join(", ")
    )
}

/// Parameters line for the report's head.
pub fn describe(p: &SeedParams) -> String {
    format!(
        "seed: {} StatefulSets x {} replicas in one namespace + a DaemonSet on {} nodes; {} StatefulSet and {} DaemonSet workers, {}; set reads: {:?}, daemon reads: {:?}; inproc: {}/s, stream priority {:?}",
        p.sets,
        p.replicas,
        p.nodes,
        p.set_workers,
        p.daemon_workers,
        p.placement.name(),
        p.set_list,
        p.daemon_list,
        p.rate,
        p.stream_priority
    ) + &batch_windows(p)
        + match p.stream_fill {
            StreamFill::Refresh => "",
            StreamFill::Idle => "; slots without a write or a start left idle (no refreshes)",
        }
        + if p.pod_arena { "; every row's pods rebuilt in arenas as they arrive" } else { "" }
        + &format!("; {:.0} s rest before each row", p.rest_s)
        + &if p.prefault_gib > 0.0 {
            format!(
                "; {} GiB of heap prefaulted and freed memory kept in each worker (peak heap sampled every 100 ms; RSS includes it)",
                p.prefault_gib
            )
        } else {
            String::new()
        }
}

/// The batch windows: our informer's always (the one given, or the default when the report
/// records it), the baselines' when they have one.
fn batch_windows(p: &SeedParams) -> String {
    let ms = |s: f64| format!("{:.3} ms", s * 1e3);
    let mut out = String::new();
    match (p.informer_batch_window_s, p.informer_default_batch_window_s) {
        (Some(w), _) => out += &format!("; our informer's batch window {}", ms(w)),
        (None, Some(d)) => out += &format!("; our informer's batch window the default, {}", ms(d)),
        (None, None) => {}
    }
    if let Some(w) = p.baseline_batch_window_s.filter(|w| *w > 0.0) {
        out += &format!("; the baselines' batch window {} (a control: client-go has none)", ms(w));
    }
    out
}
