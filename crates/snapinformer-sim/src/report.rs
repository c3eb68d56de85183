//! The side-by-side table, ratios against the targets, and the JSON report.

use std::fmt::Write as _;

use crate::store_scenario::{BackendReport, StoreParams};

/// The whole `store` report as written to `report.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoreReport {
    /// Always `"store"`.
    pub scenario: String,
    /// Parameters shared by every backend.
    pub params: StoreParams,
    /// When and where it ran.
    pub environment: Environment,
    /// One entry per backend.
    pub backends: Vec<BackendReport>,
    /// The targets, computed from this run's figures.
    pub targets: Vec<TargetCheck>,
}

/// Where a run happened.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Environment {
    /// UTC start time, RFC 3339.
    pub started_at: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// The command line.
    pub command: String,
    /// The global allocator every backend ran on.
    pub allocator: String,
}

/// One target with the measured ratio.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TargetCheck {
    /// What is compared.
    pub target: String,
    /// Measured value.
    pub measured: f64,
    /// The bound.
    pub bound: f64,
    /// Whether the bound is met.
    pub met: bool,
}

fn find<'a>(r: &'a [BackendReport], name: &str) -> Option<&'a BackendReport> {
    r.iter().find(|b| b.name == name)
}

/// Checks the store targets for our backend `ours` against `locked`.
pub fn targets(r: &[BackendReport], ours: &str, open_loop: bool) -> Vec<TargetCheck> {
    let (Some(o), Some(l)) = (find(r, ours), find(r, "locked")) else { return Vec::new() };
    let mut out = Vec::new();
    let mut push = |target: String, measured: f64, bound: f64, higher_is_better: bool| {
        let met = if higher_is_better { measured >= bound } else { measured <= bound };
        out.push(TargetCheck { target, measured, bound, met });
    };
    push(
        format!("{ours} apply/s without readers vs locked (>= 0.7x)"),
        o.apply_per_s / l.apply_per_s,
        0.7,
        true,
    );
    push(
        format!("{ours} apply/s with readers vs its own without (>= 0.9x)"),
        o.apply_per_s_with_readers / o.apply_per_s,
        0.9,
        true,
    );
    if open_loop {
        let ratio = l.staleness_us.p99 as f64 / o.staleness_us.p99.max(1) as f64;
        push(format!("locked staleness p99 / {ours} staleness p99 (>= 100x)"), ratio, 100.0, true);
        push(
            format!("{ours} staleness p99 in us (< 1000)"),
            o.staleness_us.p99 as f64,
            1000.0,
            false,
        );
    }
    push(
        format!("{ours} total memory vs locked (<= 1.2x)"),
        o.memory.total_bytes as f64 / l.memory.total_bytes.max(1) as f64,
        1.2,
        false,
    );
    push(
        format!("{ours} structure bytes/entry vs locked, idle (<= 1.5x)"),
        o.memory.structure_per_entry_idle / l.memory.structure_per_entry_idle.max(1.0),
        1.5,
        false,
    );
    push(
        format!("{ours} structure bytes/entry vs locked, reader holding (<= 1.5x)"),
        o.memory.structure_per_entry_holding / l.memory.structure_per_entry_holding.max(1.0),
        1.5,
        false,
    );
    push(
        format!("{ours} by_index of one owner's pods, p50 us (< 20)"),
        o.index_us.p50 as f64,
        20.0,
        false,
    );
    out
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1024.0 * 1024.0))
}

/// The side-by-side table.
pub fn table(report: &StoreReport) -> String {
    let mut s = String::new();
    let p = &report.params;
    let _ = writeln!(
        s,
        "store scenario: {} pods ({:?} profile: {} B as JSON, {} B in memory), {} readers, saturation {} updates, open loop {}/s for {:.0}s, allocator {}\n",
        p.objects,
        p.pod_profile,
        report.backends.first().map(|b| b.memory.json_bytes_per_object).unwrap_or(0),
        report.backends.first().map(|b| b.memory.bytes_per_object).unwrap_or(0),
        p.readers,
        p.updates,
        p.rate,
        p.duration_s,
        report.environment.allocator
    );
    let _ = writeln!(
        s,
        "{:<17} {:>10} {:>10} {:>22} {:>9} {:>15} {:>13} {:>13} {:>10} {:>9} {:>7} {:>7}",
        "backend",
        "apply/s",
        "w/readers",
        "staleness p50/p99/max",
        "depth",
        "list p50/p99",
        "index p50/p99",
        "nslist p50/p99",
        "heap",
        "rss",
        "B/ent",
        "B/hold"
    );
    for b in &report.backends {
        let _ = writeln!(
            s,
            "{:<17} {:>10.0} {:>10.0} {:>22} {:>9} {:>15} {:>13} {:>13} {:>10} {:>9} {:>7.0} {:>7.0}",
            b.name,
            b.apply_per_s,
            b.apply_per_s_with_readers,
            format!("{}/{}/{} us", b.staleness_us.p50, b.staleness_us.p99, b.staleness_us.max),
            b.queue_depth_max,
            format!("{}/{} us", b.list_us.p50, b.list_us.p99),
            format!("{}/{} us", b.index_us.p50, b.index_us.p99),
            format!("{}/{} us", b.ns_list_us.p50, b.ns_list_us.p99),
            mib(b.memory.total_bytes),
            mib(b.rss_bytes),
            b.memory.structure_per_entry_idle,
            b.memory.structure_per_entry_holding,
        );
    }
    if !report.targets.is_empty() {
        let _ = writeln!(s, "\ntargets (ratios from this run):");
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
    s
}
