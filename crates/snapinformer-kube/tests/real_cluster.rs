//! The reflector, typed informers, the factory and the kube-rs watcher adapter against a real
//! kube-apiserver and etcd (`scripts/real-cluster`, versions in `realcluster/versions.env`).
//!
//! Two clusters are shared by the tests of this binary: `cache` (kube-apiserver's defaults,
//! watch cache on) and `nocache` (`--watch-cache=false`: lists and watches go to etcd). Each
//! test works in a namespace of its own and leaves the servers running; the restarts and
//! compactions, which disturb everything on a cluster, and the priority-and-fairness test are
//! in `real_cluster_exclusive.rs`.
//!
//! Every step compares the informer's snapshot with a fresh list from the server: names, UIDs
//! and resource versions, after `wait_for` the list's version (see [`real::SyncBy`]).
//!
//! Without Go these tests print `SKIPPED: ...` and pass, unless
//! `SNAPINFORMER_REQUIRE_REAL_CLUSTER=1`.

mod common;
mod real;

use std::{
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use common::recorder;
use k8s_openapi::{
    api::{
        apps::v1::{StatefulSet, StatefulSetSpec},
        core::v1::{ConfigMap, Pod, PodTemplateSpec},
    },
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::{
    Api,
    api::{DeleteParams, ObjectMeta, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use real::*;
use snapinformer_core::Informer;
use snapinformer_kube::{
    BackoffConfig, KubeInformer, KubeInformerFactory, ReflectorConfig, access, feed_watcher, pods,
};

static CACHE: OnceLock<Option<Arc<RealCluster>>> = OnceLock::new();
static NOCACHE: OnceLock<Option<Arc<RealCluster>>> = OnceLock::new();

/// The cluster with kube-apiserver's defaults (watch cache on).
fn cache() -> Option<Arc<RealCluster>> {
    shared(&CACHE, "cache", &[])
}

/// The cluster with `--watch-cache=false`.
fn nocache() -> Option<Arc<RealCluster>> {
    shared(&NOCACHE, "nocache", &["--no-watch-cache"])
}

/// Short watches (5 to 10 s), so that a quiet informer gets a bookmark every few seconds (the
/// watch cache sends one two seconds before a watch's timeout), and a backoff that rides out
/// failures in well under a second.
fn config() -> ReflectorConfig {
    ReflectorConfig::new().min_watch_timeout(Duration::from_secs(5)).backoff(
        BackoffConfig::new()
            .initial(Duration::from_millis(50))
            .max(Duration::from_millis(500))
            .jitter(0.5),
    )
}

/// A started pod informer over one namespace with a recording handler, synced.
async fn pod_informer(
    client: &kube::Client,
    namespace: &str,
    config: ReflectorConfig,
) -> (KubeInformer<Pod>, common::SharedModel) {
    let informer =
        pods(Api::namespaced(client.clone(), namespace)).reflector(config).build().unwrap();
    let (model, handler) = recorder();
    informer.add_event_handler(handler).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_sync(Duration::from_secs(120)).await, "initial sync");
    (informer, model)
}

/// Adds, updates and deletes pods, checking the informer against the server after each.
async fn churn(
    informer: &KubeInformer<Pod>,
    api: &Api<Pod>,
    namespace: &str,
    existing: &[String],
    sync: SyncBy,
) -> State {
    create_pods(api, &names("added", 0..100)).await;
    assert_matches_server("after adds", informer, api, namespace, sync).await;
    relabel_pods(api, &existing[..100], "updated").await;
    assert_matches_server("after updates", informer, api, namespace, sync).await;
    delete_pods(api, &existing[100..200]).await;
    delete_pods(api, &names("added", 0..50)).await;
    assert_matches_server("after deletes", informer, api, namespace, sync).await
}

/// The paged-list scenario on one cluster: `n` pods created in parallel, listed by a fresh
/// informer with plain lists in pages of 500 (as client-go does without streaming lists: the
/// first list asks for resourceVersion 0),
/// then adds, updates and deletes. Returns the pages the first list took.
async fn initial_list_then_churn(cluster: &RealCluster, n: usize, sync: SyncBy) -> u64 {
    let client = cluster.client().await;
    let namespace = unique_namespace("list");
    create_namespace(&client, &namespace).await;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let initial = names("p", 0..n);
    let started = Instant::now();
    create_pods(&api, &initial).await;
    create_pods(&api, &[SENTINEL.to_owned()]).await;
    eprintln!("{namespace}: created {} pods in {:.1?}", n + 1, started.elapsed());

    let started = Instant::now();
    // A plain paged list (streaming lists are the default, so ask for lists).
    let (informer, model) =
        pod_informer(&client, &namespace, config().watch_list(false).page_size(Some(500))).await;
    let pages = informer.reflector_status().stats.list_pages;
    eprintln!("{namespace}: first list synced in {:.1?}, {pages} page(s)", started.elapsed());
    let state = assert_matches_server("initial list", &informer, &api, &namespace, sync).await;
    assert_eq!(state.len(), n + 1);
    assert_handler_converges("initial list", &model, &namespace, &state).await;

    let state = churn(&informer, &api, &namespace, &initial, sync).await;
    assert_eq!(state.len(), n + 1 + 100 - 100 - 50);
    assert_handler_converges("after churn", &model, &namespace, &state).await;
    assert_eq!(deletes(&model), (150, 0), "every delete was seen as a delete event");
    let status = settled(&informer).await;
    assert_eq!(status.stats.lists, 1, "no relist: {status:?}");
    assert_eq!(status.stats.expired, 0, "{status:?}");
    informer.shutdown().await;
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_initial_list_of_thousands_of_pods_then_adds_updates_and_deletes_without_watch_cache()
{
    let Some(cluster) = nocache() else { return };
    // Without the watch cache, a list at resourceVersion 0 goes to etcd, which honours the
    // limit: 3001 pods in pages of 500.
    let pages = initial_list_then_churn(&cluster, 3000, SyncBy::Sentinel).await;
    assert_eq!(pages, 7, "pages of 500 from etcd");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_list_then_adds_updates_and_deletes_with_watch_cache() {
    let Some(cluster) = cache() else { return };
    // kube-apiserver's watch cache ignores `limit` on a list at resourceVersion 0 and answers
    // in one page (client-go's first list, and ours, ask exactly that).
    let pages = initial_list_then_churn(&cluster, 1000, SyncBy::Bookmark).await;
    assert_eq!(pages, 1, "the watch cache answers a list at resourceVersion 0 in one page");
}

/// A streaming list (`sendInitialEvents=true`) instead of a list, then changes on the same
/// watch.
async fn streaming_list(cluster: &RealCluster, sync: SyncBy) {
    let client = cluster.client().await;
    let namespace = unique_namespace("stream");
    create_namespace(&client, &namespace).await;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let initial = names("p", 0..300);
    create_pods(&api, &initial).await;
    create_pods(&api, &[SENTINEL.to_owned()]).await;
    let (informer, model) = pod_informer(&client, &namespace, config().watch_list(true)).await;
    let status = settled(&informer).await;
    assert_eq!(
        (status.stats.streaming_lists, status.stats.watch_list_fallbacks, status.stats.list_pages),
        (1, 0, 0),
        "a streaming list, no list request: {status:?}"
    );
    let state = assert_matches_server("streaming list", &informer, &api, &namespace, sync).await;
    assert_eq!(state.len(), 301);
    let state = churn(&informer, &api, &namespace, &initial, sync).await;
    assert_handler_converges("streaming list churn", &model, &namespace, &state).await;
    let status = settled(&informer).await;
    assert_eq!(status.stats.lists, 1, "no relist: {status:?}");
    informer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_with_watch_cache() {
    let Some(cluster) = cache() else { return };
    streaming_list(&cluster, SyncBy::Bookmark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_without_watch_cache() {
    let Some(cluster) = nocache() else { return };
    streaming_list(&cluster, SyncBy::Sentinel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_bring_a_quiet_informer_up_to_the_servers_version() {
    let Some(cluster) = cache() else { return };
    let client = cluster.client().await;
    let namespace = unique_namespace("bookmark");
    create_namespace(&client, &namespace).await;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    create_pods(&api, &names("p", 0..20)).await;
    let (informer, _model) = pod_informer(&client, &namespace, config()).await;
    let before = settled(&informer).await.stats;

    // A write to another resource moves etcd's revision on; no pod changes.
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let cm = ConfigMap {
        metadata: ObjectMeta { name: Some("elsewhere".into()), ..ObjectMeta::default() },
        ..ConfigMap::default()
    };
    let cm = configmaps.create(&PostParams::default(), &cm).await.unwrap();
    let cm_rv: u64 = cm.metadata.resource_version.unwrap().parse().unwrap();
    let published_before = informer.progress().resource_version_num.unwrap();
    assert!(published_before < cm_rv, "the informer has not seen the ConfigMap's version yet");

    // The informer reaches the list's version (past the ConfigMap's) through bookmarks alone.
    let state =
        assert_matches_server("bookmarks", &informer, &api, &namespace, SyncBy::Bookmark).await;
    assert_eq!(state.len(), 20);
    let after = settled(&informer).await.stats;
    assert!(after.bookmarks > before.bookmarks, "bookmarks arrived: {before:?} -> {after:?}");
    assert_eq!(after.watch_events, before.watch_events, "no pod event on the way");
    assert!(informer.progress().resource_version_num.unwrap() >= cm_rv);
    assert_eq!(informer.lag().versions_behind, Some(0));
    informer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_watcher_adapter_feeds_the_store() {
    let Some(cluster) = cache() else { return };
    let client = cluster.client().await;
    let namespace = unique_namespace("adapter");
    create_namespace(&client, &namespace).await;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let initial = names("p", 0..300);
    create_pods(&api, &initial).await;
    create_pods(&api, &[SENTINEL.to_owned()]).await;

    let informer = Informer::<Pod>::builder(access()).name("adapter").build().unwrap();
    let (model, handler) = recorder();
    informer.add_event_handler(handler).unwrap();
    informer.start().unwrap();
    let stream = watcher(api.clone(), watcher::Config::default()).default_backoff();
    let feeding = tokio::spawn(feed_watcher(stream, informer.queue().clone()));
    assert!(informer.wait_for_sync(Duration::from_secs(60)).await, "initial sync");

    // kube-rs' watcher passes no bookmarks on: sync through the sentinel.
    let state =
        assert_matches_server("adapter list", &informer, &api, &namespace, SyncBy::Sentinel).await;
    assert_eq!(state.len(), 301);
    create_pods(&api, &names("added", 0..50)).await;
    relabel_pods(&api, &initial[..50], "updated").await;
    delete_pods(&api, &initial[50..100]).await;
    let state =
        assert_matches_server("adapter churn", &informer, &api, &namespace, SyncBy::Sentinel).await;
    assert_eq!(state.len(), 301);
    assert_handler_converges("adapter churn", &model, &namespace, &state).await;
    assert_eq!(deletes(&model), (50, 0));
    feeding.abort();
    informer.shutdown().await;
}

fn statefulset(name: &str) -> StatefulSet {
    let labels: std::collections::BTreeMap<String, String> =
        [("set".to_owned(), name.to_owned())].into();
    let mut template_pod = pod("template");
    template_pod.metadata.name = None;
    template_pod.metadata.labels = Some(labels.clone());
    StatefulSet {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        spec: Some(StatefulSetSpec {
            replicas: Some(0),
            selector: LabelSelector { match_labels: Some(labels), ..LabelSelector::default() },
            service_name: Some(name.to_owned()),
            template: PodTemplateSpec {
                metadata: Some(template_pod.metadata),
                spec: template_pod.spec,
            },
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factory_shares_pod_and_statefulset_informers() {
    let Some(cluster) = cache() else { return };
    let client = cluster.client().await;
    let namespace = unique_namespace("factory");
    create_namespace(&client, &namespace).await;
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let set_api: Api<StatefulSet> = Api::namespaced(client.clone(), &namespace);
    create_pods(&pod_api, &names("p", 0..100)).await;
    for i in 0..10 {
        set_api.create(&PostParams::default(), &statefulset(&format!("set-{i}"))).await.unwrap();
    }

    let factory = KubeInformerFactory::new(client.clone()).reflector_config(config());
    let pods_a = factory.pods().unwrap();
    let pods_b = factory.pods().unwrap();
    let sets = factory.statefulsets().unwrap();
    factory.start().unwrap();
    let synced = factory.wait_for_cache_sync(Duration::from_secs(120)).await;
    assert_eq!(synced.len(), 2, "one informer per resource: {synced:?}");
    assert!(synced.values().all(|s| *s), "{synced:?}");
    assert_eq!(pods_a.name(), pods_b.name());

    // The informers watch all namespaces; compare this test's namespace.
    assert_matches_server("factory pods", &pods_a, &pod_api, &namespace, SyncBy::Bookmark).await;
    assert_matches_server("factory sets", &sets, &set_api, &namespace, SyncBy::Bookmark).await;
    create_pods(&pod_api, &names("added", 0..20)).await;
    for i in 0..3 {
        set_api.delete(&format!("set-{i}"), &DeleteParams::default()).await.unwrap();
    }
    let p = assert_matches_server("factory pods", &pods_b, &pod_api, &namespace, SyncBy::Bookmark)
        .await;
    let s =
        assert_matches_server("factory sets", &sets, &set_api, &namespace, SyncBy::Bookmark).await;
    assert_eq!((p.len(), s.len()), (120, 7));
    for name in ["pods", "statefulsets"] {
        let status = factory.reflector_status(name).unwrap();
        assert_eq!(status.stats.lists, 1, "{name}: {status:?}");
    }
    factory.shutdown().await;
}
