//! The `seed` scenario's controllers and pipeline, at a small scale.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::{DeltaFifo, Queue};
use snapinformer_sim::{
    backends::{BackendKind, SimChange},
    pods::{self, PodProfile},
    seed::{
        self, Mode, Row, SeedParams,
        cache::Visible,
        cluster::InprocCluster,
        controllers::{
            ControllerConfig, Controllers, DaemonSpec, PodManagement, Queues, SetListMode, SetSpec,
        },
    },
    store_scenario::HeapMeter,
};

struct NoHeap;

impl HeapMeter for NoHeap {
    fn current(&self) -> u64 {
        0
    }
    fn peak(&self) -> u64 {
        0
    }
}

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
        policy: PodManagement::Parallel,
        pod_profile: Some(PodProfile::Small),
        http_pod_profile: PodProfile::Small,
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
        policy: PodManagement::Parallel,
        set_workers: 1,
        daemon_workers: 1,
        profile: PodProfile::Small,
        daemon_list_once: false,
    }
}

/// A cluster whose watch delivers nothing (no stream thread): the cache stays empty, as a
/// cache that has fallen behind does.
fn frozen_cluster() -> Arc<InprocCluster> {
    let queue: Arc<dyn Queue<Pod>> =
        Arc::new(DeltaFifo::without_known_objects(pods::access::<Pod>()));
    Arc::new(InprocCluster::new(queue, Duration::ZERO))
}

#[test]
fn a_stale_cache_makes_the_statefulset_controller_recreate_pods_and_get_409s() {
    for list in [SetListMode::Namespace, SetListMode::OwnerIndex] {
        let store = BackendKind::Locked.build();
        let reader = store.reader();
        let cluster = frozen_cluster();
        let c = Controllers::new(
            config(false, list),
            sets(1, 5),
            daemon(2),
            cluster.clone(),
            Arc::new(Visible::default()),
            Queues::new("kube-system/kube-proxy".into()),
        );
        assert!(c.sync(&*reader, "default/web-0"));
        assert_eq!(c.counters.set_creates.load(Ordering::Relaxed), 5);
        assert_eq!(cluster.pod_count(), 5);
        // The cache has not seen the creates: the next sync creates all five again.
        assert!(c.sync(&*reader, "default/web-0"));
        assert_eq!(c.counters.conflicts_409.load(Ordering::Relaxed), 5, "{list:?}");
        assert_eq!(cluster.pod_count(), 5);
    }
}

#[test]
fn read_your_writes_defers_a_sync_until_the_cache_includes_the_last_write() {
    let store = BackendKind::Snapshot.build();
    let reader = store.reader();
    let cluster = frozen_cluster();
    let visible = Arc::new(Visible::default());
    let c = Controllers::new(
        config(true, SetListMode::OwnerIndex),
        sets(1, 5),
        daemon(2),
        cluster.clone(),
        visible.clone(),
        Queues::new("kube-system/kube-proxy".into()),
    );
    assert!(c.sync(&*reader, "default/web-0"));
    assert!(c.sync(&*reader, "default/web-0"));
    assert_eq!(c.counters.set_creates.load(Ordering::Relaxed), 5);
    assert_eq!(c.counters.conflicts_409.load(Ordering::Relaxed), 0);
    assert_eq!(c.counters.ryw_deferrals.load(Ordering::Relaxed), 1);
    assert!(!visible.wait_for(1, Duration::from_millis(1)), "nothing is visible yet");
}

#[test]
fn a_stale_cache_makes_the_daemonset_controller_create_a_second_pod_per_node() {
    let store = BackendKind::Snapshot.build();
    let reader = store.reader();
    let cluster = frozen_cluster();
    let c = Controllers::new(
        config(false, SetListMode::Namespace),
        sets(1, 1),
        daemon(3),
        cluster.clone(),
        Arc::new(Visible::default()),
        Queues::new("kube-system/kube-proxy".into()),
    );
    assert!(c.sync(&*reader, "kube-system/kube-proxy"));
    assert!(c.sync(&*reader, "kube-system/kube-proxy"));
    assert_eq!(c.counters.daemon_creates.load(Ordering::Relaxed), 6);
    assert_eq!(c.duplicate_daemon_pods(), 3);
}

#[test]
fn the_daemonset_controller_deletes_extra_pods_it_sees_on_a_node() {
    let mut store = BackendKind::Snapshot.build();
    let reader = store.reader();
    let cluster = frozen_cluster();
    let c = Controllers::new(
        config(false, SetListMode::Namespace),
        sets(1, 1),
        daemon(1),
        cluster.clone(),
        Arc::new(Visible::default()),
        Queues::new("kube-system/kube-proxy".into()),
    );
    assert!(c.sync(&*reader, "kube-system/kube-proxy"));
    assert!(c.sync(&*reader, "kube-system/kube-proxy"));
    assert_eq!(cluster.pod_count(), 2);
    // Now the cache shows both pods of the node: the controller keeps one.
    let changes = cluster.pods().into_iter().map(SimChange::Upsert).collect();
    store.apply_changes(changes, &mut |_, _| {});
    assert!(c.sync(&*reader, "kube-system/kube-proxy"));
    assert_eq!(c.counters.daemon_deletes.load(Ordering::Relaxed), 1);
    assert_eq!(cluster.pod_count(), 1);
}

#[test]
fn every_backend_applies_deletes_and_serves_the_controllers_reads() {
    for kind in BackendKind::ALL {
        let mut store = kind.build();
        let reader = store.reader();
        let shape = pods::Shape::for_objects(20, 4).with_profile(PodProfile::Small);
        let all = pods::initial_pods(&shape);
        store.apply(all.clone(), &mut |_, _| {});
        assert_eq!(reader.pods_in_namespace(pods::NAMESPACE, "app", "web-0").len(), 20, "{kind:?}");
        assert_eq!(reader.pods_by_owner(&pods::owner_uid(0)).len(), 20, "{kind:?}");
        assert_eq!(reader.pods_by_node(&pods::node_name(1)).len(), 5, "{kind:?}");
        let key: Arc<str> = Arc::from(format!("{}/web-0-1", pods::NAMESPACE));
        store.apply_changes(
            vec![
                SimChange::Delete(key.clone(), Some(all[1].clone())),
                SimChange::Delete(key, None),
            ],
            &mut |_, _| {},
        );
        assert_eq!(reader.list_all(), 19, "{kind:?}");
        assert_eq!(reader.pods_by_node(&pods::node_name(1)).len(), 4, "{kind:?}");
        assert_eq!(reader.pods_by_owner(&pods::owner_uid(0)).len(), 19, "{kind:?}");
    }
}

#[test]
fn with_read_your_writes_every_backend_converges_in_process_without_wrong_decisions() {
    for backend in [BackendKind::Snapshot, BackendKind::Locked, BackendKind::KubeRs] {
        let row = Row { backend, read_your_writes: true };
        let report =
            seed::run_row(row, Mode::Inproc, &params(), None, &NoHeap, &|_| {}, false).unwrap();
        assert_eq!(report.conflicts_409, 0, "{backend:?}");
        assert_eq!(report.duplicate_daemon_pods, 0, "{backend:?}");
        assert!(report.time_to_all_running_s.is_some(), "{backend:?} did not converge");
        assert_eq!(report.set_creates, 120, "{backend:?}");
        assert_eq!(report.cache_pods, report.cluster_pods, "{backend:?}");
        assert_eq!(report.cluster_pods, 126, "{backend:?}");
    }
}

#[test]
fn over_http_the_controllers_converge_and_the_cache_equals_the_server() {
    let params = params();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(seed::start_server(&params)).unwrap();
    let info = seed::ServerInfo { url: server.url() };
    let row = Row { backend: BackendKind::Snapshot, read_your_writes: true };
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
    assert_eq!(row, Row { backend: BackendKind::LockedBatch, read_your_writes: true });
    assert_eq!(row.name(), "locked-batch+ryw");
    assert!(Row::parse("etcd").unwrap_err().contains("unknown backend"));
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_once_the_lower_ordinals_run() {
    let mut store = BackendKind::Snapshot.build();
    let reader = store.reader();
    let cluster = frozen_cluster();
    let mut cfg = config(false, SetListMode::OwnerIndex);
    cfg.policy = PodManagement::OrderedReady;
    let c = Controllers::new(
        cfg,
        sets(1, 3),
        daemon(1),
        cluster.clone(),
        Arc::new(Visible::default()),
        Queues::new("kube-system/kube-proxy".into()),
    );
    let show_cluster = |store: &mut Box<dyn snapinformer_sim::backends::SimStore>,
                        running: bool| {
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
    assert!(c.sync(&*reader, "default/web-0"));
    assert_eq!(cluster.pod_count(), 1, "only ordinal 0");
    show_cluster(&mut store, false);
    assert!(c.sync(&*reader, "default/web-0"));
    assert_eq!(cluster.pod_count(), 1, "ordinal 0 is not running yet");
    show_cluster(&mut store, true);
    assert!(c.sync(&*reader, "default/web-0"));
    assert_eq!(cluster.pod_count(), 2, "ordinal 1 once ordinal 0 runs");
    assert_eq!(c.counters.conflicts_409.load(Ordering::Relaxed), 0);
}

#[test]
fn waiting_for_a_visible_version_returns_once_it_is_reached_or_times_out() {
    let store = BackendKind::Snapshot.build();
    let queues = Queues::new("kube-system/kube-proxy".into());
    let classifier = snapinformer_sim::seed::cache::Classifier {
        nodes: Default::default(),
        daemon_uid: "ds-uid".into(),
    };
    let cache =
        snapinformer_sim::seed::cache::Cache::start(store, classifier, Arc::new(queues), None);
    assert!(!cache.visible.wait_for(5, Duration::from_millis(10)));
    let shape = pods::Shape::for_objects(5, 1).with_profile(PodProfile::Small);
    for pod in pods::initial_pods(&shape) {
        cache.queue.add(pod).unwrap();
    }
    // Resource versions 1..=5: the applier makes 5 visible.
    assert!(cache.visible.wait_for(5, Duration::from_secs(20)));
    assert_eq!(cache.counters.applied.load(Ordering::Relaxed), 5);
    let (_store, staleness) = cache.stop();
    assert_eq!(staleness.count(), 5);
}

#[test]
fn a_delete_of_a_pod_only_the_store_knows_still_reaches_every_backend() {
    for kind in BackendKind::ALL {
        let store = kind.build();
        let reader = store.reader();
        let classifier = snapinformer_sim::seed::cache::Classifier {
            nodes: Default::default(),
            daemon_uid: "ds-uid".into(),
        };
        let queues = Queues::new("kube-system/kube-proxy".into());
        let cache =
            snapinformer_sim::seed::cache::Cache::start(store, classifier, Arc::new(queues), None);
        let shape = pods::Shape::for_objects(3, 1).with_profile(PodProfile::Small);
        let all = pods::initial_pods(&shape);
        for pod in &all {
            cache.queue.add(pod.clone()).unwrap();
        }
        assert!(cache.visible.wait_for(3, Duration::from_secs(20)), "{kind:?}");
        // Nothing is queued for this key any more: only the store knows it.
        let mut gone = Pod::clone(&all[1]);
        gone.metadata.resource_version = Some("4".into());
        cache.queue.delete(Arc::new(gone)).unwrap();
        assert!(cache.visible.wait_for(4, Duration::from_secs(20)), "{kind:?}: delete dropped");
        assert_eq!(reader.list_all(), 2, "{kind:?}");
        drop(cache.stop());
    }
}
