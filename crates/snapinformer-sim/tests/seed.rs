//! The `seed` scenario's controllers and pipelines, at a small scale.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::{Queue, RealFifo};
use snapinformer_sim::{
    harness::{heap::NoHeap, placement::Placement},
    pods::{self, PodProfile},
    rows::{CacheKind, CacheWriter, SimChange},
    scenarios::seed::{
        self, Mode, Row, SeedParams,
        cache::{Classifier, PodCache, SeedCache, VisibleVersion, Wiring},
        cluster::{InprocCluster, StreamPriority},
        controllers::{
            ControllerConfig, Controllers, DaemonListMode, DaemonSpec, PodManagement, Queues,
            SetListMode, SetSpec, slow_start_batch,
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
    }
}

fn queues() -> Queues {
    Queues::new("kube-system/kube-proxy".into())
}

/// A cluster whose watch delivers nothing (no stream thread): the cache stays empty, as a
/// cache that has fallen behind does.
fn frozen_cluster() -> Arc<InprocCluster> {
    let queue: Arc<dyn Queue<Pod>> =
        Arc::new(RealFifo::without_known_objects(pods::access::<Pod>()));
    Arc::new(InprocCluster::new(queue, Arc::new(SlotLog::new()), Duration::ZERO))
}

/// A cache of `kind` that nothing feeds, read as the controllers read a harness cache.
fn idle_cache(kind: CacheKind) -> (Box<dyn CacheWriter>, Arc<dyn PodCache>, Arc<VisibleVersion>) {
    let store = kind.build();
    let visible = Arc::new(VisibleVersion::default());
    let cache = harness_pod_cache(store.reader(), visible.clone());
    (store, cache, visible)
}

#[test]
fn slow_start_batch_stops_after_the_first_batch_with_a_failure() {
    let mut calls = Vec::new();
    let (ok, err) = slow_start_batch(10, 1, None, |i| {
        calls.push(i);
        if i == 4 { Err(i) } else { Ok(()) }
    });
    // Batches [0], [1, 2], [3, 4, 5, 6]: the whole failed batch runs, nothing after it.
    assert_eq!(calls, (0..=6).collect::<Vec<_>>());
    assert_eq!((ok, err), (6, Some(4)));
    let (ok, err) = slow_start_batch(1200, 1, Some(500), |_| Ok::<(), ()>(()));
    assert_eq!((ok, err), (1200, None));
}

#[test]
fn slow_start_batch_doubles_up_to_its_cap() {
    // A failure at index i stops after the batch containing i: the last call made is that
    // batch's end.
    let end_of_batch_with = |i: usize, cap: Option<usize>| {
        let mut last = 0;
        slow_start_batch(5000, 1, cap, |j| {
            last = j;
            if j == i { Err(()) } else { Ok(()) }
        });
        last
    };
    assert_eq!(end_of_batch_with(0, Some(500)), 0);
    assert_eq!(end_of_batch_with(2, Some(500)), 2);
    assert_eq!(end_of_batch_with(3, Some(500)), 6);
    // 1 + 2 + ... + 256 = 511 ordinals, then batches of 500.
    assert_eq!(end_of_batch_with(511, Some(500)), 1010);
    assert_eq!(end_of_batch_with(511, None), 1022);
}

#[test]
fn a_stale_cache_makes_the_statefulset_controller_get_a_409_and_stop_at_that_batch() {
    for list in [SetListMode::Namespace, SetListMode::OwnerIndex] {
        let (_store, cache, _visible) = idle_cache(CacheKind::Locked);
        let cluster = frozen_cluster();
        let c =
            Controllers::new(config(false, list), sets(1, 5), daemon(2), cluster.clone(), queues());
        assert!(c.sync(&*cache, "default/web-0"));
        assert_eq!(c.counters.set_creates.load(Ordering::Relaxed), 5);
        assert_eq!(cluster.pod_count(), 5);
        // The cache has not seen the creates: the next sync creates ordinal 0 again, gets a 409
        // in its first batch, and stops there (client-go's slowStartBatch).
        assert!(!c.sync(&*cache, "default/web-0"), "the sync failed");
        assert_eq!(c.counters.conflicts_409.load(Ordering::Relaxed), 1, "{list:?}");
        assert_eq!(c.counters.set_creates.load(Ordering::Relaxed), 5);
        assert_eq!(cluster.pod_count(), 5);
    }
}

#[test]
fn read_your_writes_defers_a_sync_until_the_cache_includes_the_last_write() {
    let (_store, cache, visible) = idle_cache(CacheKind::Snapshot);
    let cluster = frozen_cluster();
    let c = Controllers::new(
        config(true, SetListMode::OwnerIndex),
        sets(1, 5),
        daemon(2),
        cluster.clone(),
        queues(),
    );
    assert!(c.sync(&*cache, "default/web-0"));
    assert!(c.sync(&*cache, "default/web-0"));
    assert_eq!(c.counters.set_creates.load(Ordering::Relaxed), 5);
    assert_eq!(c.counters.conflicts_409.load(Ordering::Relaxed), 0);
    assert_eq!(c.counters.ryw_deferrals.load(Ordering::Relaxed), 1);
    assert!(!visible.wait_for(1, Duration::from_millis(1)), "nothing is visible yet");
}

#[test]
fn a_stale_cache_makes_the_daemonset_controller_create_a_second_pod_per_node() {
    for daemon_list in [DaemonListMode::OwnerIndex, DaemonListMode::NodeIndex] {
        let (_store, cache, _visible) = idle_cache(CacheKind::Snapshot);
        let cluster = frozen_cluster();
        let mut cfg = config(false, SetListMode::Namespace);
        cfg.daemon_list = daemon_list;
        let c = Controllers::new(cfg, sets(1, 1), daemon(3), cluster.clone(), queues());
        assert!(c.sync(&*cache, "kube-system/kube-proxy"));
        assert!(c.sync(&*cache, "kube-system/kube-proxy"));
        assert_eq!(c.counters.daemon_creates.load(Ordering::Relaxed), 6, "{daemon_list:?}");
        assert_eq!(c.duplicate_daemon_pods(), 3);
    }
}

#[test]
fn the_daemonset_controller_deletes_extra_pods_it_sees_on_a_node() {
    let (mut store, cache, _visible) = idle_cache(CacheKind::Snapshot);
    let cluster = frozen_cluster();
    let c = Controllers::new(
        config(false, SetListMode::Namespace),
        sets(1, 1),
        daemon(1),
        cluster.clone(),
        queues(),
    );
    assert!(c.sync(&*cache, "kube-system/kube-proxy"));
    assert!(c.sync(&*cache, "kube-system/kube-proxy"));
    assert_eq!(cluster.pod_count(), 2);
    // Now the cache shows both pods of the node: the controller keeps one.
    let changes = cluster.pods().into_iter().map(SimChange::Upsert).collect();
    store.apply_changes(changes, &mut |_, _| {});
    assert!(c.sync(&*cache, "kube-system/kube-proxy"));
    assert_eq!(c.counters.daemon_deletes.load(Ordering::Relaxed), 1);
    assert_eq!(cluster.pod_count(), 1);
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
        // The stream delivers each event's own copy: kube-rs' store copies it once, itself.
        assert_eq!(report.extra_copies, 0, "{cache:?}");
        assert!(report.staleness_us.count > 0, "{cache:?}");
        assert!(
            report.staleness_us.p50 >= report.staleness_from_queue_us.p50,
            "{cache:?}: staleness from the slot includes the time before the queue"
        );
    }
}

#[test]
fn over_http_the_controllers_converge_and_the_cache_equals_the_server() {
    let params = params();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(seed::start_server(&params)).unwrap();
    let info = seed::ServerInfo { url: server.url() };
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
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_once_the_lower_ordinals_run() {
    let (mut store, cache, _visible) = idle_cache(CacheKind::Snapshot);
    let cluster = frozen_cluster();
    let mut cfg = config(false, SetListMode::OwnerIndex);
    cfg.policy = PodManagement::OrderedReady;
    let c = Controllers::new(cfg, sets(1, 3), daemon(1), cluster.clone(), queues());
    let show_cluster = |store: &mut Box<dyn CacheWriter>, running: bool| {
        let changes = cluster
            .pods()
            .into_iter()
            .map(|p| {
                let mut p = Pod::clone(&p);
                if running {
                    p.status.get_or_insert_with(Default::default).phase = Some("Running".into());
                }
                SimChange::Upsert(Arc::new(p))
            })
            .collect();
        store.apply_changes(changes, &mut |_, _| {});
    };
    assert!(c.sync(&*cache, "default/web-0"));
    assert_eq!(cluster.pod_count(), 1, "only ordinal 0");
    show_cluster(&mut store, false);
    assert!(c.sync(&*cache, "default/web-0"));
    assert_eq!(cluster.pod_count(), 1, "ordinal 0 is not running yet");
    show_cluster(&mut store, true);
    assert!(c.sync(&*cache, "default/web-0"));
    assert_eq!(cluster.pod_count(), 2, "ordinal 1 once ordinal 0 runs");
    assert_eq!(c.counters.conflicts_409.load(Ordering::Relaxed), 0);
}

fn wiring() -> Wiring {
    Wiring {
        classifier: Classifier { nodes: Default::default(), daemon_uid: "ds-uid".into() },
        notify: Arc::new(queues()),
        slots: Arc::new(SlotLog::new()),
        core: None,
    }
}

#[test]
fn the_pipeline_makes_a_version_visible_and_reports_the_staleness_of_each_event() {
    let cache = HarnessCache::start(CacheKind::Snapshot, wiring());
    assert!(!cache.wait_for(5, Duration::from_millis(10)));
    let shape = pods::Shape::for_objects(5, 1).with_profile(PodProfile::Small);
    for pod in pods::initial_pods(&shape) {
        cache.queue().add(pod).unwrap();
    }
    // Resource versions 1..=5: the applier makes 5 visible.
    assert!(cache.wait_for(5, Duration::from_secs(20)));
    let outcome = Box::new(cache).finish(false);
    assert_eq!(outcome.applied, 5);
    assert_eq!(outcome.staleness.from_queue.count(), 5);
    assert_eq!(outcome.staleness.with_slot, 0, "nothing was scheduled");
    assert_eq!(outcome.pods, 5);
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
        assert!(cache.wait_for(3, Duration::from_secs(20)), "{kind:?}");
        // Nothing is queued for this key any more: only the store knows it.
        let mut gone = Pod::clone(&all[1]);
        gone.metadata.resource_version = Some("4".into());
        cache.queue().delete(Arc::new(gone)).unwrap();
        assert!(cache.wait_for(4, Duration::from_secs(20)), "{kind:?}: delete dropped");
        assert_eq!(cache.reader().list_all().len(), 2, "{kind:?}");
        drop(Box::new(cache).finish(false));
    }
}
