//! Convergence under faults, against the real test API server on loopback (real time, every
//! wait bounded): after each fault and a quiet period, the published snapshot equals the
//! server's state exactly, every deletion reached the handlers (as a delete or a tombstone), and
//! no handler saw an object's changes out of order.

mod common;

use std::time::Duration;

use common::{live::*, *};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use snapinformer_apiserver::{Config, FaultConfig, ServerHandle, generate};
use snapinformer_core::QueueKind;
use snapinformer_kube::{KubeInformer, ReflectorConfig, pods};

fn create(server: &ServerHandle, names: impl IntoIterator<Item = String>) {
    for name in names {
        server.create(&generate::pod("default", &name, None, &[("app", "web")])).unwrap();
    }
}

fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:03}")).collect()
}

/// A started pod informer reading through `url`, with two recording handlers.
async fn informer(
    url: &str,
    config: ReflectorConfig,
) -> (KubeInformer<Pod>, SharedModel, SharedModel) {
    informer_with(url, config, QueueKind::Real).await
}

async fn informer_with(
    url: &str,
    config: ReflectorConfig,
    queue: QueueKind,
) -> (KubeInformer<Pod>, SharedModel, SharedModel) {
    let inf = pods(Api::all(client_for(url)))
        .reflector(config)
        .informer(move |b| b.queue(queue).max_batch(7))
        .build()
        .unwrap();
    let (m1, h1) = recorder();
    let (m2, h2) = recorder();
    inf.add_event_handler(h1).unwrap();
    inf.add_event_handler(h2).unwrap();
    inf.start().unwrap();
    assert!(inf.wait_for_sync(Duration::from_secs(30)).await, "initial sync");
    (inf, m1, m2)
}

/// Creates, relabels and deletes pods while faults are active.
async fn churn(server: &ServerHandle, writer: &Api<Pod>, prefix: &str, existing: &[String]) {
    create(server, names(prefix, 0..20));
    for (i, name) in existing.iter().enumerate() {
        match i % 3 {
            0 => delete(writer, name).await,
            1 => relabel(writer, name, prefix).await,
            _ => {}
        }
    }
    for name in names(prefix, 0..20).iter().step_by(4) {
        delete(writer, name).await;
    }
}

#[tokio::test]
async fn cache_converges_when_watch_streams_are_cut_every_few_events_without_relisting() {
    let server = server(Config {
        faults: FaultConfig { watch_cut_after_events: Some(3), ..FaultConfig::default() },
        record_requests: true,
        ..Config::default()
    })
    .await;
    let initial = names("a", 0..30);
    create(&server, initial.clone());
    let (inf, m1, m2) = informer(&server.url(), fast()).await;
    let writer: Api<Pod> = Api::default_namespaced(client_for(&server.url()));
    churn(&server, &writer, "b", &initial).await;
    // Converge with the cuts still on (lists are not affected by them), then check.
    let expected = server_state(&server).await;
    eventually(30, "store matches with cuts on", || snapshot_state(&inf.snapshot()) == expected)
        .await;
    let state = within(30, "convergence", assert_converged(&server, &inf, &[&m1, &m2])).await;
    assert_eq!(state.len(), 30 - 10 + 20 - 5);
    let status = inf.reflector_status();
    assert!(
        server.faults().stats().watches_cut >= 5,
        "{:?} {status:?} {:#?}",
        server.faults().stats(),
        server.request_log()
    );
    assert_eq!(status.stats.lists, 1, "cut watches are re-opened without a relist: {status:?}");
    assert_eq!(m1.lock().unwrap().tombstones, 0, "every delete was seen as a delete");
    eventually(10, "lag closes", || inf.lag().versions_behind == Some(0)).await;
    let mut registry = prometheus_client::registry::Registry::default();
    inf.register_metrics(&mut registry);
    let text = snapinformer_core::metrics::encode_text(&registry).unwrap();
    assert!(text.contains(r#"snapinformer_kube_lists_total{reflector="pods"} 1"#), "{text}");
    let received = format!(
        r#"snapinformer_kube_received_resource_version{{reflector="pods"}} {}"#,
        inf.lag().received.unwrap()
    );
    assert!(text.contains(&received), "{text}");
    assert!(text.contains(r#"snapinformer_published_resource_version{informer="pods"}"#));
    inf.shutdown().await;
}

#[tokio::test]
async fn cache_converges_after_forced_410_on_watches_and_lists() {
    // Faults on from the start: the initial list is answered 410 twice (at version 0, then
    // as a consistent list), and the first two watches get an in-stream 410.
    let server = server(Config {
        faults: FaultConfig {
            watch_cut_after_events: Some(2),
            force_watch_410: 2,
            force_list_410: 2,
            ..FaultConfig::default()
        },
        ..Config::default()
    })
    .await;
    let initial = names("a", 0..20);
    create(&server, initial.clone());
    // Plain lists: the faults answer lists with 410.
    let (inf, m1, m2) = informer(&server.url(), fast().watch_list(false)).await;
    let writer: Api<Pod> = Api::default_namespaced(client_for(&server.url()));
    churn(&server, &writer, "b", &initial).await;
    eventually(30, "forced 410s consumed", || {
        let s = server.faults().stats();
        s.watch_410s == 2 && s.list_410s == 2
    })
    .await;
    eventually(30, "every 410 seen", || inf.reflector_status().stats.expired >= 4).await;
    // Each in-stream 410 relists (after a backoff when the watch delivered nothing): the first
    // list and one relist per forced watch 410.
    eventually(30, "a relist after each watch 410", || inf.reflector_status().stats.lists >= 3)
        .await;
    within(30, "convergence", assert_converged(&server, &inf, &[&m1, &m2])).await;
    inf.shutdown().await;
}

#[tokio::test]
async fn cache_converges_through_429_and_500_answers_honouring_retry_after() {
    let server = server(Config {
        faults: FaultConfig {
            throttle_fraction: 1.0,
            retry_after_seconds: 1,
            ..FaultConfig::default()
        },
        ..Config::default()
    })
    .await;
    let initial = names("a", 0..20);
    create(&server, initial.clone());
    let inf = pods(Api::all(client_for(&server.url()))).reflector(fast()).build().unwrap();
    let (m1, h1) = recorder();
    inf.add_event_handler(h1).unwrap();
    let started = tokio::time::Instant::now();
    inf.start().unwrap();
    eventually(30, "two throttled lists", || inf.reflector_status().stats.throttled >= 2).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the second attempt waited for Retry-After (1 s), not the 10 ms backoff"
    );
    server.faults().set(FaultConfig {
        throttle_fraction: 0.2,
        retry_after_seconds: 0,
        error_fraction: 0.2,
        watch_cut_after_events: Some(4),
        ..FaultConfig::default()
    });
    assert!(inf.wait_for_sync(Duration::from_secs(30)).await);
    let writer: Api<Pod> = Api::default_namespaced(client_for(&server.url()));
    churn(&server, &writer, "b", &initial).await;
    within(30, "convergence", assert_converged(&server, &inf, &[&m1])).await;
    let stats = inf.reflector_status().stats;
    assert!(stats.backoffs >= 2, "{stats:?}");
    inf.shutdown().await;
}

#[tokio::test]
async fn cache_converges_after_a_restart_with_compacted_history() {
    let server = server(Config::default()).await;
    let initial = names("a", 0..20);
    create(&server, initial.clone());
    let (inf, m1, m2) = informer(&server.url(), fast()).await;
    server.restart_with_compacted_history();
    let writer: Api<Pod> = Api::default_namespaced(client_for(&server.url()));
    churn(&server, &writer, "b", &initial).await;
    server.restart_with_compacted_history();
    within(30, "convergence", assert_converged(&server, &inf, &[&m1, &m2])).await;
    inf.shutdown().await;
}

#[tokio::test]
async fn objects_created_and_deleted_while_disconnected_arrive_as_adds_and_tombstones() {
    let server = server(Config::default()).await;
    let initial = names("a", 0..20);
    create(&server, initial.clone());
    let proxy = Proxy::start(server.addr()).await;
    let (inf, m1, m2) = informer(&proxy.url(), fast()).await;
    proxy.unplug();
    let writer: Api<Pod> = Api::default_namespaced(client_for(&server.url()));
    for name in &initial[..5] {
        delete(&writer, name).await;
    }
    relabel(&writer, &initial[5], "offline").await;
    create(&server, names("b", 0..5));
    // The history the reflector would resume from is gone: it must relist.
    server.restart_with_compacted_history();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(inf.reflector_status().stats.errors > 0, "the reflector noticed the outage");
    proxy.plug();
    let state = within(30, "convergence", assert_converged(&server, &inf, &[&m1, &m2])).await;
    assert_eq!(state.len(), 20);
    for m in [&m1, &m2] {
        let m = m.lock().unwrap();
        assert_eq!((m.deletes, m.tombstones), (5, 5), "missed deletes arrive as tombstones");
    }
    assert!(inf.reflector_status().stats.expired >= 1);
    inf.shutdown().await;
}

#[tokio::test]
async fn streaming_list_syncs_without_a_list_request_and_keeps_watching() {
    let server = server(Config { record_requests: true, ..Config::default() }).await;
    create(&server, names("a", 0..15));
    let (inf, m1, _m2) = informer(&server.url(), fast().watch_list(true)).await;
    let writer: Api<Pod> = Api::default_namespaced(client_for(&server.url()));
    churn(&server, &writer, "b", &names("a", 0..15)).await;
    let lists: Vec<String> = server
        .request_log()
        .into_iter()
        .filter(|r| r.starts_with("GET /api/v1/pods") && !r.contains("watch"))
        .collect();
    assert!(lists.is_empty(), "no plain list request: {lists:?}");
    within(30, "convergence", assert_converged(&server, &inf, &[&m1])).await;
    let stats = inf.reflector_status().stats;
    assert_eq!((stats.streaming_lists, stats.watch_list_fallbacks), (1, 0), "{stats:?}");
    inf.shutdown().await;
}

#[tokio::test]
async fn paginated_initial_list_reads_every_page() {
    let server = server(Config::default()).await;
    create(&server, names("a", 0..95));
    let (inf, m1, _m2) =
        informer(&server.url(), fast().watch_list(false).page_size(Some(10))).await;
    within(30, "convergence", assert_converged(&server, &inf, &[&m1])).await;
    let stats = inf.reflector_status().stats;
    assert_eq!((stats.list_pages, stats.lists), (10, 1), "{stats:?}");
    assert_eq!(inf.snapshot().len(), 95);
    inf.shutdown().await;
}

async fn chaos(queue: QueueKind, config: ReflectorConfig) {
    let server = server(Config { history_size: 40, ..Config::default() }).await;
    let initial = names("a", 0..30);
    create(&server, initial.clone());
    let (inf, m1, m2) = informer_with(&server.url(), config, queue).await;
    server.faults().set(FaultConfig {
        watch_cut_probability: 0.2,
        throttle_fraction: 0.1,
        error_fraction: 0.1,
        force_watch_410: 1,
        force_list_410: 1,
        ..FaultConfig::default()
    });
    let writer: Api<Pod> = Api::default_namespaced(client_for(&server.url()));
    churn(&server, &writer, "b", &initial).await;
    server.restart_with_compacted_history();
    churn(&server, &writer, "c", &names("b", 0..20)).await;
    within(30, "convergence", assert_converged(&server, &inf, &[&m1, &m2])).await;
    inf.shutdown().await;
}

#[tokio::test]
async fn cache_converges_under_random_cuts_throttling_errors_410s_and_a_compaction_combined() {
    chaos(QueueKind::Real, fast()).await;
}

#[tokio::test]
async fn cache_converges_under_the_same_faults_with_the_delta_fifo_queue() {
    chaos(QueueKind::Delta, fast()).await;
}

#[tokio::test]
async fn cache_converges_under_the_same_faults_with_streaming_lists() {
    chaos(QueueKind::Real, fast().watch_list(true)).await;
}
