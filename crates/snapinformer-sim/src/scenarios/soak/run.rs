//! The soak run, phase by phase: set up the server and the informer, churn with faults, catch
//! up, check, re-create what is left deleted and measure the heap again.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressStyle};
use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use snapinformer_apiserver::{Config, KubeletConfig, ServerHandle, TestApiServer, generate};
use snapinformer_core::{HandlerRegistration, Notification};
use snapinformer_kube::{BackoffConfig, KubeInformer, ReflectorConfig, ReflectorStats};
use tokio::task::JoinHandle;

use super::{
    Check, HandlerCounts, NAMESPACE, SoakParams, SoakReport, Ui, WORKERS,
    churn::{ChurnCounters, churn_worker, cut_probability, fault_driver, write},
    settle::{State, caught_up, first_differences, measure_heap, server_quiet},
    tracker::{Tracker, key_of, uid_rv},
};
use crate::harness::heap::HeapMeter;

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

/// The server, the informer under test and its checking handler, synced.
struct Setup {
    server: Arc<ServerHandle>,
    templates: Arc<Vec<Pod>>,
    client: kube::Client,
    informer: KubeInformer<Pod>,
    tracker: Arc<Mutex<Tracker>>,
    registration: HandlerRegistration,
}

async fn set_up(params: &SoakParams, phase: &dyn Fn(&str)) -> Result<Setup, String> {
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
    Ok(Setup { server, templates, client, informer, tracker, registration })
}

/// What the churn phase did.
struct Churned {
    counters: Arc<ChurnCounters>,
    churn_s: f64,
    /// Template indexes of the pods the churn left deleted.
    left_deleted: Vec<usize>,
}

/// Starts the churn workers and the fault driver, reports progress until `params.duration_s`
/// has passed (or a worker failed), then stops them.
async fn churn(s: &Setup, params: &SoakParams, ui: Ui) -> Result<Churned, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(ChurnCounters::default());
    let writer: Api<Pod> = Api::namespaced(s.client.clone(), NAMESPACE);
    let workers: Vec<JoinHandle<Result<Vec<usize>, String>>> = (0..WORKERS)
        .map(|w| {
            tokio::spawn(churn_worker(
                w,
                writer.clone(),
                s.templates.clone(),
                params.rate,
                stop.clone(),
                counters.clone(),
            ))
        })
        .collect();
    // Random cuts from now on: the probability applies to watches opened after it is set, so
    // end the current one (a compaction at the version the informer has reached: its re-watch
    // is valid and needs no relist).
    let mean_cut = Duration::from_secs_f64(params.fault_interval_s);
    s.server.faults().update(|f| f.watch_cut_probability = cut_probability(params.rate, mean_cut));
    s.server.restart_with_compacted_history();
    let faults =
        tokio::spawn(fault_driver(s.server.clone(), mean_cut, stop.clone(), counters.clone()));
    let started = Instant::now();
    watch_churn(s, params, ui, &counters, &workers, started).await;
    stop.store(true, Ordering::Relaxed);
    let churn_s = started.elapsed().as_secs_f64();
    let mut left_deleted = Vec::new();
    for w in workers {
        let left = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .map_err(|_| "a churn worker did not stop within 60 s".to_owned())?
            .map_err(|e| format!("a churn worker panicked: {e}"))?
            .map_err(|e| format!("a churn write failed: {e}"))?;
        left_deleted.extend(left);
    }
    tokio::time::timeout(Duration::from_secs(30), faults)
        .await
        .map_err(|_| "the fault driver did not stop within 30 s".to_owned())?
        .map_err(|e| format!("the fault driver panicked: {e}"))?;
    s.server.faults().clear();
    Ok(Churned { counters, churn_s, left_deleted })
}

/// Shows the churn's progress (a bar, or a line every 30 s) until it is over or a worker ended.
async fn watch_churn(
    s: &Setup,
    params: &SoakParams,
    ui: Ui,
    counters: &ChurnCounters,
    workers: &[JoinHandle<Result<Vec<usize>, String>>],
    started: Instant,
) {
    let reflector_before = s.informer.reflector_status().stats;
    let cuts_before = s.server.faults().stats().watches_cut;
    let duration = Duration::from_secs_f64(params.duration_s);
    let bar = progress_bar(ui, duration.as_secs());
    let mut last_line = Instant::now();
    while started.elapsed() < duration {
        tokio::time::sleep(Duration::from_millis(250).min(duration)).await;
        if workers.iter().any(|w| w.is_finished()) {
            break; // a worker failed: stop and report
        }
        let c = counters;
        let status = s.informer.reflector_status().stats;
        let msg = format!(
            "upd {} del {} cre {} cuts {} relists {} lag {}",
            c.status_updates.load(Ordering::Relaxed) + c.label_updates.load(Ordering::Relaxed),
            c.deletes.load(Ordering::Relaxed),
            c.creates.load(Ordering::Relaxed),
            s.server.faults().stats().watches_cut - cuts_before,
            status.lists - reflector_before.lists,
            s.informer.lag().versions_behind.map_or("?".into(), |v| v.to_string()),
        );
        match &bar {
            Some(bar) => {
                bar.set_position(started.elapsed().as_secs());
                bar.set_message(msg);
            }
            None if ui == Ui::Bar && last_line.elapsed() >= Duration::from_secs(30) => {
                last_line = Instant::now();
                eprintln!("[soak] {:.0} s: {msg}", started.elapsed().as_secs_f64());
            }
            None => {}
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

/// What the checks found.
struct Checked {
    checks: Vec<Check>,
    handler: HandlerCounts,
    unseen: i64,
    final_pods: usize,
    relists: u64,
}

/// Checks 1 and 2 of the module docs: cache = server, and the handler's view. Everything read
/// for them (a decoded list, copies of the state) is dropped before the heap is measured again.
async fn check(
    s: &Setup,
    params: &SoakParams,
    churned: &Churned,
    rv: u64,
    reflector_before: &ReflectorStats,
) -> Result<Checked, String> {
    let list = tokio::time::timeout(
        Duration::from_secs(120),
        Api::<Pod>::all(s.client.clone()).list(&ListParams::default()),
    )
    .await
    .map_err(|_| "listing the server's pods timed out".to_owned())?
    .map_err(|e| format!("listing the server's pods: {e}"))?;
    let listed_rv = list.metadata.resource_version.clone().unwrap_or_default();
    let server_state: State = list.items.iter().map(|p| (key_of(p), uid_rv(p))).collect();
    let cache_state: State = s.informer.snapshot().iter().map(|p| (key_of(p), uid_rv(p))).collect();
    let mut checks = vec![Check {
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
    }];

    let t = s.tracker.lock().unwrap_or_else(|e| e.into_inner());
    let handler_state: State =
        t.names.iter().filter_map(|(k, n)| n.held.clone().map(|h| (k.clone(), h))).collect();
    let not_ended_by_delete: Vec<&String> = t
        .names
        .iter()
        .filter(|(k, n)| !server_state.contains_key(*k) && !n.last_was_delete)
        .map(|(k, _)| k)
        .collect();
    let c = &t.counts;
    let counters = &churned.counters;
    let created = params.pods as i64 + counters.creates.load(Ordering::Relaxed) as i64;
    let deleted = counters.deletes.load(Ordering::Relaxed) as i64;
    let seen = (c.adds + c.incarnation_changes) as i64;
    let ended = (c.deletes + c.tombstones + c.incarnation_changes) as i64;
    let unseen = deleted - ended;
    let relists = s.informer.reflector_status().stats.lists - reflector_before.lists;
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
    Ok(Checked { checks, handler: c.clone(), unseen, final_pods: server_state.len(), relists })
}

/// Check 3: re-creates what the churn left deleted (the StatefulSets complete), so that the heap
/// is compared at the same number of pods, and measures the heap again.
async fn heap_check(
    s: &Setup,
    params: &SoakParams,
    churned: &Churned,
    heap: &dyn HeapMeter,
    heap_before: u64,
) -> Result<(u64, f64, Check), String> {
    let writer: Api<Pod> = Api::namespaced(s.client.clone(), NAMESPACE);
    let post = PostParams::default();
    for &index in &churned.left_deleted {
        write(&churned.counters, 409, || writer.create(&post, &s.templates[index])).await?;
    }
    server_quiet(&s.server, Duration::from_secs(1)).await;
    let heap_after = measure_heap(&s.server, &s.informer, &s.registration, heap).await?;
    let change = (heap_after as f64 - heap_before as f64) / heap_before.max(1) as f64;
    let check = Check {
        name: format!("heap after within {:.0}% of before", params.heap_tolerance * 100.0),
        passed: change <= params.heap_tolerance,
        detail: format!(
            "before {:.1} MiB, after {:.1} MiB, change {:+.2}%",
            heap_before as f64 / 1048576.0,
            heap_after as f64 / 1048576.0,
            change * 100.0
        ),
    };
    Ok((heap_after, change, check))
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
    let started_at = crate::harness::report::now_rfc3339();
    let s = set_up(params, &phase).await?;
    phase("measuring the heap before the churn");
    let heap_before = measure_heap(&s.server, &s.informer, &s.registration, heap).await?;
    let reflector_before = s.informer.reflector_status().stats;
    let faults_before = s.server.faults().stats();

    phase(&format!("churning for {:.0} s", params.duration_s));
    let churned = churn(&s, params, ui).await?;

    phase("waiting for the informer to catch up");
    let settle_started = Instant::now();
    let rv = server_quiet(&s.server, Duration::from_secs(1)).await;
    caught_up(&s.informer, &s.registration, rv).await?;
    let catch_up_s = settle_started.elapsed().as_secs_f64();
    let reflector_after = s.informer.reflector_status().stats;
    let faults_after = s.server.faults().stats();

    phase("checking");
    let checked = check(&s, params, &churned, rv, &reflector_before).await?;
    phase(&format!("re-creating the {} pods left deleted", churned.left_deleted.len()));
    let (heap_after, change, heap_check) =
        heap_check(&s, params, &churned, heap, heap_before).await?;
    let mut checks = checked.checks;
    checks.push(heap_check);

    s.informer.shutdown().await;
    drop(s.registration);
    if let Ok(server) = Arc::try_unwrap(s.server) {
        server.shutdown().await;
    }
    let passed = checks.iter().all(|c| c.passed);
    let c = &churned.counters;
    Ok(SoakReport {
        scenario: "soak".into(),
        params: params.clone(),
        started_at,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        churn_s: churned.churn_s,
        catch_up_s,
        status_updates: c.status_updates.load(Ordering::Relaxed),
        label_updates: c.label_updates.load(Ordering::Relaxed),
        deletes: c.deletes.load(Ordering::Relaxed),
        creates: c.creates.load(Ordering::Relaxed),
        write_errors: c.errors.load(Ordering::Relaxed),
        watch_cuts: faults_after.watches_cut - faults_before.watches_cut,
        forced_watch_410s: faults_after.watch_410s - faults_before.watch_410s,
        forced_list_410s: faults_after.list_410s - faults_before.list_410s,
        compactions: c.compactions.load(Ordering::Relaxed),
        relists: checked.relists,
        watches: reflector_after.watches - reflector_before.watches,
        watch_events: reflector_after.watch_events - reflector_before.watch_events,
        final_pods: checked.final_pods,
        final_deleted_names: churned.left_deleted.len(),
        handler: checked.handler,
        unseen_incarnations: checked.unseen,
        heap_before,
        heap_after,
        heap_change_pct: change * 100.0,
        heap_peak: heap.peak(),
        checks,
        passed,
    })
}
