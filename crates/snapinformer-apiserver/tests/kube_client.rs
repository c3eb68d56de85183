//! The `kube` crate's client and `kube_runtime::watcher`, unmodified, against the server.

mod common;

use std::time::Duration;

use common::bounded;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher::{self, Event};
use snapinformer_apiserver::{Config, KubeletConfig, ServerHandle, TestApiServer, generate};

async fn server(config: Config) -> (ServerHandle, Api<Pod>) {
    let server = TestApiServer::start(config).await.expect("server starts");
    let pods = Api::default_namespaced(server.client().expect("client"));
    (server, pods)
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// Collects watcher events until `done` says so, bounded in time.
async fn watch_until<S>(stream: &mut S, mut done: impl FnMut(&[String]) -> bool) -> Vec<String>
where
    S: futures::Stream<Item = Result<Event<Pod>, watcher::Error>> + Unpin,
{
    let mut seen = Vec::new();
    bounded("watcher events", async {
        while !done(&seen) {
            match stream.next().await {
                Some(Ok(Event::Init)) => seen.push("Init".to_owned()),
                Some(Ok(Event::InitApply(p))) => seen.push(format!("InitApply {}", name(&p))),
                Some(Ok(Event::InitDone)) => seen.push("InitDone".to_owned()),
                Some(Ok(Event::Apply(p))) => seen.push(format!("Apply {}", name(&p))),
                Some(Ok(Event::Delete(p))) => seen.push(format!("Delete {}", name(&p))),
                Some(Err(e)) => seen.push(format!("Error {e}")),
                None => break,
            }
        }
    })
    .await;
    seen
}

#[tokio::test]
async fn kube_client_lists_pages_with_continue_tokens() {
    let (s, pods) = server(Config::default()).await;
    s.bulk_create_pods(
        (0..25).map(|i| generate::pod("default", &format!("p{i:02}"), None, &[("app", "web")])),
    )
    .unwrap();
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(10);
    let mut pages = 0;
    loop {
        let page = bounded("list", pods.list(&params)).await.unwrap();
        pages += 1;
        names.extend(page.items.iter().map(|p| name(p).to_owned()));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names.len(), 25);
    let selected = bounded(
        "list",
        pods.list(&ListParams::default().labels("app=web").fields("metadata.name=p07")),
    )
    .await
    .unwrap();
    assert_eq!(selected.items.len(), 1);
}

#[tokio::test]
async fn kube_client_gets_already_exists_and_conflict_errors() {
    let (_s, pods) = server(Config::default()).await;
    let pod = generate::pod("default", "a", None, &[]);
    let created = bounded("create", pods.create(&PostParams::default(), &pod)).await.unwrap();
    let again = bounded("create", pods.create(&PostParams::default(), &pod)).await.unwrap_err();
    match again {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (409, "AlreadyExists"))
        }
        other => panic!("unexpected {other}"),
    }
    let mut stale = created.clone();
    bounded(
        "patch",
        pods.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "1"}}})),
        ),
    )
    .await
    .unwrap();
    stale.metadata.labels = Some([("y".to_owned(), "2".to_owned())].into());
    let conflict =
        bounded("replace", pods.replace("a", &PostParams::default(), &stale)).await.unwrap_err();
    match conflict {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"))
        }
        other => panic!("unexpected {other}"),
    }
    bounded("delete", pods.delete("a", &DeleteParams::default())).await.unwrap();
    let missing = bounded("get", pods.get("a")).await.unwrap_err();
    assert!(matches!(missing, kube::Error::Api(s) if s.code == 404));
}

#[tokio::test]
async fn kube_watch_from_a_compacted_version_yields_a_410_error_event() {
    let (s, pods) = server(Config { history_size: 2, ..Config::default() }).await;
    s.bulk_create_pods((0..5).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))
        .unwrap();
    let mut stream = bounded("watch", pods.watch(&WatchParams::default().timeout(2), "1"))
        .await
        .unwrap()
        .boxed();
    let first = bounded("event", stream.try_next()).await.unwrap();
    match first {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        other => panic!("expected an ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn kube_watch_gets_periodic_bookmarks() {
    let (s, pods) =
        server(Config { bookmark_interval: Duration::from_millis(100), ..Config::default() }).await;
    let rv = s.resource_version().to_string();
    let mut stream = bounded("watch", pods.watch(&WatchParams::default().timeout(5), &rv))
        .await
        .unwrap()
        .boxed();
    let first = bounded("bookmark", stream.try_next()).await.unwrap();
    match first {
        Some(WatchEvent::Bookmark(b)) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected a BOOKMARK, got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_sees_a_created_then_deleted_object_in_order() {
    let (_s, pods) = server(Config::default()).await;
    let mut stream = watcher::watcher(pods.clone(), watcher::Config::default()).boxed();
    let initial =
        watch_until(&mut stream, |seen| seen.last().is_some_and(|e| e == "InitDone")).await;
    assert_eq!(initial, ["Init", "InitDone"]);
    bounded(
        "create",
        pods.create(&PostParams::default(), &generate::pod("default", "a", None, &[])),
    )
    .await
    .unwrap();
    bounded("delete", pods.delete("a", &DeleteParams::default())).await.unwrap();
    let seen = watch_until(&mut stream, |seen| seen.len() >= 2).await;
    assert_eq!(seen, ["Apply a", "Delete a"]);
}

#[tokio::test]
async fn watcher_relists_after_a_forced_410() {
    let (s, pods) = server(Config::default()).await;
    s.bulk_create_pods([generate::pod("default", "a", None, &[])]).unwrap();
    let mut stream = watcher::watcher(pods.clone(), watcher::Config::default()).boxed();
    let initial =
        watch_until(&mut stream, |seen| seen.last().is_some_and(|e| e == "InitDone")).await;
    assert_eq!(initial, ["Init", "InitApply a", "InitDone"]);
    // The watch the watcher is running now is cut; its next watch request gets an ERROR 410.
    s.faults().update(|f| f.force_watch_410 = 1);
    s.restart_with_compacted_history();
    bounded(
        "create",
        pods.create(&PostParams::default(), &generate::pod("default", "b", None, &[])),
    )
    .await
    .unwrap();
    let seen = watch_until(&mut stream, |seen| seen.last().is_some_and(|e| e == "InitDone")).await;
    assert!(seen.iter().any(|e| e.starts_with("Error")), "{seen:?}");
    let relist: Vec<&String> = seen.iter().filter(|e| !e.starts_with("Error")).collect();
    assert_eq!(relist, ["Init", "InitApply a", "InitApply b", "InitDone"]);
    assert_eq!(s.faults().stats().watch_410s, 1);
}

#[tokio::test]
async fn watcher_with_streaming_lists_completes_its_initial_list() {
    let (s, pods) = server(Config::default()).await;
    s.bulk_create_pods((0..3).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))
        .unwrap();
    let mut stream =
        watcher::watcher(pods.clone(), watcher::Config::default().streaming_lists()).boxed();
    let seen = watch_until(&mut stream, |seen| seen.last().is_some_and(|e| e == "InitDone")).await;
    assert_eq!(seen, ["Init", "InitApply p0", "InitApply p1", "InitApply p2", "InitDone"]);
    bounded(
        "create",
        pods.create(&PostParams::default(), &generate::pod("default", "p3", None, &[])),
    )
    .await
    .unwrap();
    assert_eq!(watch_until(&mut stream, |seen| !seen.is_empty()).await, ["Apply p3"]);
}

#[tokio::test]
async fn watcher_recovers_from_watch_streams_cut_after_each_event() {
    let (s, pods) = server(Config::default()).await;
    s.faults().update(|f| f.watch_cut_after_events = Some(1));
    let mut stream = watcher::watcher(pods.clone(), watcher::Config::default()).boxed();
    watch_until(&mut stream, |seen| seen.last().is_some_and(|e| e == "InitDone")).await;
    for i in 0..3 {
        bounded(
            "create",
            pods.create(
                &PostParams::default(),
                &generate::pod("default", &format!("p{i}"), None, &[]),
            ),
        )
        .await
        .unwrap();
    }
    let seen = watch_until(&mut stream, |seen| {
        seen.iter().filter(|e| e.starts_with("Apply")).count() == 3
    })
    .await;
    let applied: Vec<&String> = seen.iter().filter(|e| e.starts_with("Apply")).collect();
    assert_eq!(applied, ["Apply p0", "Apply p1", "Apply p2"]);
    assert!(s.faults().stats().watches_cut >= 2);
}

#[tokio::test]
async fn simulated_kubelet_moves_bound_pods_to_running() {
    let config = Config {
        kubelet: Some(KubeletConfig { startup_delay: Duration::from_millis(50), schedule: false }),
        ..Config::default()
    };
    let (s, pods) = server(config).await;
    s.bulk_create_nodes(generate::nodes(2)).unwrap();
    let set = s.create(&generate::statefulset("default", "web", 4)).unwrap();
    s.bulk_create_pods(generate::statefulset_pods(
        &set,
        &["node-00000".into(), "node-00001".into()],
    ))
    .unwrap();
    bounded(
        "create",
        pods.create(&PostParams::default(), &generate::pod("default", "unbound", None, &[])),
    )
    .await
    .unwrap();
    bounded("pods running", async {
        loop {
            let running =
                pods.list(&ListParams::default().fields("status.phase=Running")).await.unwrap();
            if running.items.len() == 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let unbound = bounded("get", pods.get("unbound")).await.unwrap();
    assert_eq!(unbound.status.unwrap().phase.as_deref(), Some("Pending"));
    let nodes: Api<Node> = Api::all(s.client().unwrap());
    assert_eq!(bounded("list", nodes.list(&ListParams::default())).await.unwrap().items.len(), 2);
    let sets: Api<StatefulSet> = Api::default_namespaced(s.client().unwrap());
    assert_eq!(bounded("get", sets.get("web")).await.unwrap().metadata.generation, Some(1));
}

#[tokio::test]
async fn bulk_created_pods_are_listed_across_namespaces_and_by_node() {
    let (s, _) = server(Config::default()).await;
    let nodes: Vec<String> = (0..10).map(|i| format!("node-{i:05}")).collect();
    for ns in ["a", "b"] {
        let mut set = generate::statefulset(ns, "web", 1000);
        set.metadata.uid = Some(format!("uid-{ns}"));
        s.bulk_create_pods(generate::statefulset_pods(&set, &nodes)).unwrap();
    }
    let all: Api<Pod> = Api::all(s.client().unwrap());
    let everything = bounded("list", all.list(&ListParams::default())).await.unwrap();
    assert_eq!(everything.items.len(), 2000);
    let on_node =
        bounded("list", all.list(&ListParams::default().fields("spec.nodeName=node-00003")))
            .await
            .unwrap();
    assert_eq!(on_node.items.len(), 200);
    let in_b: Api<Pod> = Api::namespaced(s.client().unwrap(), "b");
    assert_eq!(bounded("list", in_b.list(&ListParams::default())).await.unwrap().items.len(), 1000);
}

#[tokio::test]
async fn metadata_watcher_gets_partial_object_metadata() {
    use kube::core::PartialObjectMeta;
    let (s, pods) = server(Config::default()).await;
    s.bulk_create_pods([generate::pod("default", "a", None, &[("app", "web")])]).unwrap();
    let list = bounded("list", pods.list_metadata(&ListParams::default())).await.unwrap();
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("a"));
    let metas: Api<PartialObjectMeta<Pod>> = Api::default_namespaced(s.client().unwrap());
    let mut stream = watcher::watcher(metas, watcher::Config::default()).boxed();
    let first: Vec<PartialObjectMeta<Pod>> = bounded("metadata events", async {
        let mut got = Vec::new();
        while let Some(event) = stream.try_next().await.unwrap() {
            match event {
                Event::InitApply(meta) => got.push(meta),
                Event::InitDone => break,
                _ => {}
            }
        }
        got
    })
    .await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].metadata.labels.as_ref().unwrap()["app"], "web");
}

#[tokio::test]
async fn concurrent_patches_lose_no_update_and_watch_versions_strictly_increase() {
    let (s, pods) = server(Config::default()).await;
    let start = s.resource_version();
    bounded(
        "create",
        pods.create(&PostParams::default(), &generate::pod("default", "shared", None, &[])),
    )
    .await
    .unwrap();
    let writers: Vec<_> = (0..40)
        .map(|i| {
            let pods = pods.clone();
            tokio::spawn(async move {
                let patch =
                    serde_json::json!({"metadata": {"labels": {format!("writer-{i}"): "yes"}}});
                pods.patch("shared", &PatchParams::default(), &Patch::Strategic(patch)).await
            })
        })
        .collect();
    for writer in writers {
        bounded("patch", writer).await.unwrap().unwrap();
    }
    let shared = bounded("get", pods.get("shared")).await.unwrap();
    assert_eq!(shared.metadata.labels.unwrap().len(), 40, "every concurrent patch is kept");
    let mut stream =
        bounded("watch", pods.watch(&WatchParams::default().timeout(1), &start.to_string()))
            .await
            .unwrap()
            .boxed();
    let mut versions = Vec::new();
    bounded("events", async {
        while let Some(event) = stream.try_next().await.unwrap() {
            if let WatchEvent::Added(p) | WatchEvent::Modified(p) = event {
                versions.push(p.metadata.resource_version.unwrap().parse::<u64>().unwrap());
            }
        }
    })
    .await;
    assert_eq!(versions.len(), 41);
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
}

#[tokio::test]
async fn kube_discovery_finds_the_served_resources_plain_and_aggregated() {
    let (s, _) = server(Config::default()).await;
    for aggregated in [false, true] {
        let discovery = kube::Discovery::new(s.client().unwrap());
        let discovery = bounded("discovery", async {
            if aggregated { discovery.run_aggregated().await } else { discovery.run().await }
        })
        .await
        .unwrap();
        let mut kinds: Vec<String> = discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .map(|(resource, _)| format!("{}/{}", resource.group, resource.kind))
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            [
                "/Event",
                "/Namespace",
                "/Node",
                "/PersistentVolumeClaim",
                "/Pod",
                "apps/ControllerRevision",
                "apps/DaemonSet",
                "apps/StatefulSet",
                "coordination.k8s.io/Lease",
                "events.k8s.io/Event",
            ],
            "aggregated: {aggregated}"
        );
    }
}

#[tokio::test]
async fn simulated_scheduler_binds_statefulset_and_daemonset_pods_and_the_kubelet_runs_them() {
    let config = Config {
        kubelet: Some(KubeletConfig { startup_delay: Duration::from_millis(20), schedule: true }),
        ..Config::default()
    };
    let (s, pods) = server(config).await;
    // Pods created before any node exists stay pending until nodes appear.
    let set = s.create(&generate::statefulset("default", "web", 6)).unwrap();
    s.bulk_create_pods(generate::statefulset_pods(&set, &[])).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(bounded("get", pods.get("web-0")).await.unwrap().spec.unwrap().node_name.is_none());
    s.bulk_create_nodes(generate::nodes(3)).unwrap();
    let mut pinned = generate::pod("default", "daemon-on-2", None, &[]);
    pinned.spec.as_mut().unwrap().affinity = Some(serde_json::from_value(serde_json::json!({
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-00002"]}]}]}}
    })).unwrap());
    bounded("create", pods.create(&PostParams::default(), &pinned)).await.unwrap();
    let running = bounded("all running", async {
        loop {
            let list =
                pods.list(&ListParams::default().fields("status.phase=Running")).await.unwrap();
            if list.items.len() == 7 {
                break list.items;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let node_of = |name: &str| {
        running
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap()
            .spec
            .as_ref()
            .unwrap()
            .node_name
            .clone()
            .unwrap()
    };
    assert_eq!(node_of("daemon-on-2"), "node-00002");
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..6 {
        *per_node.entry(node_of(&format!("web-{i}"))).or_default() += 1;
    }
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        [2, 2, 2],
        "round-robin: {per_node:?}"
    );
}
