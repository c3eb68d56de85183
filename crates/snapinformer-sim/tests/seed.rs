//! The `seed` scenario's controllers and pipelines, at a small scale.
//!
//! The controllers run on the controller runtime: tests that drive them over an idle cache
//! (nothing feeds it, as a cache that has fallen behind) run on a paused clock, so that
//! read-your-writes waits, backoff and timeouts are exact and free.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::{Queue, RealFifo};
use snapinformer_runtime::{Handle, ObjectKey, VersionedCache, VisibleVersion};
use snapinformer_sim::{
    harness::{heap::NoHeap, placement::Placement},
    pods::{self, PodProfile},
    rows::{CacheKind, CacheReader, CacheWriter, OnVisible, SimChange},
    scenarios::seed::{
        self, Mode, Row, SeedParams,
        cache::{Classifier, SeedCache, Wiring},
        cluster::{InprocCluster, StreamFill, StreamPriority},
        controllers::{
            ControllerConfig, Controllers, DaemonListMode, DaemonSpec, PodManagement, Running,
            SetListMode, SetSpec,
        },
        pipeline::{HarnessCache, harness_pod_cache},
        slots::SlotLog,
    },
};

fn params() -> SeedParams {
    SeedParams {
        sets: 4,
        replicas: 30,
        nodes: 6,
        set_workers: 3,
        daemon_workers: 1,
        rate: 4000,
        startup_delay_ms: 20,
        max_time_s: 60.0,
        settle_s: 0.3,
        set_list: SetListMode::Namespace,
        daemon_list: DaemonListMode::OwnerIndex,
        policy: PodManagement::Parallel,
        pod_profile: Some(PodProfile::Small),
        http_pod_profile: PodProfile::Small,
        placement: Placement::Unpinned,
        // Tests share the machine: no real-time thread.
        stream_priority: StreamPriority::Normal,
        stream_fill: StreamFill::Refresh,
        pod_arena: false,
        informer_batch_window_s: None,
        informer_default_batch_window_s: Some(
            snapinformer_core::DEFAULT_BATCH_WINDOW.as_secs_f64(),
        ),
        baseline_batch_window_s: None,
        prefault_gib: 0.0,
        rest_s: 0.0,
    }
}

fn sets(n: usize, replicas: usize) -> Vec<SetSpec> {
    (0..n)
        .map(|i| SetSpec {
            namespace: pods::NAMESPACE.into(),
            name: format!("web-{i}"),
            uid: pods::owner_uid(i),
            replicas,
            index: i,
        })
        .collect()
}

fn daemon(nodes: usize) -> DaemonSpec {
    DaemonSpec {
        namespace: seed::DAEMON_NAMESPACE.into(),
        name: seed::DAEMON_NAME.into(),
        uid: "ds-uid".into(),
        nodes: (0..nodes).map(pods::node_name).collect(),
    }
}

fn config(read_your_writes: bool, set_list: SetListMode) -> ControllerConfig {
    ControllerConfig {
        read_your_writes,
        set_list,
        daemon_list: DaemonListMode::OwnerIndex,
        policy: PodManagement::Parallel,
        set_workers: 1,
        daemon_workers: 1,
        profile: PodProfile::Small,
        with_container: false,
    }
}

const WEB_0: &str = "default/web-0";
const DAEMON: &str = "kube-system/kube-proxy";

/// A cluster whose watch delivers nothing (no stream thread).
fn frozen_cluster() -> Arc<InprocCluster> {
    let queue: Arc<dyn Queue<Pod>> =
        Arc::new(RealFifo::without_known_objects(pods::access::<Pod>()));
    Arc::new(InprocCluster::new(queue, Arc::new(SlotLog::new()), Duration::ZERO))
}

/// The controllers over an idle cache (of `kind`; its visible version moves only when the
/// test says) and a frozen cluster, running on the current runtime.
struct Bench {
    store: Box<dyn CacheWriter>,
    visible: Arc<VisibleVersion>,
    cluster: Arc<InprocCluster>,
    running: Running,
}

impl Bench {
    fn start(kind: CacheKind, cfg: ControllerConfig, sets: Vec<SetSpec>, ds: DaemonSpec) -> Self {
        let store = kind.build();
        let visible = Arc::new(VisibleVersion::new("pods"));
        let Controllers { sets: s, daemons: d } = Controllers::new(&cfg);
        let controllers = Controllers {
            sets: s.owns_cache::<Pod>(visible.clone()),
            daemons: d.owns_cache::<Pod>(visible.clone()),
        };
        let cluster = frozen_cluster();
        let pod_cache = harness_pod_cache(store.reader());
        let running = controllers.spawn(cfg, sets, ds, cluster.clone(), pod_cache);
        Bench { store, visible, cluster, running }
    }

    /// Makes the cache show the cluster as it is (every pod `Running` if `running`), and its
    /// visible version the cluster's; tells the controllers, as a pipeline's handler would.
    fn show_cluster(&mut self, running: bool) {
        let pods: Vec<Arc<Pod>> = self
            .cluster
            .pods()
            .into_iter()
            .map(|p| {
                let mut p = Pod::clone(&p);
                if running {
                    p.status.get_or_insert_with(Default::default).phase = Some("Running".into());
                }
                Arc::new(p)
            })
            .collect();
        self.store
            .apply_changes(pods.iter().cloned().map(SimChange::Upsert).collect(), &mut |_, _| {});
        self.visible.advance(self.cluster.resource_version());
        for pod in &pods {
            self.running.sets().owned_added(&**pod);
            self.running.daemons().owned_added(&**pod);
        }
    }

    async fn stop(mut self) {
        within("stop", self.running.stop()).await.unwrap();
    }
}

/// Fails the test if `fut` does not finish within 60 s (of the paused clock, or real time).
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 60 s"))
}

/// Queues `key` again and waits for the reconcile it causes.
async fn reconcile_again<P>(handle: &Handle<P>, key: &str) {
    let s = handle.stats();
    handle.enqueue(ObjectKey::parse(key));
    reconciled(handle, s.successes + s.errors + s.panics + 1).await;
}

/// Waits until the controller behind `handle` has finished `n` reconciles.
async fn reconciled<P>(handle: &Handle<P>, n: u64) {
    within("reconciles", async {
        loop {
            let s = handle.stats();
            if s.successes + s.errors + s.panics >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_stale_cache_makes_the_statefulset_controller_get_a_409_and_stop_at_that_batch() {
    for list in [SetListMode::Namespace, SetListMode::OwnerIndex] {
        let b = Bench::start(CacheKind::Locked, config(false, list), sets(1, 5), daemon(2));
        let h = b.running.sets().clone();
        reconciled(&h, 1).await;
        assert_eq!(h.stats().created, 5, "{list:?}");
        // The cache has not seen the creates: the next sync creates ordinal 0 again, gets a 409
        // in its first batch, and stops there (client-go's slowStartBatch); the sync fails and
        // is backed off.
        h.enqueue(ObjectKey::parse(WEB_0));
        within("a failed sync", async {
            while h.stats().errors == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        let stats = h.stats();
        assert_eq!(stats.already_exists, stats.errors, "one 409 per failed sync: {stats:?}");
        assert_eq!(stats.created, 5, "{list:?}");
        assert_eq!(b.running.conflicts_409(), stats.already_exists);
        assert_eq!(b.cluster.pod_count(), 5 + 2, "{list:?}: the set's and the daemon's");
        b.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn with_read_your_writes_a_reconcile_waits_until_the_cache_shows_its_last_write() {
    let mut b = Bench::start(
        CacheKind::Snapshot,
        config(true, SetListMode::OwnerIndex),
        sets(1, 5),
        daemon(1),
    );
    let h = b.running.sets().clone();
    reconciled(&h, 1).await;
    assert_eq!(h.stats().created, 5);
    h.enqueue(ObjectKey::parse(WEB_0));
    // The reconcile waits for the cache (its timeout is 5 s); meanwhile the cache catches up.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(h.stats().successes, 1, "still waiting");
    b.show_cluster(false);
    reconciled(&h, 2).await;
    let stats = h.stats();
    assert_eq!((stats.ryw_waits, stats.ryw_timeouts), (1, 0), "{stats:?}");
    assert_eq!((stats.created, stats.already_exists), (5, 0), "{stats:?}");
    assert_eq!(
        b.running.counters.expectation_deferrals.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn when_the_read_your_writes_wait_times_out_expectations_still_prevent_a_second_create() {
    let b = Bench::start(
        CacheKind::Locked,
        config(true, SetListMode::Namespace),
        sets(1, 5),
        daemon(1),
    );
    let h = b.running.sets().clone();
    reconciled(&h, 1).await;
    reconcile_again(&h, WEB_0).await;
    let stats = h.stats();
    assert_eq!((stats.ryw_waits, stats.ryw_timeouts), (1, 1), "the cache never caught up");
    assert_eq!((stats.created, stats.already_exists), (5, 0), "{stats:?}");
    assert_eq!(
        b.running.counters.expectation_deferrals.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the five creates are still expected"
    );
    assert_eq!(b.visible.visible_version(), None);
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stale_cache_makes_the_daemonset_controller_create_a_second_pod_per_node() {
    for daemon_list in [DaemonListMode::OwnerIndex, DaemonListMode::NodeIndex] {
        let mut cfg = config(false, SetListMode::Namespace);
        cfg.daemon_list = daemon_list;
        let b = Bench::start(CacheKind::Snapshot, cfg, sets(1, 1), daemon(3));
        let h = b.running.daemons().clone();
        reconciled(&h, 1).await;
        reconcile_again(&h, DAEMON).await;
        assert_eq!(h.stats().created, 6, "{daemon_list:?}");
        assert_eq!(b.running.duplicate_daemon_pods(), 3);
        b.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_daemonset_controller_deletes_extra_pods_it_sees_on_a_node() {
    let mut b = Bench::start(
        CacheKind::Snapshot,
        config(false, SetListMode::Namespace),
        sets(1, 1),
        daemon(1),
    );
    let h = b.running.daemons().clone();
    reconciled(&h, 1).await;
    reconcile_again(&h, DAEMON).await;
    assert_eq!(b.cluster.pod_count(), 1 + 2, "a set pod and two daemon pods");
    // Now the cache shows both pods of the node: the controller keeps one.
    b.show_cluster(false);
    reconciled(&h, 3).await;
    assert_eq!(h.stats().deleted, 1);
    assert_eq!(b.cluster.pod_count(), 1 + 1);
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn ordered_ready_creates_one_pod_at_a_time_once_the_lower_ordinals_run() {
    let mut cfg = config(false, SetListMode::OwnerIndex);
    cfg.policy = PodManagement::OrderedReady;
    let mut b = Bench::start(CacheKind::Snapshot, cfg, sets(1, 3), daemon(1));
    let h = b.running.sets().clone();
    reconciled(&h, 1).await;
    assert_eq!(h.stats().created, 1, "only ordinal 0");
    b.show_cluster(false);
    reconciled(&h, 2).await;
    assert_eq!(h.stats().created, 1, "ordinal 0 is not running yet");
    b.show_cluster(true);
    reconciled(&h, 3).await;
    assert_eq!(h.stats().created, 2, "ordinal 1 once ordinal 0 runs");
    assert_eq!(h.stats().already_exists, 0);
    b.stop().await;
}

#[test]
fn every_cache_applies_deletes_and_serves_the_controllers_reads() {
    for kind in CacheKind::ALL {
        let mut store = kind.build();
        let reader = store.reader();
        let shape = pods::Shape::for_objects(20, 4).with_profile(PodProfile::Small);
        let all = pods::initial_pods(&shape);
        store.apply(all.clone(), &mut |_, _| {});
        assert_eq!(reader.list_namespace_selector(pods::NAMESPACE, "app", "web-0").len(), 20);
        assert_eq!(reader.by_owner(&pods::owner_uid(0)).len(), 20, "{kind:?}");
        assert_eq!(reader.by_node(&pods::node_name(1)).len(), 5, "{kind:?}");
        let key: Arc<str> = Arc::from(format!("{}/web-0-1", pods::NAMESPACE));
        store.apply_changes(
            vec![
                SimChange::Delete(key.clone(), Some(all[1].clone())),
                SimChange::Delete(key, None),
            ],
            &mut |_, _| {},
        );
        assert_eq!(reader.list_all().len(), 19, "{kind:?}");
        assert_eq!(reader.by_node(&pods::node_name(1)).len(), 4, "{kind:?}");
        assert_eq!(reader.by_owner(&pods::owner_uid(0)).len(), 19, "{kind:?}");
        assert_eq!(reader.borrowed().is_some(), kind.is_ours(), "{kind:?}");
    }
}

#[test]
fn with_read_your_writes_every_row_converges_in_process_without_wrong_decisions() {
    for cache in [CacheKind::Snapshot, CacheKind::Locked, CacheKind::LockedStd, CacheKind::KubeRs] {
        let row = Row { cache, read_your_writes: true };
        let report =
            seed::run_row(row, Mode::Inproc, &params(), None, &NoHeap, &|_| {}, false).unwrap();
        assert_eq!(report.conflicts_409, 0, "{cache:?}");
        assert_eq!(report.duplicate_daemon_pods, 0, "{cache:?}");
        assert!(report.time_to_all_running_s.is_some(), "{cache:?} did not converge");
        assert_eq!(report.set_creates, 120, "{cache:?}");
        assert_eq!(report.cache_pods, report.cluster_pods, "{cache:?}");
        assert_eq!(report.cluster_pods, 126, "{cache:?}");
        // Every pod ran before the end, so the stream started each one on schedule, once, after
        // delivering its create.
        let events = report.stream_events;
        assert_eq!(events.starts, 126, "{cache:?}: {events:?}");
        assert!(events.writes >= 126, "{cache:?}: {events:?}");
        // Slots left free by the writes and the starts (the settling time's at least) carry
        // refreshes of running pods.
        assert!(events.refreshes > 0, "{cache:?}: {events:?}");
        // The stream delivers each event's own copy: kube-rs' store copies it once, itself.
        assert_eq!(report.extra_copies, 0, "{cache:?}");
        assert!(report.staleness_us.count > 0, "{cache:?}");
        assert!(
            report.staleness_us.p50 >= report.staleness_from_queue_us.p50,
            "{cache:?}: staleness from the slot includes the time before the queue"
        );
        // Where the cores went while the controllers ran, by thread group.
        let cpu = |group: &str| report.cpu_by_thread_s.get(group).copied().unwrap_or(0.0);
        assert!(cpu("controller") > 0.0, "{cache:?}: {:?}", report.cpu_by_thread_s);
        assert!(cpu("watch-stream") > 0.0, "{cache:?}: {:?}", report.cpu_by_thread_s);
        let writer = if cache.is_ours() { "informer" } else { "applier" };
        assert!(cpu(writer) > 0.0, "{cache:?}: {writer}: {:?}", report.cpu_by_thread_s);
    }
}

#[test]
fn with_an_idle_fill_the_stream_delivers_no_refreshes_and_the_controllers_still_converge() {
    let params = SeedParams { stream_fill: StreamFill::Idle, ..params() };
    for cache in [CacheKind::SnapshotBg, CacheKind::LockedBatch] {
        let row = Row { cache, read_your_writes: true };
        let report =
            seed::run_row(row, Mode::Inproc, &params, None, &NoHeap, &|_| {}, false).unwrap();
        assert!(report.time_to_all_running_s.is_some(), "{cache:?} did not converge");
        assert_eq!(report.conflicts_409, 0, "{cache:?}");
        assert_eq!(report.cache_pods, report.cluster_pods, "{cache:?}");
        let events = report.stream_events;
        assert_eq!(events.refreshes, 0, "{cache:?}: {events:?}");
        assert_eq!(events.starts, 126, "{cache:?}: {events:?}");
        // The settling time alone leaves about a thousand slots with nothing to deliver.
        assert!(events.idle > 0, "{cache:?}: {events:?}");
    }
}

#[test]
fn over_http_the_controllers_converge_and_the_cache_equals_the_server() {
    let params = params();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(seed::start_server(&params)).unwrap();
    let info = seed::ServerInfo { url: server.url(), kubeconfig: None };
    let row = Row { cache: CacheKind::Snapshot, read_your_writes: true };
    let report = std::thread::scope(|s| {
        s.spawn(|| seed::run_row(row, Mode::Http, &params, Some(&info), &NoHeap, &|_| {}, false))
            .join()
            .unwrap()
    })
    .unwrap();
    let server_pods = server.count(snapinformer_apiserver::ResourceKind::Pod) as u64;
    runtime.block_on(server.shutdown());
    assert!(report.time_to_all_running_s.is_some(), "did not converge: {report:?}");
    assert_eq!(report.conflicts_409, 0);
    assert_eq!(report.duplicate_daemon_pods, 0);
    assert_eq!(report.cache_pods, server_pods);
    assert_eq!(server_pods, 126);
}

#[test]
fn rows_parse_from_their_names() {
    let row = Row::parse("locked-batch+ryw").unwrap();
    assert_eq!(row, Row { cache: CacheKind::LockedBatch, read_your_writes: true });
    assert_eq!(row.name(), "locked-batch+ryw");
    assert!(Row::parse("etcd").unwrap_err().contains("unknown cache"));
    let defaults = Row::defaults();
    assert_eq!(defaults.len(), 8);
    assert!(defaults[..4].iter().all(|r| r.read_your_writes), "+ryw rows come first");
    // Ours is the store as it is built by default: background reclamation.
    assert_eq!(defaults[0].name(), snapinformer_sim::scenarios::seed::report::HEADLINE);
    assert_eq!(defaults[0], Row { cache: CacheKind::SnapshotBg, read_your_writes: true });
}

fn wiring() -> Wiring {
    Wiring {
        classifier: Classifier { nodes: Default::default(), daemon_uid: "ds-uid".into() },
        slots: Arc::new(SlotLog::new()),
        core: None,
        batch_window: None,
        baseline_batch_window: Duration::ZERO,
    }
}

/// Whether the harness cache's readers see `rv` within 20 s.
fn shows(cache: &HarnessCache, rv: u64) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(cache.visible().wait_for_version(rv, Duration::from_secs(20))).is_ok()
}

#[test]
fn the_pipeline_makes_a_version_visible_and_reports_the_staleness_of_each_event() {
    let cache = HarnessCache::start(CacheKind::Snapshot, wiring());
    assert_eq!(cache.visible().visible_version(), None, "nothing queued yet");
    let shape = pods::Shape::for_objects(5, 1).with_profile(PodProfile::Small);
    for pod in pods::initial_pods(&shape) {
        cache.queue().add(pod).unwrap();
    }
    // Resource versions 1..=5: the applier makes 5 visible.
    assert!(shows(&cache, 5));
    let outcome = Box::new(cache).finish(false);
    assert_eq!(outcome.applied, 5);
    assert_eq!(outcome.staleness.from_queue.count(), 5);
    assert_eq!(outcome.staleness.with_slot, 0, "nothing was scheduled");
    assert_eq!(outcome.pods, 5);
}

/// A cache under test whose first apply waits until the test opens the gate, so that events
/// can arrive while a batch is being applied.
struct Gated {
    inner: Box<dyn CacheWriter>,
    gate: Option<std::sync::mpsc::Receiver<()>>,
    /// Told when the first apply has begun.
    began: std::sync::mpsc::Sender<()>,
}

impl CacheWriter for Gated {
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: OnVisible<'_>) {
        if let Some(gate) = self.gate.take() {
            let _ = self.began.send(());
            let _ = gate.recv_timeout(Duration::from_secs(20));
        }
        self.inner.apply_changes(changes, visible);
    }
    fn reader(&self) -> Arc<dyn CacheReader> {
        self.inner.reader()
    }
}

#[test]
fn a_baseline_batch_window_gathers_events_that_arrive_while_a_batch_is_applied() {
    let window = Duration::from_millis(400);
    for kind in [CacheKind::Locked, CacheKind::LockedBatch, CacheKind::KubeRs] {
        let (open, gate) = std::sync::mpsc::channel();
        let (began_tx, began_rx) = std::sync::mpsc::channel();
        let store = Gated { inner: kind.build(), gate: Some(gate), began: began_tx };
        let cache = HarnessCache::start_with(
            Box::new(store),
            kind.takes_events_by_value(),
            Wiring { baseline_batch_window: window, ..wiring() },
        );
        let shape = pods::Shape::for_objects(6, 1).with_profile(PodProfile::Small);
        let all = pods::initial_pods(&shape);
        // Before the first batch begins, so that its window ends no sooner than `window` later.
        let began = std::time::Instant::now();
        cache.queue().add(all[0].clone()).unwrap();
        began_rx.recv_timeout(Duration::from_secs(20)).expect("the first batch is applied");
        for pod in &all[1..] {
            cache.queue().add(pod.clone()).unwrap();
        }
        open.send(()).unwrap();
        assert!(shows(&cache, 1), "{kind:?}: the first batch");
        if began.elapsed() < window / 2 {
            assert_eq!(cache.visible().visible_version(), Some(1), "{kind:?}: inside the window");
        }
        assert!(shows(&cache, 6), "{kind:?}");
        let waited = began.elapsed();
        assert!(waited >= window, "{kind:?}: shown at the window's end, not after {waited:?}");
        let outcome = Box::new(cache).finish(false);
        assert_eq!(outcome.applied, 6, "{kind:?}");
    }
}

#[test]
fn a_baseline_batch_window_does_not_hold_back_events_the_applier_keeps_up_with() {
    // Longer than `shows` waits: an event held for the window would not be shown in time.
    let window = Duration::from_secs(60);
    for kind in [CacheKind::Locked, CacheKind::LockedBatch, CacheKind::KubeRs] {
        let cache = HarnessCache::start(kind, Wiring { baseline_batch_window: window, ..wiring() });
        let shape = pods::Shape::for_objects(4, 1).with_profile(PodProfile::Small);
        for (i, pod) in pods::initial_pods(&shape).into_iter().enumerate() {
            // Each arrives after the previous one is visible: the applier looks at the queue
            // before it announces a version, so the queue was empty each time a batch ended.
            cache.queue().add(pod).unwrap();
            assert!(shows(&cache, i as u64 + 1), "{kind:?}: event {} at once", i + 1);
        }
        let outcome = Box::new(cache).finish(false);
        assert_eq!(outcome.applied, 4, "{kind:?}");
    }
}

#[test]
fn a_delete_of_a_pod_only_the_store_knows_still_reaches_every_cache() {
    for kind in CacheKind::ALL {
        let cache = HarnessCache::start(kind, wiring());
        let shape = pods::Shape::for_objects(3, 1).with_profile(PodProfile::Small);
        let all = pods::initial_pods(&shape);
        for pod in &all {
            cache.queue().add(pod.clone()).unwrap();
        }
        assert!(shows(&cache, 3), "{kind:?}");
        // Nothing is queued for this key any more: only the store knows it.
        let mut gone = Pod::clone(&all[1]);
        gone.metadata.resource_version = Some("4".into());
        cache.queue().delete(Arc::new(gone)).unwrap();
        assert!(shows(&cache, 4), "{kind:?}: delete dropped");
        assert_eq!(cache.reader().list_all().len(), 2, "{kind:?}");
        drop(Box::new(cache).finish(false));
    }
}

#[test]
fn the_pipeline_tells_the_attached_controllers_which_owners_pods_changed() {
    let cache = HarnessCache::start(CacheKind::Locked, wiring());
    let controllers = cache.attach(Controllers::new(&config(true, SetListMode::Namespace)));
    let (sets, daemons) = (controllers.sets.handle(), controllers.daemons.handle());
    let shape = pods::Shape::for_objects(3, 1).with_profile(PodProfile::Small);
    let all = pods::initial_pods(&shape);
    for pod in &all {
        cache.queue().add(pod.clone()).unwrap();
    }
    assert!(shows(&cache, 3));
    // The handler thread follows the visible version: wait for its keys.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sets.queue().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Three pods of `web-0`: one key, deduplicated by the work queue; none for the daemon set.
    assert_eq!(sets.queue().get_timeout(Duration::ZERO), Ok(Some(ObjectKey::parse(WEB_0))));
    assert!(sets.queue().is_empty());
    assert!(daemons.queue().is_empty());
    drop(Box::new(cache).finish(false));
}

#[tokio::test]
async fn the_cluster_model_answers_pod_writes_as_a_server_does() {
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
    use snapinformer_runtime::{Deleted, Writes};
    use snapinformer_sim::scenarios::seed::cluster::Cluster;

    let cluster = frozen_cluster();
    let pods = cluster.pods("default");
    let code = |e: kube::Error| match e {
        kube::Error::Api(s) => (s.code, s.reason),
        other => panic!("not an API error: {other}"),
    };
    let pp = PostParams::default();
    let mut pod = Pod::default();
    pod.metadata.name = Some("web-0".into());
    let created = pods.create(&pp, &pod).await.unwrap();
    assert_eq!(created.metadata.resource_version.as_deref(), Some("1"));
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(code(pods.create(&pp, &pod).await.unwrap_err()), (409, "AlreadyExists".into()));
    let mut elsewhere = pod.clone();
    elsewhere.metadata.namespace = Some("other".into());
    assert_eq!(code(pods.create(&pp, &elsewhere).await.unwrap_err()).0, 400);

    // A replace on an outdated version conflicts; on the stored one it succeeds, keeping the
    // status (its own subresource).
    let mut stale = created.clone();
    stale.metadata.resource_version = Some("0".into());
    assert_eq!(
        code(pods.replace("web-0", &pp, &stale).await.unwrap_err()),
        (409, "Conflict".into())
    );
    let mut labelled = created.clone();
    labelled.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    labelled.status = Some(Default::default());
    let replaced = pods.replace("web-0", &pp, &labelled).await.unwrap();
    assert_eq!(replaced.metadata.resource_version.as_deref(), Some("2"));
    assert_eq!(replaced.status, None, "a replace does not write the status");
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    let running =
        serde_json::json!({"status": {"phase": "Running"}, "metadata": {"labels": {"tier": "a"}}});
    let patched =
        pods.patch_status("web-0", &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
    assert_eq!(patched.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    assert_eq!(patched.metadata.labels.as_ref().map(|l| l.len()), Some(1), "status only");
    let patched =
        pods.patch("web-0", &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
    assert_eq!(patched.metadata.labels.map(|l| l.len()), Some(2));
    assert_eq!(patched.status.and_then(|s| s.phase).as_deref(), Some("Running"), "kept");
    let apply = Patch::Apply(&running);
    assert_eq!(
        code(pods.patch("web-0", &PatchParams::default(), &apply).await.unwrap_err()).0,
        415
    );

    let Deleted::Object(gone) = pods.delete("web-0", &DeleteParams::default()).await.unwrap()
    else {
        panic!("the model answers a delete with the object");
    };
    assert_eq!(gone.metadata.resource_version.as_deref(), Some("5"));
    assert_eq!(code(pods.delete("web-0", &DeleteParams::default()).await.unwrap_err()).0, 404);
    assert_eq!(cluster.pod_count(), 0);
    assert_eq!(cluster.undelivered(), 5, "every write waits for the watch, in order");
}
