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
//! 3. **heap**: the process heap (the `cap` allocator's count of live bytes) is measured after
//!    the initial sync and again after the run has settled; it must not have grown by more than
//!    `heap_tolerance` (10 %) of the first figure. Both measurements are taken in the same
//!    state: all `pods` pods present (after the checks above, the pods the churn left deleted
//!    are re-created), server history compacted (the server is in this process; its watch history would
//!    otherwise dominate), the informer relisted and caught up, the handler idle, and the heap
//!    steady. The pod informer reclaims superseded versions inline, so nothing else is pending.
//!
//! A failed check makes the command exit with status 1 after writing `soak.json`.

use std::{
    collections::{BinaryHeap, HashMap},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressStyle};
use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde::{Deserialize, Serialize};
use snapinformer_apiserver::{Config, KubeletConfig, ServerHandle, TestApiServer, generate};
use snapinformer_core::{DeltaObject, Notification};
use snapinformer_kube::{BackoffConfig, KubeInformer, ReflectorConfig};

use crate::store_scenario::HeapMeter;

/// Namespace of the soak's pods.
const NAMESPACE: &str = "soak";
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

// ----- randomness ----------------------------------------------------------------------------

/// splitmix64: enough to pick operations and delays.
struct Rng(u64);

impl Rng {
    fn seeded(salt: u64) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Rng(now ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_micros() as u64;
        lo + Duration::from_micros(self.below(span + 1))
    }
}

// ----- the handler's view --------------------------------------------------------------------

/// One pod name as the handler knows it.
#[derive(Debug, Default)]
struct NameState {
    /// The incarnation held: UID and resourceVersion.
    held: Option<(String, u64)>,
    /// Whether the last notification for the name was a delete.
    last_was_delete: bool,
}

/// The handler's view, checked on every notification (invariant 2b).
#[derive(Debug, Default)]
struct Tracker {
    names: HashMap<String, NameState>,
    counts: HandlerCounts,
    first_violations: Vec<String>,
}

fn key_of(pod: &Pod) -> String {
    let m = &pod.metadata;
    format!("{}/{}", m.namespace.as_deref().unwrap_or(""), m.name.as_deref().unwrap_or(""))
}

fn uid_rv(pod: &Pod) -> (String, u64) {
    let m = &pod.metadata;
    (
        m.uid.clone().unwrap_or_default(),
        m.resource_version.as_deref().and_then(|rv| rv.parse().ok()).unwrap_or(0),
    )
}

impl Tracker {
    fn violation(&mut self, what: String) {
        self.counts.violations += 1;
        if self.first_violations.len() < 20 {
            self.first_violations.push(what);
        }
    }

    fn notify(&mut self, n: &Notification<Pod>) {
        match n {
            Notification::Add { obj, .. } => {
                self.counts.adds += 1;
                let key = key_of(obj);
                let new = uid_rv(obj);
                let state = self.names.entry(key.clone()).or_default();
                let previous = state.held.replace(new);
                state.last_was_delete = false;
                if let Some((uid, rv)) = previous {
                    self.violation(format!("add of {key} while {uid}@{rv} is held"));
                }
            }
            Notification::Update { old, new } => {
                self.counts.updates += 1;
                let key = key_of(new);
                let (old_uid, old_rv) = uid_rv(old);
                let (new_uid, new_rv) = uid_rv(new);
                let state = self.names.entry(key.clone()).or_default();
                let previous = state.held.replace((new_uid.clone(), new_rv));
                state.last_was_delete = false;
                if old_uid != new_uid {
                    self.counts.incarnation_changes += 1;
                }
                match previous {
                    Some((uid, rv)) if uid == old_uid && rv == old_rv => {}
                    Some((uid, rv)) => self.violation(format!(
                        "update of {key} from {old_uid}@{old_rv} while {uid}@{rv} is held"
                    )),
                    None => self.violation(format!("update of {key}, which is not held")),
                }
                if new_rv <= old_rv {
                    self.violation(format!("update of {key} goes back: {old_rv} -> {new_rv}"));
                }
            }
            Notification::Delete { obj } => {
                let (key, uid) = match obj {
                    DeltaObject::Object(o) => {
                        self.counts.deletes += 1;
                        (key_of(o), Some(uid_rv(o).0))
                    }
                    DeltaObject::Tombstone(t) => {
                        self.counts.tombstones += 1;
                        (t.key.to_string(), t.obj.as_deref().map(|o| uid_rv(o).0))
                    }
                };
                let state = self.names.entry(key.clone()).or_default();
                let previous = state.held.take();
                state.last_was_delete = true;
                match (previous, uid) {
                    (None, _) => self.violation(format!("delete of {key}, which is not held")),
                    (Some((held, rv)), Some(uid)) if held != uid => self.violation(format!(
                        "delete of {key} incarnation {uid} while {held}@{rv} is held"
                    )),
                    _ => {}
                }
            }
        }
    }
}

// ----- churn ---------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct ChurnCounters {
    status_updates: AtomicU64,
    label_updates: AtomicU64,
    deletes: AtomicU64,
    creates: AtomicU64,
    errors: AtomicU64,
    compactions: AtomicU64,
}

/// Retries a write through transport errors and 429/5xx for up to 10 s. `Ok(false)` when the
/// server answered `benign` (404 for a delete, 409 for a create): the write had happened.
async fn write<T, Fut>(
    counters: &ChurnCounters,
    benign: u16,
    mut f: impl FnMut() -> Fut,
) -> Result<bool, String>
where
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let attempt = tokio::time::timeout(Duration::from_secs(10), f()).await;
        let err = match attempt {
            Ok(Ok(_)) => return Ok(true),
            Ok(Err(kube::Error::Api(s))) if s.code == benign => return Ok(false),
            Ok(Err(kube::Error::Api(s))) if s.code != 429 && s.code < 500 => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                return Err(format!("{} {}: {}", s.code, s.reason, s.message));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out after 10 s".to_owned(),
        };
        counters.errors.fetch_add(1, Ordering::Relaxed);
        if Instant::now() > deadline {
            return Err(err);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One churn worker: owns the pods whose index is `worker` modulo [`WORKERS`].
async fn churn_worker(
    worker: usize,
    api: Api<Pod>,
    templates: Arc<Vec<Pod>>,
    rate: u64,
    stop: Arc<AtomicBool>,
    counters: Arc<ChurnCounters>,
) -> Result<Vec<usize>, String> {
    let mut rng = Rng::seeded(worker as u64 + 1);
    let mut alive: Vec<usize> = (worker..templates.len()).step_by(WORKERS).collect();
    let mut pending: BinaryHeap<std::cmp::Reverse<(Instant, usize)>> = BinaryHeap::new();
    let period = Duration::from_secs_f64(WORKERS as f64 / rate.max(1) as f64);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let pp = PatchParams::default();
    let post = PostParams::default();
    let dp = DeleteParams::default();
    let mut generation: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        // Re-create what is due (as a StatefulSet controller would, same name, new UID).
        while let Some(std::cmp::Reverse((due, index))) = pending.peek().copied() {
            if due > Instant::now() {
                break;
            }
            pending.pop();
            let pod = &templates[index];
            if write(&counters, 409, || api.create(&post, pod)).await? {
                counters.creates.fetch_add(1, Ordering::Relaxed);
            }
            alive.push(index);
        }
        tick.tick().await;
        if alive.is_empty() {
            continue;
        }
        generation += 1;
        let pos = rng.below(alive.len() as u64) as usize;
        let index = alive[pos];
        let name = templates[index].metadata.name.as_deref().unwrap_or_default();
        match rng.below(100) {
            0..35 => {
                let patch = Patch::Merge(serde_json::json!({
                    "status": {"message": format!("soak {worker}-{generation}")}
                }));
                if write(&counters, 0, || api.patch_status(name, &pp, &patch)).await? {
                    counters.status_updates.fetch_add(1, Ordering::Relaxed);
                }
            }
            35..70 => {
                let patch = Patch::Merge(serde_json::json!({
                    "metadata": {"labels": {"soak-generation": generation.to_string()}}
                }));
                if write(&counters, 0, || api.patch(name, &pp, &patch)).await? {
                    counters.label_updates.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                if write(&counters, 404, || api.delete(name, &dp)).await? {
                    counters.deletes.fetch_add(1, Ordering::Relaxed);
                }
                alive.swap_remove(pos);
                let delay = rng.between(Duration::from_millis(100), Duration::from_secs(3));
                pending.push(std::cmp::Reverse((Instant::now() + delay, index)));
            }
        }
    }
    Ok(pending.into_iter().map(|std::cmp::Reverse((_, index))| index).collect())
}

/// Watch events per churn write: the write, plus for a delete (30 %) the re-create and the
/// kubelet's start of the new pod.
const EVENTS_PER_WRITE: f64 = 1.6;

/// Per-event probability of cutting a watch stream so that cuts come every `mean` on average
/// at `rate` churn writes per second.
fn cut_probability(rate: u64, mean: Duration) -> f64 {
    (1.0 / (rate.max(1) as f64 * EVENTS_PER_WRITE * mean.as_secs_f64().max(0.001))).min(1.0)
}

/// Every `10 * mean` on average (uniformly between a third and five thirds of it) forces a
/// relist: either a 410 on the next re-watch (after the next random cut), or a restart onto a
/// compacted history that ends the watch at once, with a 410 forced on the re-watch (a watch
/// from the very version of the compaction would still be valid) and half the time on the
/// relist's first list too. The random cuts themselves are the server's
/// `watch_cut_probability`, set by the caller (it applies to watches opened after it is set).
async fn fault_driver(
    server: Arc<ServerHandle>,
    mean: Duration,
    stop: Arc<AtomicBool>,
    counters: Arc<ChurnCounters>,
) {
    let mut rng = Rng::seeded(1000);
    let faults = server.faults();
    let every = mean * 10;
    while !stop.load(Ordering::Relaxed) {
        let wait = rng.between(every / 3, every * 5 / 3);
        let until = Instant::now() + wait;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if rng.below(2) == 0 {
            faults.update(|f| f.force_watch_410 += 1);
        } else {
            faults.update(|f| {
                f.force_watch_410 += 1;
                f.force_list_410 += u32::from(rng.below(2) == 0);
            });
            server.restart_with_compacted_history();
            counters.compactions.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// ----- settling and measuring ----------------------------------------------------------------

/// Waits until the server's resourceVersion has not moved for `quiet` (at most 60 s).
async fn server_quiet(server: &ServerHandle, quiet: Duration) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rv = server.resource_version();
    let mut since = Instant::now();
    while since.elapsed() < quiet && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = server.resource_version();
        if now != rv {
            rv = now;
            since = Instant::now();
        }
    }
    rv
}

/// Waits until the informer has published `rv` and the handler has handled everything.
async fn caught_up(
    informer: &KubeInformer<Pod>,
    registration: &snapinformer_core::HandlerRegistration,
    rv: u64,
) -> Result<(), String> {
    informer
        .wait_for(&rv.to_string(), Duration::from_secs(300))
        .await
        .map_err(|e| format!("the informer did not catch up with the server: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut handled = registration.handled();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = registration.handled();
        if registration.buffer_depth() == 0 && now == handled {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the handler is still busy after 120 s ({} buffered)",
                registration.buffer_depth()
            ));
        }
        handled = now;
    }
}

/// Live heap bytes once they stop falling (at most 5 s).
async fn settled_heap(heap: &dyn HeapMeter) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = heap.current();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = heap.current();
        if now + now / 1000 >= last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Brings the process to the state in which the heap is compared: server history compacted,
/// informer relisted and caught up, handler idle, heap steady.
async fn measure_heap(
    server: &ServerHandle,
    informer: &KubeInformer<Pod>,
    registration: &snapinformer_core::HandlerRegistration,
    heap: &dyn HeapMeter,
) -> Result<u64, String> {
    let lists = informer.reflector_status().stats.lists;
    // The re-watch from the last version seen would be valid after the compaction: force the
    // relist, so that both measurements see a freshly listed cache.
    server.faults().update(|f| f.force_watch_410 = 1);
    server.restart_with_compacted_history();
    let deadline = Instant::now() + Duration::from_secs(300);
    while informer.reflector_status().stats.lists == lists {
        if Instant::now() > deadline {
            return Err("no relist within 300 s of compacting the history".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rv = server_quiet(server, Duration::from_millis(500)).await;
    caught_up(informer, registration, rv).await?;
    Ok(settled_heap(heap).await)
}

/// UID and resourceVersion per pod key.
type State = std::collections::BTreeMap<String, (String, u64)>;

fn first_differences(want: &State, got: &State, what: &str) -> String {
    let mut out = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => out.push(format!("{k} missing from {what}")),
            Some(g) if g != v => out.push(format!("{k}: server {v:?}, {what} {g:?}")),
            _ => {}
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        out.push(format!("{k} in {what} but not on the server"));
    }
    let n = out.len();
    out.truncate(10);
    format!("{n} differences: {}", out.join("; "))
}

// ----- the run -------------------------------------------------------------------------------

/// Builds the pods: StatefulSets of up to 1000 replicas, one node per 200 pods.
fn populate(server: &ServerHandle, pods: usize) -> Result<Vec<Pod>, String> {
    let node_count = pods.div_ceil(200).max(1);
    server.bulk_create_nodes(generate::nodes(node_count)).map_err(|e| e.to_string())?;
    let nodes: Vec<String> = (0..node_count).map(|i| format!("node-{i:05}")).collect();
    let sets = pods.div_ceil(1000).max(1);
    let mut templates = Vec::with_capacity(pods);
    for s in 0..sets {
        let replicas = (s + 1) * pods / sets - s * pods / sets;
        let name = format!("web-{s:03}");
        let set = generate::statefulset(NAMESPACE, &name, replicas as i32);
        server.bulk_create([set]).map_err(|e| e.to_string())?;
        let set: StatefulSet =
            server.get(Some(NAMESPACE), &name).ok_or("the StatefulSet was not stored")?;
        templates.extend(generate::statefulset_pods(&set, &nodes));
    }
    server.bulk_create_pods(templates.iter().cloned()).map_err(|e| e.to_string())?;
    Ok(templates)
}

fn progress_bar(ui: Ui, secs: u64) -> Option<ProgressBar> {
    use std::io::IsTerminal;
    if ui == Ui::Quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(secs.max(1));
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {percent:>3}% {eta_precise} left  {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(500));
    Some(bar)
}

/// Runs the soak and checks the result. `Err` is a failure to set up or to settle (a check
/// that fails is reported in [`SoakReport::checks`] instead).
pub fn run(params: &SoakParams, heap: &dyn HeapMeter, ui: Ui) -> Result<SoakReport, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the tokio runtime: {e}"))?;
    rt.block_on(run_async(params, heap, ui))
}

async fn run_async(
    params: &SoakParams,
    heap: &dyn HeapMeter,
    ui: Ui,
) -> Result<SoakReport, String> {
    let phase = |msg: &str| {
        if ui == Ui::Bar {
            eprintln!("[soak] {msg}");
        }
    };
    if params.pods == 0 {
        return Err("--pods must be at least 1".into());
    }
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    phase(&format!("starting the API server and creating {} pods", params.pods));
    let server = TestApiServer::start(Config {
        kubelet: Some(KubeletConfig { startup_delay: Duration::from_millis(100), schedule: false }),
        ..Config::default()
    })
    .await
    .map_err(|e| format!("starting the test API server: {e}"))?;
    let server = Arc::new(server);
    let templates = Arc::new(populate(&server, params.pods)?);
    let client = server.client().map_err(|e| e.to_string())?;

    phase("starting the informer");
    let informer = snapinformer_kube::pods(Api::all(client.clone()))
        .reflector(
            ReflectorConfig::new().backoff(
                BackoffConfig::new()
                    .initial(Duration::from_millis(50))
                    .max(Duration::from_secs(2))
                    .jitter(0.5),
            ),
        )
        .build()
        .map_err(|e| e.to_string())?;
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let registration = {
        let tracker = tracker.clone();
        informer
            .add_event_handler(move |n: &Notification<Pod>| {
                tracker.lock().unwrap_or_else(|e| e.into_inner()).notify(n)
            })
            .map_err(|e| e.to_string())?
    };
    informer.start().map_err(|e| e.to_string())?;
    if !informer.wait_for_sync(Duration::from_secs(300)).await {
        return Err("the informer did not sync within 300 s".into());
    }
    let rv = server_quiet(&server, Duration::from_millis(500)).await;
    caught_up(&informer, &registration, rv).await?;
    phase("measuring the heap before the churn");
    let heap_before = measure_heap(&server, &informer, &registration, heap).await?;
    let reflector_before = informer.reflector_status().stats;
    let faults_before = server.faults().stats();

    phase(&format!("churning for {:.0} s", params.duration_s));
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(ChurnCounters::default());
    let writer: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        workers.push(tokio::spawn(churn_worker(
            w,
            writer.clone(),
            templates.clone(),
            params.rate,
            stop.clone(),
            counters.clone(),
        )));
    }
    // Random cuts from now on: the probability applies to watches opened after it is set, so
    // end the current one (a compaction at the version the informer has reached: its re-watch
    // is valid and needs no relist).
    let mean_cut = Duration::from_secs_f64(params.fault_interval_s);
    server.faults().update(|f| f.watch_cut_probability = cut_probability(params.rate, mean_cut));
    server.restart_with_compacted_history();
    let faults =
        tokio::spawn(fault_driver(server.clone(), mean_cut, stop.clone(), counters.clone()));
    let churn_started = Instant::now();
    let duration = Duration::from_secs_f64(params.duration_s);
    let bar = progress_bar(ui, duration.as_secs());
    let mut last_line = Instant::now();
    while churn_started.elapsed() < duration {
        tokio::time::sleep(Duration::from_millis(250).min(duration)).await;
        if workers.iter().any(|w| w.is_finished()) {
            break; // a worker failed: stop and report
        }
        let c = &counters;
        let status = informer.reflector_status().stats;
        let msg = format!(
            "upd {} del {} cre {} cuts {} relists {} lag {}",
            c.status_updates.load(Ordering::Relaxed) + c.label_updates.load(Ordering::Relaxed),
            c.deletes.load(Ordering::Relaxed),
            c.creates.load(Ordering::Relaxed),
            server.faults().stats().watches_cut - faults_before.watches_cut,
            status.lists - reflector_before.lists,
            informer.lag().versions_behind.map_or("?".into(), |v| v.to_string()),
        );
        match &bar {
            Some(bar) => {
                bar.set_position(churn_started.elapsed().as_secs());
                bar.set_message(msg);
            }
            None if ui == Ui::Bar && last_line.elapsed() >= Duration::from_secs(30) => {
                last_line = Instant::now();
                eprintln!("[soak] {:.0} s: {msg}", churn_started.elapsed().as_secs_f64());
            }
            None => {}
        }
    }
    stop.store(true, Ordering::Relaxed);
    let churn_s = churn_started.elapsed().as_secs_f64();
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut left_deleted = Vec::new();
    for w in workers {
        let left = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .map_err(|_| "a churn worker did not stop within 60 s".to_owned())?
            .map_err(|e| format!("a churn worker panicked: {e}"))?
            .map_err(|e| format!("a churn write failed: {e}"))?;
        left_deleted.extend(left);
    }
    let final_deleted_names = left_deleted.len();
    tokio::time::timeout(Duration::from_secs(30), faults)
        .await
        .map_err(|_| "the fault driver did not stop within 30 s".to_owned())?
        .map_err(|e| format!("the fault driver panicked: {e}"))?;
    server.faults().clear();

    phase("waiting for the informer to catch up");
    let settle_started = Instant::now();
    let rv = server_quiet(&server, Duration::from_secs(1)).await;
    caught_up(&informer, &registration, rv).await?;
    let catch_up_s = settle_started.elapsed().as_secs_f64();
    let reflector_after = informer.reflector_status().stats;
    let faults_after = server.faults().stats();

    phase("checking");
    // Everything read for the checks (a decoded list, three copies of the state) is dropped
    // before the heap is measured again.
    let (mut checks, handler, unseen, final_pods, relists) = {
        let list = tokio::time::timeout(
            Duration::from_secs(120),
            Api::<Pod>::all(client.clone()).list(&ListParams::default()),
        )
        .await
        .map_err(|_| "listing the server's pods timed out".to_owned())?
        .map_err(|e| format!("listing the server's pods: {e}"))?;
        let listed_rv = list.metadata.resource_version.clone().unwrap_or_default();
        let server_state: State = list.items.iter().map(|p| (key_of(p), uid_rv(p))).collect();
        let cache_state: State =
            informer.snapshot().iter().map(|p| (key_of(p), uid_rv(p))).collect();
        let mut checks = Vec::new();
        checks.push(Check {
            name: "cache equals server (keys, UIDs, resourceVersions)".into(),
            passed: cache_state == server_state && listed_rv == rv.to_string(),
            detail: if cache_state == server_state {
                format!(
                    "{} pods at resourceVersion {listed_rv} (caught up at {rv})",
                    server_state.len()
                )
            } else {
                first_differences(&server_state, &cache_state, "cache")
            },
        });

        let t = tracker.lock().unwrap_or_else(|e| e.into_inner());
        let handler_state: State =
            t.names.iter().filter_map(|(k, s)| s.held.clone().map(|h| (k.clone(), h))).collect();
        let not_ended_by_delete: Vec<&String> = t
            .names
            .iter()
            .filter(|(k, s)| !server_state.contains_key(*k) && !s.last_was_delete)
            .map(|(k, _)| k)
            .collect();
        let c = &t.counts;
        let created = params.pods as i64 + counters.creates.load(Ordering::Relaxed) as i64;
        let deleted = counters.deletes.load(Ordering::Relaxed) as i64;
        let seen = (c.adds + c.incarnation_changes) as i64;
        let ended = (c.deletes + c.tombstones + c.incarnation_changes) as i64;
        let unseen = deleted - ended;
        let relists = reflector_after.lists - reflector_before.lists;
        checks.push(Check {
            name: "handler: final state and last event per name (2a)".into(),
            passed: handler_state == server_state && not_ended_by_delete.is_empty(),
            detail: if handler_state != server_state {
                first_differences(&server_state, &handler_state, "handler")
            } else if !not_ended_by_delete.is_empty() {
                format!("names gone whose last event is not a delete: {not_ended_by_delete:?}")
            } else {
                format!(
                    "{} names held as on the server; {} names gone, each last seen deleted",
                    handler_state.len(),
                    t.names.len() - handler_state.len()
                )
            },
        });
        checks.push(Check {
            name: "handler: every incarnation ended by a delete or a relist's update (2b)".into(),
            passed: c.violations == 0 && unseen >= 0 && created - seen == unseen,
            detail: format!(
                "{} violations {:?}; server created {created} incarnations (initial included) and \
                 deleted {deleted}; handler saw {seen} and ended {ended} ({} deletes, {} tombstones, \
                 {} incarnation-changing updates); unseen {unseen} (created - seen = {})",
                c.violations,
                t.first_violations,
                c.deletes,
                c.tombstones,
                c.incarnation_changes,
                created - seen
            ),
        });
        checks.push(Check {
            name: "handler: without relists every deletion is a delete with the object (2c)".into(),
            passed: relists > 0 || (c.tombstones == 0 && c.incarnation_changes == 0 && unseen == 0),
            detail: if relists > 0 {
                format!("{relists} relists during the churn: coalescing allowed")
            } else {
                format!(
                    "no relist; {} tombstones, {} incarnation changes, {unseen} unseen",
                    c.tombstones, c.incarnation_changes
                )
            },
        });
        (checks, c.clone(), unseen, server_state.len(), relists)
    };

    // Re-create what the churn left deleted (the StatefulSets complete), so that the heap is
    // compared at the same number of pods.
    phase(&format!("re-creating the {final_deleted_names} pods left deleted"));
    let writer: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let post = PostParams::default();
    for index in left_deleted {
        write(&counters, 409, || writer.create(&post, &templates[index])).await?;
    }
    server_quiet(&server, Duration::from_secs(1)).await;
    phase("measuring the heap after the churn");
    let heap_after = measure_heap(&server, &informer, &registration, heap).await?;
    let change = (heap_after as f64 - heap_before as f64) / heap_before.max(1) as f64;
    checks.push(Check {
        name: format!("heap after within {:.0}% of before", params.heap_tolerance * 100.0),
        passed: change <= params.heap_tolerance,
        detail: format!(
            "before {:.1} MiB, after {:.1} MiB, change {:+.2}%",
            heap_before as f64 / 1048576.0,
            heap_after as f64 / 1048576.0,
            change * 100.0
        ),
    });

    informer.shutdown().await;
    drop(registration);
    if let Ok(server) = Arc::try_unwrap(server) {
        server.shutdown().await;
    }
    let passed = checks.iter().all(|c| c.passed);
    Ok(SoakReport {
        scenario: "soak".into(),
        params: params.clone(),
        started_at,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        churn_s,
        catch_up_s,
        status_updates: counters.status_updates.load(Ordering::Relaxed),
        label_updates: counters.label_updates.load(Ordering::Relaxed),
        deletes: counters.deletes.load(Ordering::Relaxed),
        creates: counters.creates.load(Ordering::Relaxed),
        write_errors: counters.errors.load(Ordering::Relaxed),
        watch_cuts: faults_after.watches_cut - faults_before.watches_cut,
        forced_watch_410s: faults_after.watch_410s - faults_before.watch_410s,
        forced_list_410s: faults_after.list_410s - faults_before.list_410s,
        compactions: counters.compactions.load(Ordering::Relaxed),
        relists,
        watches: reflector_after.watches - reflector_before.watches,
        watch_events: reflector_after.watch_events - reflector_before.watch_events,
        final_pods,
        final_deleted_names,
        handler,
        unseen_incarnations: unseen,
        heap_before,
        heap_after,
        heap_change_pct: change * 100.0,
        heap_peak: heap.peak(),
        checks,
        passed,
    })
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
