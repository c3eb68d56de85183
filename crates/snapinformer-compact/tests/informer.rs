//! The compact pod informer against the test API server: it syncs to the same pods as the
//! plain informer, field for field; handlers get old and new compact objects; indexes and
//! transforms work as on the plain informer.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use snapinformer_apiserver::{Config, TestApiServer, generate};
use snapinformer_compact::{CompactPod, pods_compact, transform};
use snapinformer_core::Notification;
use snapinformer_kube::{NODE_NAME_INDEX, OWNER_UID_INDEX, pods};

/// An update a handler received: old and new object.
type Update = (Arc<CompactPod>, Arc<CompactPod>);

fn client_for(url: &str) -> kube::Client {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.default_namespace = "default".into();
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).unwrap()
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_informer_holds_the_same_pods_as_the_plain_one_and_notifies_old_and_new() {
    let server = TestApiServer::start(Config::default()).await.unwrap();
    let nodes = generate::nodes(3);
    let node_names: Vec<String> = nodes.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
    server.bulk_create_nodes(nodes).unwrap();
    let set = server.create(&generate::statefulset("default", "web", 8)).unwrap();
    server.bulk_create_pods(generate::statefulset_pods(&set, &node_names)).unwrap();
    let client = client_for(&server.url());

    let plain = pods(Api::all(client.clone())).build().unwrap();
    let compact = pods_compact(Api::all(client.clone())).build().unwrap();
    let stripped = pods_compact(Api::all(client.clone()))
        .transform(transform::strip_managed_fields)
        .build()
        .unwrap();
    let seen: Arc<Mutex<Vec<Update>>> = Arc::default();
    let sink = seen.clone();
    compact
        .add_event_handler(move |n: &Notification<CompactPod>| {
            if let Notification::Update { old, new } = n {
                sink.lock().unwrap().push((old.clone(), new.clone()));
            }
        })
        .unwrap();
    for informer_started in [plain.start(), compact.start(), stripped.start()] {
        informer_started.unwrap();
    }
    assert!(plain.wait_for_sync(Duration::from_secs(30)).await);
    assert!(compact.wait_for_sync(Duration::from_secs(30)).await);
    assert!(stripped.wait_for_sync(Duration::from_secs(30)).await);

    let check_same = |what: &str| {
        let (p, c) = (plain.snapshot(), compact.snapshot());
        assert_eq!(p.len(), c.len(), "{what}");
        for pod in p.list_refs() {
            let key = format!("default/{}", pod.metadata.name.as_deref().unwrap());
            let got = c.get_by_key(&key).unwrap_or_else(|| panic!("{what}: {key} missing"));
            assert_eq!(got.to_json(), serde_json::to_value(&**pod).unwrap(), "{what}: {key}");
            assert_eq!(&got.to_pod().unwrap(), &**pod, "{what}: {key}");
        }
    };
    check_same("after sync");
    let set_uid = set.metadata.uid.clone().unwrap();
    let snap = compact.snapshot();
    assert_eq!(snap.by_index(OWNER_UID_INDEX, &set_uid).unwrap().len(), 8);
    let on_node = snap.by_index(NODE_NAME_INDEX, &node_names[0]).unwrap();
    assert!(!on_node.is_empty());
    assert!(on_node.iter().all(|p| p.node_name() == Some(node_names[0].as_str())));
    assert!(stripped.snapshot().list_refs().iter().all(|p| p.managed_fields().is_none()));

    // An update reaches handlers as old and new compact pods.
    let api: Api<Pod> = Api::namespaced(client, "default");
    let patch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    api.patch("web-3", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually("the update to reach the handler", || {
        seen.lock().unwrap().iter().any(|(_, new)| new.label("touched") == Some("yes"))
    })
    .await;
    let (old, new) = seen
        .lock()
        .unwrap()
        .iter()
        .find(|(_, new)| new.label("touched") == Some("yes"))
        .cloned()
        .unwrap();
    assert_eq!(old.name(), Some("web-3"));
    assert_eq!(old.label("touched"), None);
    assert_ne!(old.resource_version(), new.resource_version());
    assert!(old.containers().unwrap().ptr_eq(new.containers().unwrap()), "unchanged parts shared");
    eventually("the plain informer to see it", || {
        plain
            .snapshot()
            .get_by_key("default/web-3")
            .is_some_and(|p| p.metadata.labels.as_ref().and_then(|l| l.get("touched")).is_some())
    })
    .await;
    check_same("after the update");

    plain.shutdown().await;
    compact.shutdown().await;
    stripped.shutdown().await;
    server.shutdown().await;
}
