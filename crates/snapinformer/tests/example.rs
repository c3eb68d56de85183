//! The README's example controller (`examples/statefulset.rs`), run against the test API
//! server: it creates a StatefulSet's pods, scales them down, and never conflicts.

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/statefulset.rs"]
mod example;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use snapinformer::{Controller, ObjectKey, backoff_on_error, pods, statefulsets};
use snapinformer_apiserver::{Config, TestApiServer, generate};

async fn pod_names(api: &Api<Pod>) -> Vec<String> {
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

async fn eventually(what: &str, api: &Api<Pod>, want: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let names = pod_names(api).await;
        if names == want {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: pods {names:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_example_controller_creates_and_scales_a_statefulsets_pods_without_conflicts() {
    let server = TestApiServer::start(Config::default()).await.unwrap();
    let client = server.client().unwrap();
    server.create(&generate::statefulset("default", "web", 3)).unwrap();
    let sets = statefulsets(Api::all(client.clone())).build().unwrap();
    let pod_inf = pods(Api::all(client.clone())).build().unwrap();
    sets.start().unwrap();
    pod_inf.start().unwrap();
    assert!(sets.wait_for_sync(Duration::from_secs(30)).await);
    assert!(pod_inf.wait_for_sync(Duration::from_secs(30)).await);

    let data = Arc::new(example::Data { client: client.clone(), pods: pod_inf.informer().clone() });
    let controller = Controller::new("statefulset").for_informer(&sets).owns(&pod_inf).workers(4);
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(example::reconcile, backoff_on_error, data));

    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually("scale up", &pod_api, &["web-0", "web-1", "web-2"]).await;
    let set_api: Api<StatefulSet> = Api::namespaced(client, "default");
    let scale = serde_json::json!({ "spec": { "replicas": 1 } });
    set_api.patch("web", &PatchParams::default(), &Patch::Merge(&scale)).await.unwrap();
    eventually("scale down", &pod_api, &["web-0"]).await;

    let stats = handle.stats();
    assert_eq!(stats.errors, 0, "no write failed (no 409): {stats:?}");
    assert_eq!(stats.ryw_timeouts, 0);
    assert!(stats.successes >= 2);
    // Every write of the set was seen by the pod informer in the end.
    let key = ObjectKey::new(Some("default"), "web");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !handle.expectations(&key).is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "expectations never met");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.shutdown();
    let stopped =
        tokio::time::timeout(Duration::from_secs(30), run).await.unwrap().unwrap().unwrap();
    assert!(stopped.drained);
    pod_inf.shutdown().await;
    sets.shutdown().await;
    server.shutdown().await;
}
