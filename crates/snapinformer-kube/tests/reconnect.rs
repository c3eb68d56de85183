//! API server restarts, live: the test API server is taken down (connections refused) and
//! brought back on the same address; the reflector recognises the refused connections,
//! re-opens its watch without relisting and catches up.

mod common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use common::{live, recorder, within};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use snapinformer_apiserver::{Config, generate};
use snapinformer_kube::{BackoffConfig, Error, pods};

#[tokio::test]
async fn a_refused_connection_is_recognised_as_such() {
    let mut server = live::server(Config::default()).await;
    let api: Api<Pod> = Api::all(live::client_for(&server.url()));
    server.stop_serving().await;
    let e = Error::List(api.list(&ListParams::default()).await.unwrap_err());
    assert!(e.is_connection_refused(), "{e}");
    assert_eq!(e.code(), None);
    server.start_serving().await.unwrap();
    assert!(api.list(&ListParams::default()).await.is_ok());
    let status = Error::List(common::api_error(500, "InternalError"));
    assert!(!status.is_connection_refused());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_informer_catches_up_after_three_restarts_without_relisting() {
    let mut server = live::server(Config::default()).await;
    server
        .bulk_create_pods((0..20).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))
        .unwrap();
    let refused = Arc::new(AtomicUsize::new(0));
    let r = refused.clone();
    let backoff = BackoffConfig::new().initial(Duration::from_millis(50)).jitter(0.5);
    let informer = pods(Api::all(live::client_for(&server.url())))
        .reflector(live::fast().backoff(backoff))
        .watch_error_handler(move |_, e| {
            if e.is_connection_refused() {
                r.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
    let (model, handler) = recorder();
    informer.add_event_handler(handler).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_sync(Duration::from_secs(30)).await);

    let seen_after = Arc::new(Mutex::new(Vec::new()));
    for i in 0..3 {
        server.stop_serving().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.start_serving().await.unwrap();
        let up = Instant::now();
        let name = format!("after-{i}");
        let created = server.create(&generate::pod("default", &name, None, &[])).unwrap();
        let rv = created.metadata.resource_version.unwrap();
        within(30, "the new pod", informer.wait_for(&rv, Duration::from_secs(30))).await.unwrap();
        seen_after.lock().unwrap().push(up.elapsed());
        // Stay up a while, as between real restarts.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    live::assert_converged(&server, &informer, &[&model]).await;
    let status = informer.reflector_status();
    assert_eq!(status.stats.lists, 1, "every comeback re-opened the watch: {status:?}");
    assert!(refused.load(Ordering::SeqCst) >= 3, "each outage was seen as refused connections");
    for took in seen_after.lock().unwrap().iter() {
        assert!(*took < Duration::from_secs(10), "caught up in {took:?}");
    }
    informer.shutdown().await;
}
