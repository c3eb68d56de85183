//! The `soak` command: StatefulSet-style pod churn against the test API server for a long time,
//! with watch streams cut at random, then checks that nothing was lost and nothing leaked.
//!
//! # What runs
//!
//! All in one process, on a two-thread Tokio runtime:
//!
//! - the test API server (`snapinformer-apiserver`) on loopback with its simulated kubelet
//!   (bound pods become Running 100 ms after they are created), holding `pods` pods of
//!   StatefulSets of up to 1000 replicas spread over nodes;
//! - a pod informer ([`snapinformer_kube::pods`]: node and owner-UID indexes) listing and
//!   watching over HTTP, with one handler that checks every notification as it arrives;
//! - a churn driver: four workers, each owning a quarter of the pod names, at `rate` writes per
//!   second in total: pod status updates (35 %), label updates (35 %) and deletes (30 %); a
//!   deleted pod is re-created under the same name 0.1 to 3 s later with a new UID, as a
//!   StatefulSet controller would;
//! - faults: every watch stream is cut after a random number of events, so that cuts come
//!   every `fault_interval_s` (`--cut-every`, 3 s) on average (the server's `watch_cut_probability`); and
//!   every 30 s on average (uniformly between 10 and 50 s) a relist is forced, either by a 410
//!   Gone on the next re-watch or by restarting the server onto a compacted history (every
//!   watch ends) with a 410 on the re-watch, half of those also failing the relist's first
//!   list with 410 (so it falls back to a consistent list).
//!
//! # What is checked at the end
//!
//! Churn and faults stop; the run waits until the server's resourceVersion stays still (the
//! kubelet is done), then until the informer has published that version
//! ([`snapinformer_core::Informer::wait_for`]) and the handler's buffer is empty. Then:
//!
//! 1. **cache = server**: the informer's snapshot holds exactly the server's pods, each with the
//!    server's UID and resourceVersion (the server read with one list, faults off).
//! 2. **no missed deletion**. client-go guarantees less than "every delete reaches the handler
//!    as a delete": a relist replaces the cache with the list, so a pod deleted and re-created
//!    under the same name while the watch was down arrives as one update whose old object is
//!    the old incarnation (UID) and whose new object is the new one (DeltaFIFO's `Replace`
//!    emits `Replaced`/`Sync` for a key present in the list; no delete is synthesized), and an
//!    incarnation created and deleted while the watch was down is never seen at all. What it
//!    does guarantee, and what is checked, per handler:
//!    - a. for every pod name the server no longer has, the handler's last notification for it
//!      is a delete (with the object, or a `DeletedFinalStateUnknown` tombstone); for every
//!      name it has, the handler holds exactly the server's incarnation at the server's
//!      resourceVersion;
//!    - b. every incarnation the handler was told about and the server deleted was ended, for
//!      the handler, by exactly one of: a delete of that incarnation (object or tombstone), or,
//!      after a relist, an update from it to a later incarnation of the same name. Checked on
//!      every notification: no add for a name whose incarnation is still held, no update whose
//!      old object is not the held incarnation (UID and resourceVersion), no delete of a name
//!      not held or of another incarnation, and versions of an incarnation only move forward;
//!    - c. when no relist happened during the churn, nothing may be coalesced or missed: every
//!      deletion reached the handler as a delete with the object (no tombstones, no
//!      incarnation-changing updates, no incarnation unseen). Incarnation counts are also
//!      cross-checked: created on the server minus seen by the handler must equal deleted on
//!      the server minus ended for the handler (the incarnations the handler never saw).
//! 3. **heap**: the process heap (the bytes allocated and not yet freed, as the global allocator
//!    counts them) is measured after the initial sync and again after the run has settled; it must not have grown
//!    by more than `heap_tolerance` (10 %) of the first figure. Both measurements are taken in the
//!    same state: all `pods` pods present (after the checks above, the pods the churn left deleted
//!    are re-created), server history compacted (the server is in this process; its watch history
//!    would otherwise dominate), the informer relisted and caught up, the handler idle, and the
//!    heap steady. The pod informer reclaims superseded versions inline, so nothing else is
//!    pending.
//!
//! A failed check makes the command exit with status 1 after writing `soak.json`.

mod churn;
mod run;
mod settle;
mod tracker;

use std::{path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

use crate::harness::heap::HeapMeter;

pub use run::run;

/// Namespace of the soak's pods.
pub(crate) const NAMESPACE: &str = "soak";
/// Churn workers (each owns the pods whose index is its number modulo this).
const WORKERS: usize = 4;

/// Command-line arguments of `snapinformer-sim soak`.
#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    /// How long the churn runs.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Pods (StatefulSets of up to 1000 replicas).
    #[arg(long, default_value_t = 20_000)]
    pub pods: usize,
    /// Churn writes per second in total (updates and deletes; re-creates come on top).
    #[arg(long, default_value_t = 500)]
    pub rate: u64,
    /// Mean time between watch stream cuts (a relist is forced ten times less often).
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub cut_every: Duration,
    /// Largest allowed heap growth, as a fraction of the heap before the churn.
    #[arg(long, default_value_t = 0.10)]
    pub heap_tolerance: f64,
    /// Directory for soak.json.
    #[arg(long, default_value = "out/soak")]
    pub out: PathBuf,
}

/// Parameters of a soak run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SoakParams {
    /// Churn length in seconds.
    pub duration_s: f64,
    /// Pods.
    pub pods: usize,
    /// Churn writes per second (updates and deletes).
    pub rate: u64,
    /// Mean seconds between watch stream cuts (forced relists come ten times less often).
    pub fault_interval_s: f64,
    /// Largest allowed heap growth, as a fraction of the heap before the churn.
    pub heap_tolerance: f64,
}

impl SoakParams {
    /// The parameters the command line asks for.
    pub fn from_args(args: &SoakArgs) -> Self {
        SoakParams {
            duration_s: args.duration.as_secs_f64(),
            pods: args.pods,
            rate: args.rate,
            fault_interval_s: args.cut_every.as_secs_f64(),
            heap_tolerance: args.heap_tolerance,
        }
    }
}

/// How a run reports its progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ui {
    /// Nothing (tests).
    Quiet,
    /// A progress bar on a terminal, or a plain line every 30 s otherwise; phases on stderr.
    Bar,
}

/// One check and its outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// Figures or the first differences found.
    pub detail: String,
}

/// What the handler saw.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HandlerCounts {
    /// Add notifications.
    pub adds: u64,
    /// Update notifications.
    pub updates: u64,
    /// Updates from one incarnation of a name to another (a delete and re-create coalesced by
    /// a relist).
    pub incarnation_changes: u64,
    /// Delete notifications carrying the object.
    pub deletes: u64,
    /// Delete notifications carrying a `DeletedFinalStateUnknown` tombstone.
    pub tombstones: u64,
    /// Invariant violations seen (the first ones are in the check's detail).
    pub violations: u64,
}

/// Everything a soak run did and found (`soak.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SoakReport {
    /// Always `"soak"`.
    pub scenario: String,
    /// The parameters.
    pub params: SoakParams,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// The command line.
    pub command: String,
    /// Seconds the churn actually ran.
    pub churn_s: f64,
    /// Seconds from the end of the churn until the informer had published the server's version.
    pub catch_up_s: f64,
    /// Pod status updates done.
    pub status_updates: u64,
    /// Pod label updates done.
    pub label_updates: u64,
    /// Pods deleted.
    pub deletes: u64,
    /// Pods re-created.
    pub creates: u64,
    /// Writes that failed (and were retried or given up).
    pub write_errors: u64,
    /// Watch streams the server cut.
    pub watch_cuts: u64,
    /// In-stream 410s the server sent because they were forced.
    pub forced_watch_410s: u64,
    /// List 410s the server sent because they were forced.
    pub forced_list_410s: u64,
    /// Restarts onto a compacted history during the churn.
    pub compactions: u64,
    /// Lists the reflector completed during the churn (relists).
    pub relists: u64,
    /// Watches the reflector opened during the churn.
    pub watches: u64,
    /// Watch events the reflector received during the churn.
    pub watch_events: u64,
    /// Pods on the server at the end.
    pub final_pods: usize,
    /// Pod names deleted and not re-created at the end.
    pub final_deleted_names: usize,
    /// What the handler saw.
    pub handler: HandlerCounts,
    /// Incarnations created and deleted on the server without the handler ever seeing them.
    pub unseen_incarnations: i64,
    /// Heap bytes after the initial sync (settled).
    pub heap_before: u64,
    /// Heap bytes after the run (settled).
    pub heap_after: u64,
    /// `(after - before) / before`, in percent.
    pub heap_change_pct: f64,
    /// Largest heap seen (bytes).
    pub heap_peak: u64,
    /// The checks.
    pub checks: Vec<Check>,
    /// Whether every check passed.
    pub passed: bool,
}

/// The `soak` command: runs, prints the figures and checks, writes `soak.json`, and fails if a
/// check failed.
pub fn main(args: &SoakArgs, heap: &dyn HeapMeter) -> Result<(), String> {
    let params = SoakParams::from_args(args);
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let report = run(&params, heap, Ui::Bar)?;
    println!(
        "soak: {} pods for {:.0} s at {}/s: {} status and {} label updates, {} deletes, {} \
         re-creates, {} write errors\n  faults: {} watch cuts, {} forced watch 410s, {} forced \
         list 410s, {} compactions; reflector: {} relists, {} watches, {} events\n  handler: {} \
         adds, {} updates ({} incarnation changes), {} deletes, {} tombstones; {} incarnations \
         unseen\n  caught up {:.2} s after the churn; {} pods, {} names left deleted\n  heap \
         before {:.1} MiB, after {:.1} MiB ({:+.2}%), peak {:.1} MiB",
        params.pods,
        report.churn_s,
        params.rate,
        report.status_updates,
        report.label_updates,
        report.deletes,
        report.creates,
        report.write_errors,
        report.watch_cuts,
        report.forced_watch_410s,
        report.forced_list_410s,
        report.compactions,
        report.relists,
        report.watches,
        report.watch_events,
        report.handler.adds,
        report.handler.updates,
        report.handler.incarnation_changes,
        report.handler.deletes,
        report.handler.tombstones,
        report.unseen_incarnations,
        report.catch_up_s,
        report.final_pods,
        report.final_deleted_names,
        report.heap_before as f64 / 1048576.0,
        report.heap_after as f64 / 1048576.0,
        report.heap_change_pct,
        report.heap_peak as f64 / 1048576.0,
    );
    for c in &report.checks {
        println!("  [{}] {}: {}", if c.passed { "ok" } else { "FAILED" }, c.name, c.detail);
    }
    let path = args.out.join("soak.json");
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&path, json).map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    if report.passed {
        Ok(())
    } else {
        let failed: Vec<&str> =
            report.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
        Err(format!("soak failed: {}", failed.join("; ")))
    }
}
