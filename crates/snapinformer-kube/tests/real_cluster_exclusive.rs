//! The reflector through kube-apiserver restarts, etcd compactions and priority-and-fairness
//! rejections on a real control plane (`scripts/real-cluster`). Restarts and compactions
//! disturb every client of a cluster, and the 429 test needs the machine's attention for its
//! burst, so the tests of this binary run one at a time (a lock), on two shared clusters:
//! `cache` (watch cache on) and `nocache` (`--watch-cache=false`).
//!
//! Without Go these tests print `SKIPPED: ...` and pass, unless
//! `SNAPINFORMER_REQUIRE_REAL_CLUSTER=1`.

mod common;
mod real;

use std::{
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use common::{live::Proxy, recorder};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Pod},
    flowcontrol::v1::{
        FlowSchema, FlowSchemaSpec, LimitResponse, LimitedPriorityLevelConfiguration,
        NonResourcePolicyRule, PolicyRulesWithSubjects, PriorityLevelConfiguration,
        PriorityLevelConfigurationReference, PriorityLevelConfigurationSpec, ResourcePolicyRule,
        Subject, UserSubject,
    },
    rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject as RbacSubject},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, ObjectMeta, PostParams},
};
use real::*;
use snapinformer_kube::{BackoffConfig, KubeInformer, ReflectorConfig, pods};
use tokio::sync::{Mutex, MutexGuard};

static CACHE: OnceLock<Option<Arc<RealCluster>>> = OnceLock::new();
static NOCACHE: OnceLock<Option<Arc<RealCluster>>> = OnceLock::new();

fn cache() -> Option<Arc<RealCluster>> {
    shared(&CACHE, "cache", &[])
}

fn nocache() -> Option<Arc<RealCluster>> {
    shared(&NOCACHE, "nocache", &["--no-watch-cache"])
}

/// One test at a time (see the module docs).
async fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::const_new(());
    LOCK.lock().await
}

/// Short watches (bookmarks every few seconds with the watch cache) and a backoff of at most a
/// second, so that the reflector is back soon after the server.
fn config() -> ReflectorConfig {
    ReflectorConfig::new().min_watch_timeout(Duration::from_secs(5)).backoff(
        BackoffConfig::new()
            .initial(Duration::from_millis(100))
            .max(Duration::from_secs(1))
            .jitter(0.5),
    )
}

/// How a test brings an informer up to a list: bookmarks need the watch cache.
fn sync_for(watch_cache: bool) -> SyncBy {
    if watch_cache { SyncBy::Bookmark } else { SyncBy::Sentinel }
}

/// A namespace with `n` pods and the sentinel; its pod API (admin).
async fn namespace_with_pods(client: &kube::Client, prefix: &str, n: usize) -> (String, Api<Pod>) {
    let namespace = unique_namespace(prefix);
    create_namespace(client, &namespace).await;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    create_pods(&api, &names("p", 0..n)).await;
    create_pods(&api, &[SENTINEL.to_owned()]).await;
    (namespace, api)
}

/// A started, synced pod informer reading through `client`, with a recording handler.
async fn informer(
    client: kube::Client,
    namespace: &str,
) -> (KubeInformer<Pod>, common::SharedModel) {
    let informer = pods(Api::namespaced(client, namespace)).reflector(config()).build().unwrap();
    let (model, handler) = recorder();
    informer.add_event_handler(handler).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_sync(Duration::from_secs(60)).await, "initial sync");
    (informer, model)
}

/// Creates a ConfigMap: a write that no pod informer sees.
async fn write_elsewhere(client: &kube::Client, namespace: &str) {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = ConfigMap {
        metadata: ObjectMeta { generate_name: Some("elsewhere-".into()), ..ObjectMeta::default() },
        ..ConfigMap::default()
    };
    configmaps.create(&PostParams::default(), &cm).await.expect("create a ConfigMap");
}

/// Restarts kube-apiserver under a synced informer, then changes pods and compares.
async fn restart(cluster: &RealCluster, watch_cache: bool) -> snapinformer_kube::ReflectorStats {
    let sync = sync_for(watch_cache);
    let client = cluster.client().await;
    let (namespace, api) = namespace_with_pods(&client, "restart", 200).await;
    let (informer, model) = informer(client.clone(), &namespace).await;
    assert_matches_server("before the restart", &informer, &api, &namespace, sync).await;
    let before = settled(&informer).await.stats;
    // A write elsewhere puts etcd's revision past every version the informer holds (nothing
    // brings its watch cache, and so its bookmarks, past it without pod events or consistent
    // reads), so that the restarted server's watch cache starts after the informer's version.
    write_elsewhere(&client, &namespace).await;

    cluster.restart_apiserver();
    // New clients: kube's connection pool may hold connections to the old process.
    let client = cluster.client().await;
    let api: Api<Pod> = Api::namespaced(client, &namespace);
    create_pods(&api, &names("after", 0..20)).await;
    delete_pods(&api, &names("p", 0..20)).await;
    let state = assert_matches_server("after the restart", &informer, &api, &namespace, sync).await;
    assert_eq!(state.len(), 201);
    assert_handler_converges("after the restart", &model, &namespace, &state).await;
    assert_eq!(deletes(&model), (20, 0), "every delete reached the handler as a delete");
    let after = settled(&informer).await.stats;
    eprintln!("restart (watch cache {watch_cache}): before {before:?}\nafter {after:?}");
    assert!(after.watches > before.watches, "the watch was re-opened: {after:?}");
    informer.shutdown().await;
    after
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restart_resumes_the_watch_without_a_relist_when_watches_are_served_by_etcd() {
    let _serial = serial().await;
    let Some(cluster) = nocache() else { return };
    let stats = restart(&cluster, false).await;
    // The re-opened watch starts from the last synced version, which etcd still has.
    assert_eq!((stats.lists, stats.expired), (1, 0), "no relist: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restart_with_the_watch_cache_relists_from_a_version_the_new_cache_lacks() {
    let _serial = serial().await;
    let Some(cluster) = cache() else { return };
    let stats = restart(&cluster, true).await;
    // The restarted server's watch cache starts at etcd's revision of the moment; a watch
    // from an older version is answered 410 ("too old resource version"), so the reflector
    // relists (from its last synced version, which the cache serves: no tombstones here). A
    // reflector whose version is etcd's latest when the cache starts resumes instead; client-go
    // is in the same position.
    assert_eq!((stats.lists, stats.expired), (2, 1), "one 410, one relist: {stats:?}");
}

/// Takes the informer away (its connections cut), deletes and creates pods, compacts etcd
/// (and, with the watch cache, restarts kube-apiserver: a compaction alone does not touch the
/// cache's history), and lets the informer back: it gets 410, relists, and its handler gets a
/// tombstone for every pod deleted while it was away.
async fn compaction_while_away(cluster: &RealCluster, watch_cache: bool) {
    let sync = sync_for(watch_cache);
    let client = cluster.client().await;
    let (namespace, api) = namespace_with_pods(&client, "compact", 300).await;
    let proxy = Proxy::start(cluster.apiserver_addr()).await;
    let mut config = cluster.config().await;
    config.cluster_url = proxy.url().replacen("http://", "https://", 1).parse().unwrap();
    let (informer, model) = informer(kube::Client::try_from(config).unwrap(), &namespace).await;
    assert_matches_server("before", &informer, &api, &namespace, sync).await;

    proxy.unplug();
    let away_from = informer.reflector_status().last_sync_resource_version;
    delete_pods(&api, &names("p", 0..100)).await;
    create_pods(&api, &names("new", 0..50)).await;
    // Something else is written after the last pod change, so that the compaction reaches
    // past every version the informer could hold.
    write_elsewhere(&client, &namespace).await;
    let revision = cluster.compact();
    eprintln!("informer away from {away_from:?}; etcd compacted at {revision}");
    if watch_cache {
        cluster.restart_apiserver();
    }
    proxy.plug();

    let client = cluster.client().await;
    let api: Api<Pod> = Api::namespaced(client, &namespace);
    let state =
        assert_matches_server("after the compaction", &informer, &api, &namespace, sync).await;
    assert_eq!(state.len(), 301 - 100 + 50);
    let status = settled(&informer).await;
    eprintln!("compaction (watch cache {watch_cache}): {status:?}");
    assert!(status.stats.expired >= 1, "410 after the compaction: {status:?}");
    assert_eq!(status.stats.lists, 2, "one relist: {status:?}");
    assert_handler_converges("after the compaction", &model, &namespace, &state).await;
    assert_eq!(
        deletes(&model),
        (100, 100),
        "every pod deleted while away reached the handler as a tombstone"
    );
    informer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_compaction_while_away_relists_with_tombstones_without_watch_cache() {
    let _serial = serial().await;
    let Some(cluster) = nocache() else { return };
    compaction_while_away(&cluster, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_compaction_and_restart_while_away_relist_with_tombstones_with_watch_cache() {
    let _serial = serial().await;
    let Some(cluster) = cache() else { return };
    compaction_while_away(&cluster, true).await;
}

const THROTTLED_USER: &str = "snapinformer-throttled";

/// A priority level with the smallest share of the server's concurrency (600 seats by default:
/// 1 share of 246 is 3 seats) that rejects rather than queues, and a flow schema that puts
/// everything [`THROTTLED_USER`] does in it.
async fn throttle_user(client: &kube::Client) {
    let levels: Api<PriorityLevelConfiguration> = Api::all(client.clone());
    let level = PriorityLevelConfiguration {
        metadata: ObjectMeta { name: Some(THROTTLED_USER.into()), ..ObjectMeta::default() },
        spec: Some(PriorityLevelConfigurationSpec {
            type_: "Limited".into(),
            limited: Some(LimitedPriorityLevelConfiguration {
                nominal_concurrency_shares: Some(1),
                lendable_percent: Some(0),
                borrowing_limit_percent: Some(0),
                limit_response: Some(LimitResponse { type_: "Reject".into(), queuing: None }),
            }),
            exempt: None,
        }),
        status: None,
    };
    let schemas: Api<FlowSchema> = Api::all(client.clone());
    let schema = FlowSchema {
        metadata: ObjectMeta { name: Some(THROTTLED_USER.into()), ..ObjectMeta::default() },
        spec: Some(FlowSchemaSpec {
            priority_level_configuration: PriorityLevelConfigurationReference {
                name: THROTTLED_USER.into(),
            },
            matching_precedence: Some(1000),
            distinguisher_method: None,
            rules: Some(vec![PolicyRulesWithSubjects {
                subjects: vec![Subject {
                    kind: "User".into(),
                    user: Some(UserSubject { name: THROTTLED_USER.into() }),
                    ..Subject::default()
                }],
                resource_rules: Some(vec![ResourcePolicyRule {
                    verbs: vec!["*".into()],
                    api_groups: vec!["*".into()],
                    resources: vec!["*".into()],
                    namespaces: Some(vec!["*".into()]),
                    cluster_scope: Some(true),
                }]),
                non_resource_rules: Some(vec![NonResourcePolicyRule {
                    verbs: vec!["*".into()],
                    non_resource_urls: vec!["*".into()],
                }]),
            }]),
        }),
        status: None,
    };
    for result in [
        levels.create(&PostParams::default(), &level).await.map(|_| ()),
        schemas.create(&PostParams::default(), &schema).await.map(|_| ()),
    ] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating the APF objects: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_and_fairness_429s_are_ridden_out() {
    let _serial = serial().await;
    let Some(cluster) = cache() else { return };
    let admin = cluster.client().await;
    let namespace = unique_namespace("apf");
    create_namespace(&admin, &namespace).await;
    let admin_pods: Api<Pod> = Api::namespaced(admin.clone(), &namespace);
    create_pods(&admin_pods, &names("p", 0..200)).await;
    throttle_user(&admin).await;
    // A Role of its own: the aggregated ClusterRoles (`view`, ...) are empty in a cluster
    // without the controller manager's clusterrole-aggregation controller.
    let roles: Api<Role> = Api::namespaced(admin.clone(), &namespace);
    let role = Role {
        metadata: ObjectMeta { name: Some("pod-reader".into()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".into()]),
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            ..PolicyRule::default()
        }]),
    };
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &namespace);
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some("throttled-pod-reader".into()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "pod-reader".into(),
        },
        subjects: Some(vec![RbacSubject {
            kind: "User".into(),
            name: THROTTLED_USER.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        }]),
    };
    bindings.create(&PostParams::default(), &binding).await.unwrap();

    // The throttled user (admin impersonating it), without kube's own retries of 429.
    let mut config = cluster.config().await;
    config.default_retry = false;
    config.auth_info.impersonate = Some(THROTTLED_USER.into());
    let throttled = kube::Client::try_from(config).unwrap();
    let throttled_pods: Api<Pod> = Api::namespaced(throttled.clone(), &namespace);

    // A burst of lists by the same user: with 3 seats, most are answered 429. Each is a
    // consistent read of one pod: cheap for this process to decode, yet it holds a seat while
    // the server asks etcd for its current revision and waits for the watch cache to reach it.
    let stop = Arc::new(AtomicBool::new(false));
    let rejected = Arc::new(AtomicU64::new(0));
    let forbidden = Arc::new(AtomicU64::new(0));
    let first_rejection = Arc::new(std::sync::Mutex::new(None::<String>));
    let mut burst = Vec::new();
    for _ in 0..32 {
        let (api, stop, rejected, first, forbidden) = (
            throttled_pods.clone(),
            stop.clone(),
            rejected.clone(),
            first_rejection.clone(),
            forbidden.clone(),
        );
        burst.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match api.list(&ListParams::default().limit(1)).await {
                    Err(kube::Error::Api(s)) if s.code == 429 => {
                        rejected.fetch_add(1, Ordering::Relaxed);
                        first.lock().unwrap().get_or_insert_with(|| format!("{s:?}"));
                    }
                    Err(kube::Error::Api(s)) if s.code == 403 => {
                        // The RoleBinding is not in the authorizer's cache yet.
                        forbidden.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Ok(_) => {}
                    Err(e) => panic!("burst list: {e}"),
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while rejected.load(Ordering::Relaxed) == 0 {
        assert!(
            Instant::now() < deadline,
            "the flow schema did not reject the burst with 429 within 60 s ({} answers were 403)",
            forbidden.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "first 429 as kube reports it: {}",
        first_rejection.lock().unwrap().as_deref().unwrap_or("-")
    );

    // An informer of the same user starts during the burst: its list or watch is rejected.
    let informer = pods(throttled_pods.clone()).reflector(config_for_throttling()).build().unwrap();
    let (model, handler) = recorder();
    informer.add_event_handler(handler).unwrap();
    informer.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while informer.reflector_status().stats.throttled == 0 {
        assert!(
            Instant::now() < deadline,
            "the reflector was not answered 429 within 60 s (burst: {} rejected): {:?}",
            rejected.load(Ordering::Relaxed),
            informer.reflector_status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in burst {
        task.await.unwrap();
    }
    eprintln!(
        "burst: {} rejected; reflector: {:?}",
        rejected.load(Ordering::Relaxed),
        informer.reflector_status().stats
    );

    assert!(informer.wait_for_sync(Duration::from_secs(60)).await, "synced after the burst");
    let state =
        assert_matches_server("after 429s", &informer, &admin_pods, &namespace, SyncBy::Bookmark)
            .await;
    assert_eq!(state.len(), 200);
    assert_handler_converges("after 429s", &model, &namespace, &state).await;
    informer.shutdown().await;
    let flowschemas: Api<FlowSchema> = Api::all(admin.clone());
    let _ = flowschemas.delete(THROTTLED_USER, &DeleteParams::default()).await;
    let levels: Api<PriorityLevelConfiguration> = Api::all(admin.clone());
    let _ = levels.delete(THROTTLED_USER, &DeleteParams::default()).await;
}

/// Backoff slow enough that a rejected reflector does not join the burst.
fn config_for_throttling() -> ReflectorConfig {
    config().backoff(
        BackoffConfig::new()
            .initial(Duration::from_millis(500))
            .max(Duration::from_secs(2))
            .jitter(0.5),
    )
}
