//! Typed informers for Pods, Nodes, StatefulSets and DaemonSets, the shared-informer factory,
//! and the kube-rs watcher adapter, against the test API server.

mod common;

use std::time::Duration;

use common::{live::*, *};
use k8s_openapi::api::{
    apps::v1::{DaemonSet, StatefulSet},
    core::v1::{Node, Pod},
};
use kube::{
    Api,
    runtime::{WatchStreamExt, watcher},
};
use snapinformer_apiserver::{Config, generate};
use snapinformer_core::Informer;
use snapinformer_kube::{
    KubeInformerFactory, NODE_NAME_INDEX, OWNER_UID_INDEX, access, daemonsets, feed_watcher, nodes,
    pods, statefulsets, transform,
};

#[tokio::test]
async fn typed_informers_sync_and_index_pods_by_owner_uid_and_node() {
    let server = server(Config::default()).await;
    server.bulk_create_nodes(generate::nodes(3)).unwrap();
    let set = server.create(&generate::statefulset("default", "web", 6)).unwrap();
    let node_names: Vec<String> =
        (0..3).map(|i| generate::nodes(3)[i].metadata.name.clone().unwrap()).collect();
    server.bulk_create_pods(generate::statefulset_pods(&set, &node_names)).unwrap();
    server.create(&generate::daemonset("default", "agent")).unwrap();
    let client = client_for(&server.url());

    let pod_inf = pods(Api::all(client.clone()))
        .reflector(fast())
        .transform(transform::strip_managed_fields)
        .build()
        .unwrap();
    let node_inf = nodes(Api::<Node>::all(client.clone())).reflector(fast()).build().unwrap();
    let set_inf =
        statefulsets(Api::<StatefulSet>::all(client.clone())).reflector(fast()).build().unwrap();
    let ds_inf = daemonsets(Api::<DaemonSet>::all(client)).reflector(fast()).build().unwrap();
    pod_inf.start().unwrap();
    node_inf.start().unwrap();
    set_inf.start().unwrap();
    ds_inf.start().unwrap();
    for synced in [
        pod_inf.wait_for_sync(Duration::from_secs(30)).await,
        node_inf.wait_for_sync(Duration::from_secs(30)).await,
        set_inf.wait_for_sync(Duration::from_secs(30)).await,
        ds_inf.wait_for_sync(Duration::from_secs(30)).await,
    ] {
        assert!(synced);
    }
    assert_eq!(pod_inf.name(), "pods");
    assert_eq!(node_inf.snapshot().len(), 3);
    assert_eq!(set_inf.snapshot().len(), 1);
    assert_eq!(ds_inf.snapshot().len(), 1);
    let snap = pod_inf.snapshot();
    let uid = set.metadata.uid.as_deref().unwrap();
    assert_eq!(snap.by_index(OWNER_UID_INDEX, uid).unwrap().len(), 6);
    assert_eq!(snap.by_index(NODE_NAME_INDEX, &node_names[0]).unwrap().len(), 2);
    pod_inf.shutdown().await;
    node_inf.shutdown().await;
    set_inf.shutdown().await;
    ds_inf.shutdown().await;
}

#[tokio::test]
async fn kube_rs_watcher_stream_feeds_the_informer_and_relists_into_tombstones() {
    let server = server(Config::default()).await;
    for i in 0..10 {
        server.create(&generate::pod("default", &format!("a{i}"), None, &[])).unwrap();
    }
    let informer = Informer::<Pod>::builder(access()).name("pods").build().unwrap();
    let (model, handler) = recorder();
    informer.add_event_handler(handler).unwrap();
    informer.start().unwrap();
    let api: Api<Pod> = Api::all(server.client().unwrap());
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let feed = tokio::spawn(feed_watcher(stream, informer.queue().clone()));
    assert!(informer.wait_for_sync(Duration::from_secs(30)).await);
    let writer: Api<Pod> = Api::default_namespaced(client_for(&server.url()));
    delete(&writer, "a0").await;
    relabel(&writer, "a1", "x").await;
    // The watcher's next watch gets 410 and relists: a2 vanished meanwhile.
    server.faults().update(|f| f.force_watch_410 = 1);
    server.restart_with_compacted_history();
    delete(&writer, "a2").await;
    let expected = server_state(&server).await;
    eventually(30, "adapter converges", || {
        snapshot_state(&informer.snapshot()) == expected
            && model.lock().unwrap().objects == expected
    })
    .await;
    {
        let m = model.lock().unwrap();
        assert!(m.violations.is_empty(), "{:?}", m.violations);
        assert_eq!(m.deletes, 2);
    }
    feed.abort();
    informer.shutdown().await;
}

#[tokio::test]
async fn factory_shares_one_informer_and_one_reflector_per_resource() {
    let server = server(Config::default()).await;
    server.bulk_create_nodes(generate::nodes(2)).unwrap();
    for i in 0..4 {
        server.create(&generate::pod("default", &format!("p{i}"), None, &[])).unwrap();
    }
    let factory = KubeInformerFactory::new(client_for(&server.url())).reflector_config(fast());
    let for_controller_a = factory.pods().unwrap();
    let for_controller_b = factory.pods().unwrap();
    let node_informer = factory.nodes().unwrap();
    let (model, handler) = recorder();
    for_controller_b.add_event_handler(handler).unwrap();
    factory.start().unwrap();
    let synced = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    assert_eq!(
        synced.into_iter().collect::<Vec<_>>(),
        [("nodes".into(), true), ("pods".into(), true)]
    );
    assert_eq!(for_controller_a.snapshot().len(), 4);
    assert_eq!(node_informer.snapshot().len(), 2);
    eventually(10, "handler saw the pods", || model.lock().unwrap().objects.len() == 4).await;
    let status = factory.reflector_status("pods").unwrap();
    assert_eq!(status.stats.lists, 1, "one reflector for both controllers: {status:?}");
    assert!(factory.reflector_status("statefulsets").is_none());
    factory.shutdown().await;
    assert!(factory.pods().is_err(), "a shut-down factory builds nothing");
}
