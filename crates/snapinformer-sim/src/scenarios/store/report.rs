//! The `store` report: the side-by-side tables, the targets, and `report.json`.

use std::fmt::Write as _;

use super::{
    OpenLoopUpdates, StoreParams, StoreRowReport,
    rows::{self, CLIENT_GO_INDEXER, Group, PAIRS, Pair},
    sweep,
};
use crate::{
    harness::{
        placement::{InformerHandler, InformerProcessing, ReclaimerPriority},
        repeat::RepeatInfo,
        report::{Environment, TargetCheck, fmt_us},
        stats::Summary,
    },
    rows::{CacheKind, lock::WaitTurns},
};

/// The whole `store` report as written to `report.json` (one per run under `runs/`, and the
/// median of the runs as `report.json`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoreReport {
    /// Always `"store"`.
    pub scenario: String,
    /// Parameters shared by every row.
    pub params: StoreParams,
    /// When and where it ran.
    pub environment: Environment,
    /// One entry per row.
    #[serde(alias = "backends")]
    pub rows: Vec<StoreRowReport>,
    /// The targets, computed from this report's figures; each names the pair of rows it
    /// compares.
    pub targets: Vec<TargetCheck>,
    /// How to read the report: visibility points, pairs, memory accounting.
    #[serde(default)]
    pub notes: Vec<String>,
    /// How the locked rows' two lock flavours treat a waiting reader, measured in the parent.
    #[serde(default)]
    pub lock_check: Option<LockCheck>,
    /// For the median of repeated runs: the runs and every figure's range.
    #[serde(default)]
    pub repeat: Option<RepeatInfo>,
    /// The order the rows ran in, in a run's own report (`rows` stays in `--rows` order);
    /// empty in the median of the runs and in reports written before 2026-12-07.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_order: Vec<String>,
    /// In the median of repeated runs: each run's `run_order`, in run order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_orders: Vec<Vec<String>>,
}

/// A writer taking the lock `turns` times for `hold_ms` each while a reader reads in a loop:
/// how many writer turns a read waited for, with Go's hand-off and with std's lock.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LockCheck {
    /// Writer turns.
    pub turns: u64,
    /// Milliseconds the writer holds the lock per turn.
    pub hold_ms: f64,
    /// `locked`, `locked-bg`, `locked-batch`: parking_lot with a fair (handing-off) unlock.
    pub hand_off: WaitTurns,
    /// `locked-std`: std's `RwLock`.
    pub std: WaitTurns,
}

fn find<'a>(r: &'a [StoreRowReport], name: &str) -> Option<&'a StoreRowReport> {
    r.iter().find(|b| b.name == name)
}

/// Heap peak of a row: the whole run's if the worker sampled it, else its memory phase's.
fn heap_peak(r: &StoreRowReport) -> u64 {
    if r.memory_trace.heap_peak_bytes > 0 {
        r.memory_trace.heap_peak_bytes
    } else {
        r.peak_heap_bytes
    }
}

/// Every target of a report:
/// - for each headline pair ([`PAIRS`]) whose rows both ran, the targets of our row
///   against the client-go row: staleness p99 at least 100x lower and under 1 ms, apply rate
///   with readers at least 1.0x, heap at most 1.0x, as structure per entry and as total heap
///   after the build (objects included). Where `client-go-indexer` did not run, the stores are
///   compared with the `locked` control instead, and the line says so;
/// - for our stores, the controls against `locked` and their own figures.
pub fn all_targets(r: &[StoreRowReport], open_loop: bool) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for pair in PAIRS {
        let anchor = if find(r, pair.anchor).is_some() {
            Some((pair.anchor, String::new()))
        } else if pair.anchor == CLIENT_GO_INDEXER && find(r, "locked").is_some() {
            Some(("locked", format!(" (control: {CLIENT_GO_INDEXER} did not run)")))
        } else {
            None
        };
        if let Some((anchor, why)) = anchor {
            let label = format!("[{}: {} vs {anchor}{why}]", pair.what, pair.ours);
            out.extend(pair_targets(r, &Pair { anchor, ..pair }, &label, open_loop));
        }
    }
    for row in r {
        if CacheKind::parse(&row.name).is_some_and(CacheKind::is_ours) {
            out.extend(control_targets(r, &row.name));
        }
    }
    out
}

fn check(target: String, measured: f64, bound: f64, higher_is_better: bool) -> TargetCheck {
    let met = if higher_is_better { measured >= bound } else { measured <= bound };
    TargetCheck { target, measured, bound, met }
}

/// The targets for one pair, each line prefixed with `label`.
fn pair_targets(
    r: &[StoreRowReport],
    pair: &Pair,
    label: &str,
    open_loop: bool,
) -> Vec<TargetCheck> {
    let (Some(o), Some(a)) = (find(r, pair.ours), find(r, pair.anchor)) else {
        return Vec::new();
    };
    let (ours, an) = (pair.ours, pair.anchor);
    let mut out = Vec::new();
    if open_loop {
        out.push(check(
            format!("{label} staleness p99, {an} / {ours} (>= 100x)"),
            a.staleness_us.p99 as f64 / o.staleness_us.p99.max(1) as f64,
            100.0,
            true,
        ));
        out.push(check(
            format!("{label} {ours} staleness p99 in us (< 1000)"),
            o.staleness_us.p99 as f64,
            1000.0,
            false,
        ));
    }
    out.push(check(
        format!("{label} apply/s with readers, {ours} / {an} (>= 1.0x)"),
        o.apply_per_s_with_readers / a.apply_per_s_with_readers.max(1e-9),
        1.0,
        true,
    ));
    if let (Some(of), Some(af)) =
        (o.apply_freed_per_s_with_readers, a.apply_freed_per_s_with_readers)
    {
        out.push(check(
            format!(
                "{label} apply/s with readers, each side's freeing of what it replaced counted, {ours} / {an} (>= 1.0x)"
            ),
            of / af.max(1e-9),
            1.0,
            true,
        ));
    }
    out.push(check(
        format!("{label} heap, structure bytes per entry, {ours} / {an} (<= 1.0x)"),
        o.memory.structure_per_entry_idle.max(0.0) / a.memory.structure_per_entry_idle.max(1.0),
        1.0,
        false,
    ));
    out.push(check(
        format!(
            "{label} heap, total after the build (objects + structure), {ours} / {an} (<= 1.0x)"
        ),
        o.memory.total_bytes as f64 / a.memory.total_bytes.max(1) as f64,
        1.0,
        false,
    ));
    out
}

/// Our store `ours` against the `locked` control and against itself.
fn control_targets(r: &[StoreRowReport], ours: &str) -> Vec<TargetCheck> {
    let Some(o) = find(r, ours) else { return Vec::new() };
    let label = format!("[control: {ours}]");
    let mut out = Vec::new();
    if let Some(l) = find(r, "locked") {
        out.push(check(
            format!("{label} apply/s without readers vs locked (>= 0.7x)"),
            o.apply_per_s / l.apply_per_s.max(1e-9),
            0.7,
            true,
        ));
        out.push(check(
            format!("{label} structure bytes/entry vs locked, idle (<= 1.5x)"),
            o.memory.structure_per_entry_idle / l.memory.structure_per_entry_idle.max(1.0),
            1.5,
            false,
        ));
        out.push(check(
            format!("{label} structure bytes/entry vs locked, reader holding (<= 1.5x)"),
            o.memory.structure_per_entry_holding / l.memory.structure_per_entry_holding.max(1.0),
            1.5,
            false,
        ));
    }
    out.push(check(
        format!("{label} apply/s with readers vs its own without (>= 0.9x)"),
        o.apply_per_s_with_readers / o.apply_per_s.max(1e-9),
        0.9,
        true,
    ));
    if let Some(c) = &o.read_costs {
        out.push(check(
            format!("{label} owner lookup of one owner's pods, owned, alone, us (< 20)"),
            c.owner_us,
            20.0,
            false,
        ));
    }
    out
}

/// The notes of a report: how to read its pairs, its visibility points and its memory figures.
pub fn notes(r: &[StoreRowReport], p: &StoreParams) -> Vec<String> {
    let reclaimer = match p.reclaim_priority {
        ReclaimerPriority::Normal => "a reclaimer thread",
        ReclaimerPriority::Idle => {
            "a reclaimer thread at idle priority (SCHED_IDLE, --reclaim-priority idle: it runs only when a core has nothing else to run)"
        }
    };
    let mut out = vec![
        format!(
            "Headline pairs, like against like: {}. A pipeline row's update is visible when its registered event handler receives it (source, queue, batched apply, publication and the hop to the handler's thread); a store row's when the store publishes it. The targets name the pair each line uses.",
            PAIRS
                .iter()
                .map(|p| format!("{} vs {} ({})", p.ours, p.anchor, p.what))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "Heap: the Rust rows count the bytes they asked the allocator for and have not freed; the Go rows count the live heap (runtime.GC(), then MemStats.HeapAlloc) in the memory phase, where each object counts at its size class. The Rust figures leave out mimalloc's rounding to its classes (four per doubling above 64 B: up to 25%, around 10% for sizes spread evenly), so a Rust / Go heap ratio is a lower bound. The peak heap of a Rust row is the allocator's exact peak; of a Go row the largest HeapAlloc sampled every 100 ms, garbage not yet collected included. Peak RSS is the kernel's high-water mark (VmHWM) or the largest 100 ms sample, for every row. Every heap figure includes the update pools the harness generates.".to_owned(),
        format!("Reclamation: the Go rows free superseded pods on the garbage collector's background workers; snapinformer (the store's default), snapshot-bg, snapshot-bg-covering and locked-bg free them on {reclaimer} whose backlog is bounded (beyond it the writer frees inline); the other Rust rows free them on the writer's thread."),
    ];
    if p.informer_handler == InformerHandler::Task {
        out.push("Informer handler: the informer rows run their visibility handler as a task on the informer's runtime (--informer-handler task, the handler option HandlerExecution::Task), not on a thread of its own; \"published -> handler\" is then the hop to that task.".to_owned());
    }
    if p.informer_processing == InformerProcessing::Thread {
        out.push("Informer processing: the informer rows run their processing loop on a thread of its own (--informer-processing thread, the informer's Processing::DedicatedThread), not as a task beside the reflector on their runtime.".to_owned());
    }
    out.push(match p.informer_batch_window_s {
        Some(w) if w <= 0.0 => "Informer batch window: none; the informer rows publish a batch as soon as their loop is free (--informer-batch-window 0).".to_owned(),
        Some(w) => format!("Informer batch window: the informer rows publish at most one batch per {:.3} ms while updates arrive during their batches, unless a batch is full (--informer-batch-window).", w * 1e3),
        None => format!("Informer batch window: the informer's default; the informer rows publish at most one batch per {:.3} ms while updates arrive during their batches, unless a batch is full.", snapinformer_core::DEFAULT_BATCH_WINDOW.as_secs_f64() * 1e3),
    });
    if p.open_loop || !p.sweep.is_empty() {
        out.push(open_loop_source_note(r, p.open_loop_updates));
    }
    let rust = r.iter().find(|b| rows::group(&b.name) != Group::Pipeline && b.go_runtime.is_none());
    let go = r.iter().find(|b| b.go_runtime.is_some());
    if let (Some(rs), Some(go)) = (rust, go) {
        out.push(format!(
            "Objects: a k8s_openapi Pod costs {:.1}x a Go v1.Pod in memory in this run ({} B against {} B per pod): a difference of the languages' types, not of the stores. So the heap target is checked twice, on the structure per entry (the store's own cost) and on the total (objects plus structure); both are shown.",
            rs.memory.bytes_per_object as f64 / go.memory.bytes_per_object.max(1) as f64,
            rs.memory.bytes_per_object,
            go.memory.bytes_per_object,
        ));
    } else {
        out.push("Objects: a k8s_openapi Pod costs more than twice a Go v1.Pod in memory (a difference of the languages' types, not of the stores), so the heap target is checked on the structure per entry and on the total; run the client-go rows to see the ratio.".to_owned());
    }
    out
}

/// How the open loop got its updates, with each row's cost of building one at its slot.
fn open_loop_source_note(r: &[StoreRowReport], mode: OpenLoopUpdates) -> String {
    match mode {
        OpenLoopUpdates::Prebuilt => "Open-loop updates: from a pool built before each phase (--open-loop-updates prebuilt). The pool is live heap until the phase ends, so a Go row's collector starts no cycle in the phase (its notes count them) while our rows' reclaimers free as they go: this leans the open loop's figures client-go's way.".to_owned(),
        OpenLoopUpdates::AtSlot => {
            let costs: Vec<String> = r
                .iter()
                .filter_map(|b| {
                    b.open_loop_build_us_per_update.map(|us| format!("{} {us:.1} us", b.name))
                })
                .collect();
            format!(
                "Open-loop updates: each built at its slot (--open-loop-updates at-slot) by the row's source, the pipeline rows' feeder or the store rows' writer, with the same generator in Rust and Go, as a reflector decodes each event: the phase allocates what a cluster's events would, so Go's collector runs in it (a Go row's notes count the cycles). Building one update took {}; it is part of each row's staleness.",
                if costs.is_empty() { "(not recorded)".to_owned() } else { costs.join(", ") }
            )
        }
    }
}

/// Heap per cached pod after the build (objects and structure), bytes.
pub fn heap_per_pod(r: &StoreRowReport, objects: usize) -> f64 {
    r.memory.total_bytes as f64 / objects.max(1) as f64
}

/// The compact cache's targets (issue 14): `snapshot-compact` against `snapshot` in the same
/// run, and against the `client-go` row's Go heap when that row ran. Empty unless both
/// `snapshot-compact` and `snapshot` ran.
pub fn compact_targets(r: &[StoreRowReport], objects: usize) -> Vec<TargetCheck> {
    const COMPACT: &str = "snapshot-compact";
    let (Some(c), Some(p)) = (find(r, COMPACT), find(r, "snapshot")) else {
        return Vec::new();
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
    let mut out = Vec::new();
    let mut push = |target: String, measured: f64, bound: f64, higher_is_better: bool| {
        let met = if higher_is_better { measured >= bound } else { measured <= bound };
        out.push(TargetCheck { target, measured, bound, met });
    };
    push(
        format!("{COMPACT} heap per cached pod vs snapshot (<= 0.3x)"),
        ratio(heap_per_pod(c, objects), heap_per_pod(p, objects)),
        0.3,
        false,
    );
    if let Some(g) = find(r, "client-go") {
        push(
            format!("{COMPACT} heap per cached pod vs client-go's Go heap (<= 0.5x)"),
            ratio(heap_per_pod(c, objects), heap_per_pod(g, objects)),
            0.5,
            false,
        );
    }
    if let (Some(cc), Some(pc)) = (&c.read_costs, &p.read_costs) {
        push(
            format!(
                "{COMPACT} owner lookup of one owner's pods, materialised, vs snapshot (<= 2x)"
            ),
            ratio(cc.owner_us, pc.owner_us),
            2.0,
            false,
        );
        if let (Some(cs), Some(ps)) = (cc.hot_scan_borrowed_us, pc.hot_scan_borrowed_us) {
            push(
                format!("{COMPACT} borrowed hot-field scan vs snapshot (<= 1.1x: as fast)"),
                ratio(cs, ps),
                1.1,
                false,
            );
        }
    }
    push(
        format!("{COMPACT} apply/s without readers vs snapshot, both inline (>= 2x)"),
        ratio(c.apply_per_s, p.apply_per_s),
        2.0,
        true,
    );
    out
}

fn mib(b: u64) -> String {
    format!("{:.0}", b as f64 / (1024.0 * 1024.0))
}

/// A figure with its range across runs when there is one: `60323 [57012-61204]`.
fn with_range(text: String, range: Option<(f64, f64)>, fmt: impl Fn(f64) -> String) -> String {
    match range {
        Some((lo, hi)) if lo != hi => format!("{text} [{}-{}]", fmt(lo), fmt(hi)),
        _ => text,
    }
}

/// The rows in report order, grouped: informer pipelines, stores alone, controls.
fn grouped(report: &StoreReport) -> Vec<(Group, Vec<(usize, &StoreRowReport)>)> {
    [Group::Pipeline, Group::Store, Group::Control]
        .into_iter()
        .map(|g| {
            let members: Vec<(usize, &StoreRowReport)> =
                report.rows.iter().enumerate().filter(|(_, r)| rows::group(&r.name) == g).collect();
            (g, members)
        })
        .filter(|(_, m)| !m.is_empty())
        .collect()
}

/// The side-by-side tables (figures by group, the headline pairs, Go runtime, read costs,
/// sweep), the targets and the notes.
pub fn table(report: &StoreReport) -> String {
    let mut s = String::new();
    let p = &report.params;
    let spread = report.repeat.as_ref().map(|r| &r.spread);
    let range = |i: usize, path: &str| spread.and_then(|sp| sp.range(&format!("/rows/{i}{path}")));
    let _ = writeln!(
        s,
        "store scenario: {} pods ({:?} profile, {} B as JSON), {} readers {} {} (warmed up {:.1} s before each phase), saturation {} updates, open loop {}/s for {:.0}s, allocator {}, {:.0} s rest before each row{}",
        p.objects,
        p.pod_profile,
        // The pods as JSON from a Rust row (Go's encoder also writes empty fields).
        report
            .rows
            .iter()
            .find(|b| b.go_runtime.is_none())
            .or(report.rows.first())
            .map(|b| b.memory.json_bytes_per_object)
            .unwrap_or(0),
        p.readers,
        p.placement.name(),
        p.reader_pacing.describe(),
        p.reader_warmup_s,
        p.updates,
        p.rate,
        p.duration_s,
        report.environment.allocator,
        p.rest_s,
        match &report.repeat {
            Some(r) if r.runs > 1 => {
                format!("; median of {} runs, [min-max] where runs differ", r.runs)
            }
            _ => String::new(),
        },
    );
    if report.run_orders.len() > 1 {
        let orders: Vec<String> = report.run_orders.iter().map(|o| o.join(", ")).collect();
        let _ = writeln!(s, "rows ran in this order, run by run: {}", orders.join("; "));
    }
    let header = format!(
        "{:<18} {:>24} {:>24} {:>30} {:>16} {:>15} {:>13} {:>15} {:>6} {:>9} {:>9} {:>9} {:>6} {:>6}",
        "row",
        "apply/s",
        "w/readers",
        "staleness p50/p99/max",
        "depth max/end",
        "list p50/p99",
        "index p50/p99",
        "nslist p50/p99",
        "B/pod",
        "heap MiB",
        "peak MiB",
        "rss MiB",
        "B/ent",
        "B/hold"
    );
    for (group, members) in grouped(report) {
        let _ = writeln!(s, "\n{}:", group.heading());
        let _ = writeln!(s, "{header}");
        for (i, b) in members {
            let int = |v: f64| format!("{v:.0}");
            let us = |v: f64| fmt_us(v as u64);
            let _ = writeln!(
                s,
                "{:<18} {:>24} {:>24} {:>30} {:>16} {:>15} {:>13} {:>15} {:>6} {:>9} {:>9} {:>9} {:>6.0} {:>6.0}",
                b.name,
                with_range(int(b.apply_per_s), range(i, "/apply_per_s"), int),
                with_range(
                    int(b.apply_per_s_with_readers),
                    range(i, "/apply_per_s_with_readers"),
                    int
                ),
                format!(
                    "{}/{}/{}",
                    fmt_us(b.staleness_us.p50),
                    with_range(fmt_us(b.staleness_us.p99), range(i, "/staleness_us/p99"), us),
                    fmt_us(b.staleness_us.max)
                ),
                format!("{}/{}", b.queue_depth_max, b.queue_depth_end),
                format!("{}/{}", fmt_us(b.list_us.p50), fmt_us(b.list_us.p99)),
                format!("{}/{}", fmt_us(b.index_us.p50), fmt_us(b.index_us.p99)),
                format!("{}/{}", fmt_us(b.ns_list_us.p50), fmt_us(b.ns_list_us.p99)),
                b.memory.bytes_per_object,
                mib(b.memory.total_bytes),
                mib(heap_peak(b)),
                mib(b.memory_trace.rss_peak_bytes.max(b.rss_bytes)),
                b.memory.structure_per_entry_idle,
                b.memory.structure_per_entry_holding,
            );
        }
    }
    pairs_table(&mut s, report);
    go_runtime_lines(&mut s, report);
    read_costs_table(&mut s, report);
    cpu_table(&mut s, report);
    freed_table(&mut s, report);
    open_loop_time_table(&mut s, report);
    pipeline_table(&mut s, report);
    sweep_table(&mut s, report);
    if let Some(c) = &report.lock_check {
        let _ = writeln!(
            s,
            "\nlock check ({} writer turns of {:.0} ms, one reader): a read waited at most {} turns with the hand-off ({} reads), {} with std's RwLock ({} reads)",
            c.turns,
            c.hold_ms,
            c.hand_off.max_turns,
            c.hand_off.reads,
            c.std.max_turns,
            c.std.reads
        );
    }
    if !report.targets.is_empty() {
        let _ = writeln!(s, "\ntargets (ratios from this report; [pair] = the rows compared):");
        for t in &report.targets {
            let _ = writeln!(
                s,
                "  [{}] {}: {:.2} (bound {})",
                if t.met { "met" } else { "MISSED" },
                t.target,
                t.measured,
                t.bound
            );
        }
    }
    if !report.notes.is_empty() {
        let _ = writeln!(s, "\nnotes:");
        for n in &report.notes {
            let _ = writeln!(s, "  - {n}");
        }
    }
    s
}

/// Ours against client-go, pair by pair: the headline ratios side by side.
fn pairs_table(s: &mut String, report: &StoreReport) {
    let present: Vec<(&Pair, &StoreRowReport, &StoreRowReport)> = PAIRS
        .iter()
        .filter_map(|p| Some((p, find(&report.rows, p.ours)?, find(&report.rows, p.anchor)?)))
        .collect();
    if present.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nheadline pairs (ours vs client-go; ratio = client-go / ours for staleness, ours / client-go otherwise):"
    );
    let _ = writeln!(
        s,
        "{:<20} {:<34} {:>26} {:>26} {:>20} {:>22} {:>22}",
        "pair",
        "rows",
        "staleness p99",
        "apply/s w/readers",
        "B/entry structure",
        "heap total MiB",
        "peak RSS MiB"
    );
    for (p, o, a) in present {
        let ratio = |x: f64, y: f64| if y > 0.0 { x / y } else { f64::NAN };
        let _ = writeln!(
            s,
            "{:<20} {:<34} {:>26} {:>26} {:>20} {:>22} {:>22}",
            p.what,
            format!("{} vs {}", p.ours, p.anchor),
            format!(
                "{} vs {} ({:.0}x)",
                fmt_us(o.staleness_us.p99),
                fmt_us(a.staleness_us.p99),
                ratio(a.staleness_us.p99 as f64, o.staleness_us.p99.max(1) as f64)
            ),
            format!(
                "{:.0} vs {:.0} ({:.2}x)",
                o.apply_per_s_with_readers,
                a.apply_per_s_with_readers,
                ratio(o.apply_per_s_with_readers, a.apply_per_s_with_readers)
            ),
            format!(
                "{:.0} vs {:.0} ({:.2}x)",
                o.memory.structure_per_entry_idle,
                a.memory.structure_per_entry_idle,
                ratio(o.memory.structure_per_entry_idle, a.memory.structure_per_entry_idle)
            ),
            format!(
                "{} vs {} ({:.2}x)",
                mib(o.memory.total_bytes),
                mib(a.memory.total_bytes),
                ratio(o.memory.total_bytes as f64, a.memory.total_bytes as f64)
            ),
            format!(
                "{} vs {} ({:.2}x)",
                mib(o.memory_trace.rss_peak_bytes),
                mib(a.memory_trace.rss_peak_bytes),
                ratio(o.memory_trace.rss_peak_bytes as f64, a.memory_trace.rss_peak_bytes as f64)
            ),
        );
    }
}

/// One line of Go runtime figures per Go row.
fn go_runtime_lines(s: &mut String, report: &StoreReport) {
    if report.rows.iter().all(|r| r.go_runtime.is_none()) {
        return;
    }
    let _ = writeln!(s, "\nGo runtime (the client-go rows):");
    for b in &report.rows {
        let Some(go) = &b.go_runtime else { continue };
        let _ = writeln!(
            s,
            "  {}: {} with client-go {}, GOMAXPROCS {}, GOGC {}; {} GCs ({} forced), {:.1} ms paused, GC CPU {:.1}%; peak heap sampled {} MiB (in use {}, live {}); placement: {}",
            b.name,
            go.go_version,
            go.client_go_version,
            go.gomaxprocs,
            if go.gogc.is_empty() { "100 (default)" } else { &go.gogc },
            go.gc_cycles,
            go.gc_forced_cycles,
            go.gc_pause_total_us as f64 / 1000.0,
            go.gc_cpu_fraction * 100.0,
            mib(go.peak_heap_alloc_bytes),
            mib(go.peak_heap_inuse_bytes),
            mib(go.peak_heap_live_bytes),
            go.placement,
        );
    }
}

fn opt_us(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.1}"))
}

fn read_costs_table(s: &mut String, report: &StoreReport) {
    if report.rows.iter().all(|r| r.read_costs.is_none()) {
        return;
    }
    let _ = writeln!(
        s,
        "\nreads alone (one thread, no writer; median us; owned = copied Arcs (Go: copied pointers), borrowed = ours only; hot scan = node and phase of every pod):"
    );
    let _ = writeln!(
        s,
        "{:<18} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>14} {:>14} {:>14} {:>10}",
        "row",
        "list",
        "list borr.",
        "nslist",
        "nslist borr.",
        "owner",
        "owner borr.",
        "hot scan borr.",
        "Arc clone ns",
        "ptr copy ns",
        "heap/pod B"
    );
    for r in &report.rows {
        let Some(c) = &r.read_costs else { continue };
        let _ = writeln!(
            s,
            "{:<18} {:>12.1} {:>12} {:>12.1} {:>12} {:>12.1} {:>12} {:>14} {:>14} {:>14.1} {:>10.0}",
            r.name,
            c.list_us,
            opt_us(c.list_borrowed_us),
            c.ns_list_us,
            opt_us(c.ns_list_borrowed_us),
            c.owner_us,
            opt_us(c.owner_borrowed_us),
            opt_us(c.hot_scan_borrowed_us),
            opt_us(c.arc_clone_ns_per_object),
            c.pointer_copy_ns_per_object,
            heap_per_pod(r, report.params.objects),
        );
    }
}

fn secs(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.2}"))
}

/// Where the open loop's writer spent its wall time, and its CPU per update in saturation: a
/// staleness tail with a long run-queue wait is the machine's, not the cache's.
fn open_loop_time_table(s: &mut String, report: &StoreReport) {
    if report.rows.iter().all(|r| r.open_loop_time.is_none()) {
        return;
    }
    let _ = writeln!(
        s,
        "\nwriter time (saturation: CPU us per update without/with readers; open loop: staleness of the updates arriving after the first second, seconds of its wall time applying, sleeping for arrivals, on a CPU, waiting for a core; preemptions; readers' CPU and wait):"
    );
    let _ = writeln!(
        s,
        "{:<16} {:>15} {:>22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "row",
        "cpu us/update",
        "stale p99/max after 1s",
        "wall s",
        "apply s",
        "sleep s",
        "cpu s",
        "wait s",
        "preempt",
        "rd cpu s",
        "rd wait s"
    );
    for r in &report.rows {
        let Some(t) = &r.open_loop_time else { continue };
        let _ = writeln!(
            s,
            "{:<16} {:>15} {:>22} {:>9.2} {:>9.2} {:>9.2} {:>9} {:>9} {:>9} {:>9} {:>9}",
            r.name,
            format!(
                "{}/{}",
                r.apply_cpu_us_per_update.map_or("-".into(), |v| format!("{v:.1}")),
                r.apply_cpu_us_per_update_with_readers.map_or("-".into(), |v| format!("{v:.1}"))
            ),
            format!(
                "{}/{}",
                fmt_us(t.staleness_after_1s_us.p99),
                fmt_us(t.staleness_after_1s_us.max)
            ),
            t.elapsed_s,
            t.apply_s,
            t.sleep_s,
            secs(t.cpu_s),
            secs(t.runqueue_wait_s),
            t.involuntary_switches.map_or("-".into(), |v| v.to_string()),
            secs(t.readers_cpu_s),
            secs(t.readers_runqueue_wait_s),
        );
    }
}

/// The informer rows' open-loop staleness split at the pipeline's inner points, and every
/// thread group's CPU and run-queue wait over the open loop.
fn pipeline_table(s: &mut String, report: &StoreReport) {
    if report.rows.iter().any(|r| r.open_loop_stages.is_some()) {
        let _ = writeln!(
            s,
            "
open loop, where an informer row's staleness went (p50 / p99 / max of each stage; they need not add up):"
        );
        let _ = writeln!(
            s,
            "{:<22} {:>24} {:>24} {:>24} {:>24} {:>9}",
            "row",
            "slot -> sent",
            "slot -> queued",
            "queued -> published",
            "published -> handler",
            "batches"
        );
        let stage =
            |x: &Summary| format!("{} / {} / {}", fmt_us(x.p50), fmt_us(x.p99), fmt_us(x.max));
        for r in &report.rows {
            let Some(st) = &r.open_loop_stages else { continue };
            let _ = writeln!(
                s,
                "{:<22} {:>24} {:>24} {:>24} {:>24} {:>9}",
                r.name,
                stage(&st.sent_us),
                stage(&st.arrival_us),
                stage(&st.queued_us),
                stage(&st.delivery_us),
                st.batches
            );
        }
    }
    if report.rows.iter().any(|r| !r.open_loop_threads.is_empty()) {
        let _ = writeln!(
            s,
            "
open loop, each thread group's CPU / run-queue wait, seconds (our process's rows):"
        );
        for r in &report.rows {
            if r.open_loop_threads.is_empty() {
                continue;
            }
            let groups: Vec<String> = r
                .open_loop_threads
                .iter()
                .filter(|(_, t)| t.cpu_s + t.wait_s >= 0.005)
                .map(|(g, t)| format!("{g} {:.2}/{:.2}", t.cpu_s, t.wait_s))
                .collect();
            let _ = writeln!(s, "{:<22} {}", r.name, groups.join(", "));
        }
    }
    if report.rows.iter().any(|r| r.open_loop_faults.is_some()) {
        let _ = writeln!(
            s,
            "
open loop, the process's page faults, minor / major (our process's rows), and its major faults before the loop:"
        );
        let _ = writeln!(
            s,
            "{:<22} {:>22} {:>22} {:>14}",
            "row", "first seconds", "whole loop", "major before"
        );
        for r in &report.rows {
            let Some(f) = &r.open_loop_faults else { continue };
            let first = match (f.minor_first, f.major_first) {
                (Some(minor), Some(major)) => format!("{minor} / {major} ({} s)", f.first_s),
                _ => "-".to_string(),
            };
            let _ = writeln!(
                s,
                "{:<22} {:>22} {:>22} {:>14}",
                r.name,
                first,
                format!("{} / {}", f.minor, f.major),
                f.major_before
            );
        }
    }
    if report.rows.iter().any(|r| r.machine_speed.is_some()) {
        let _ = writeln!(
            s,
            "
the machine before each row (the same fixed work, timed in the parent): building one realistic pod, one load from memory:"
        );
        for r in &report.rows {
            let Some(m) = &r.machine_speed else { continue };
            let _ = writeln!(
                s,
                "{:<22} {:>8.2} µs {:>8.1} ns (through {} MiB)",
                r.name,
                m.pod_build_ns / 1e3,
                m.memory_load_ns,
                m.cycle_mib
            );
        }
    }
}

/// CPU per update in saturation without readers: the whole process, the phase and the
/// reclamation of its garbage, and by thread group.
fn cpu_table(s: &mut String, report: &StoreReport) {
    if report.rows.iter().all(|r| r.apply_process_cpu_us_per_update.is_none()) {
        return;
    }
    let _ = writeln!(
        s,
        "\nCPU per update, saturation without readers, whole process (every thread; Go: every goroutine and the garbage collector), µs: in the phase + reclaiming its garbage after it (Go: one full collection) = total:"
    );
    let total = |r: &StoreRowReport| {
        Some(r.apply_process_cpu_us_per_update? + r.apply_reclaim_cpu_us_per_update.unwrap_or(0.0))
    };
    let anchor = report.rows.iter().find(|r| r.name == "client-go").and_then(total);
    for r in &report.rows {
        let (Some(phase), Some(sum)) = (r.apply_process_cpu_us_per_update, total(r)) else {
            continue;
        };
        let mut groups: Vec<(&String, &f64)> =
            r.apply_thread_cpu_us_per_update.iter().filter(|(_, us)| **us >= 0.05).collect();
        groups.sort_by(|a, b| b.1.total_cmp(a.1));
        let split = groups.iter().map(|(g, us)| format!("{g} {us:.1}")).collect::<Vec<_>>();
        let against = match anchor {
            Some(a) if r.name != "client-go" => format!(" ({:.2}x client-go)", sum / a.max(1e-9)),
            _ => String::new(),
        };
        let kernel = r
            .apply_kernel_cpu_us_per_update
            .map(|k| format!(", {k:.1} of it in the kernel"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  {:<18} {phase:>6.1} + {:>5.1} = {sum:>6.1}{against}{kernel}{}",
            r.name,
            r.apply_reclaim_cpu_us_per_update.unwrap_or(0.0),
            if split.is_empty() { String::new() } else { format!("  [{}]", split.join(", ")) }
        );
    }
}

/// The saturation rates with each side's freeing counted beside the phases' own rates.
fn freed_table(s: &mut String, report: &StoreReport) {
    if report.rows.iter().all(|r| r.apply_freed_per_s.is_none()) {
        return;
    }
    let _ = writeln!(
        s,
        "
saturation rates, freeing counted (the phase's updates over the time until what it replaced was freed: Rust rows until the heap stops shrinking, Go rows until the full collection after the phase returns), updates/s:"
    );
    let anchor = report.rows.iter().find(|r| r.name == "client-go");
    let _ = writeln!(
        s,
        "  {:<18} {:>9} {:>26} {:>11} {:>26}",
        "row", "apply/s", "freed", "w/readers", "freed w/readers"
    );
    let cell = |v: Option<f64>, a: Option<f64>, is_anchor: bool| match (v, a) {
        (Some(v), Some(a)) if !is_anchor && a > 0.0 => format!("{v:.0} ({:.2}x)", v / a),
        (Some(v), _) => format!("{v:.0}"),
        (None, _) => "-".to_owned(),
    };
    for r in &report.rows {
        let is_anchor = r.name == "client-go";
        let _ = writeln!(
            s,
            "  {:<18} {:>9.0} {:>26} {:>11.0} {:>26}",
            r.name,
            r.apply_per_s,
            cell(r.apply_freed_per_s, anchor.and_then(|a| a.apply_freed_per_s), is_anchor),
            r.apply_per_s_with_readers,
            cell(
                r.apply_freed_per_s_with_readers,
                anchor.and_then(|a| a.apply_freed_per_s_with_readers),
                is_anchor
            ),
        );
    }
}

/// One point of the sweep table: `~` if its readers were idle, `*` if not sustainable, then
/// staleness p99 / backlog at the end.
fn sweep_cell(p: &sweep::SweepPoint, readers: usize) -> String {
    format!(
        "{}{}{}/{}",
        if p.readers_idle(readers) { "~" } else { "" },
        if p.sustainable() { "" } else { "*" },
        fmt_us(p.staleness_us.p99),
        p.queue_depth_end
    )
}

fn sweep_table(s: &mut String, report: &StoreReport) {
    let rates: Vec<u64> = report.params.sweep.clone();
    if rates.is_empty() || report.rows.iter().all(|r| r.sweep.is_empty()) {
        return;
    }
    let _ = writeln!(
        s,
        "\nsweep ({:.0} s per rate; cell = staleness p99 / backlog at the end; * = not sustainable: backlog > {} or p99 >= 1 s; ~ = its readers made fewer operations than there are readers, so it measured little read contention):",
        report.params.sweep_duration_s,
        super::MAX_BATCH
    );
    let mut header = format!("{:<18}", "row");
    for r in &rates {
        let _ = write!(header, " {:>18}", format!("{r}/s"));
    }
    let _ = writeln!(s, "{header} {:>14}", "sustains");
    for row in &report.rows {
        let mut line = format!("{:<18}", row.name);
        for rate in &rates {
            let cell = match row.sweep.iter().find(|p| p.rate == *rate) {
                Some(p) => sweep_cell(p, report.params.readers),
                None => "-".to_owned(),
            };
            let _ = write!(line, " {cell:>18}");
        }
        let best = match sweep::highest_sustainable_rate(&row.sweep) {
            Some(r) if Some(&r) == rates.iter().max() => format!(">= {r}/s"),
            Some(r) => format!("{r}/s"),
            None => format!("< {}/s", rates.iter().min().copied().unwrap_or(0)),
        };
        let _ = writeln!(s, "{line} {best:>14}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::store::ReadCosts;

    fn row(
        name: &str,
        heap: u64,
        apply: f64,
        owner_us: f64,
        scan_us: Option<f64>,
    ) -> StoreRowReport {
        let mut r = StoreRowReport { name: name.into(), apply_per_s: apply, ..Default::default() };
        r.memory.total_bytes = heap;
        r.read_costs =
            Some(ReadCosts { owner_us, hot_scan_borrowed_us: scan_us, ..ReadCosts::default() });
        r
    }

    #[test]
    fn compact_targets_compare_with_snapshot_and_with_client_go_only_when_it_ran() {
        let plain = row("snapshot", 10_000, 50_000.0, 40.0, Some(9000.0));
        let compact = row("snapshot-compact", 2_000, 150_000.0, 60.0, Some(9500.0));
        let go = row("client-go", 5_000, 30_000.0, 30.0, None);
        assert!(compact_targets(std::slice::from_ref(&plain), 10).is_empty(), "needs both rows");
        let t = compact_targets(&[plain.clone(), compact.clone()], 10);
        let measured: Vec<(f64, bool)> = t.iter().map(|t| (t.measured, t.met)).collect();
        assert_eq!(measured, vec![(0.2, true), (1.5, true), (9500.0 / 9000.0, true), (3.0, true)]);
        let t = compact_targets(&[plain, compact, go], 10);
        assert_eq!(t.len(), 5);
        assert!(t[1].target.contains("client-go") && t[1].measured == 0.4 && t[1].met);
    }

    #[test]
    fn sweep_cells_mark_idle_readers_and_unsustainable_points() {
        let p = |ops_per_s: f64, end: u64| sweep::SweepPoint {
            rate: 5000,
            elapsed_s: 20.0,
            reader_ops_per_s: ops_per_s,
            queue_depth_end: end,
            staleness_us: Summary { p99: 7_000, ..Summary::default() },
            ..sweep::SweepPoint::default()
        };
        let plain = sweep_cell(&p(10.0, 0), 10);
        assert!(!plain.starts_with('~') && !plain.starts_with('*'), "{plain}");
        assert!(plain.ends_with("/0"), "{plain}");
        assert!(sweep_cell(&p(0.0, 0), 10).starts_with('~'));
        assert!(sweep_cell(&p(0.0, 5000), 10).starts_with("~*"));
        assert!(sweep_cell(&p(10.0, 5000), 10).starts_with('*'));
    }

    #[test]
    fn a_compact_row_above_its_bounds_misses_its_targets() {
        let plain = row("snapshot", 10_000, 50_000.0, 40.0, Some(9000.0));
        let compact = row("snapshot-compact", 4_000, 90_000.0, 90.0, Some(12_000.0));
        let met: Vec<bool> = compact_targets(&[plain, compact], 10).iter().map(|t| t.met).collect();
        assert_eq!(met, vec![false, false, false, false]);
    }
}
