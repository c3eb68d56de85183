//! The tracked client over HTTP: writes through `kube::Api` against the test API server record
//! the versions the server returned, and the next reconcile of the key waits until the real
//! informer shows them.

mod common;

use std::{sync::Arc, time::Duration};

use common::{pod, within};
use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use snapinformer_apiserver::{Config, TestApiServer};
use snapinformer_runtime::{
    Action, Context, Controller, Deleted, ObjectKey, ReadYourWrites, backoff_on_error,
};
use tokio::sync::mpsc;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What each reconcile saw and wrote.
#[derive(Debug)]
struct Seen {
    ryw: ReadYourWrites,
    /// Whether the pod informer showed the pod, and at which version.
    cached: Option<String>,
    /// The version the write returned.
    wrote: Option<String>,
}

struct Data {
    client: kube::Client,
    pods: snapinformer_core::Informer<Pod>,
    tx: mpsc::UnboundedSender<Seen>,
}

/// First call creates `web-0`, second deletes it, third only looks.
async fn create_then_delete(ctx: Context<StatefulSet>, d: Arc<Data>) -> Result<Action, Error> {
    let cached = d
        .pods
        .snapshot()
        .get_by_key("default/web-0")
        .map(|p| p.metadata.resource_version.clone().unwrap_or_default());
    let api = ctx.track(Api::<Pod>::namespaced(d.client.clone(), "default"));
    assert!(api.is_tracked(), "the pod informer is registered for pods");
    let wrote = match &cached {
        None if ctx.read_your_writes() == &ReadYourWrites::NothingWritten => {
            let created = api
                .create(
                    &PostParams::default(),
                    &pod("default", "web-0", Some(("StatefulSet", "web"))),
                )
                .await?;
            created.metadata.resource_version
        }
        Some(_) => match api.delete("web-0", &DeleteParams::default()).await? {
            Deleted::Object(p) => p.metadata.resource_version,
            Deleted::Status(_) => None,
        },
        None => None,
    };
    let again = wrote.is_some();
    d.tx.send(Seen { ryw: ctx.read_your_writes().clone(), cached, wrote }).unwrap();
    Ok(if again { Action::requeue(Duration::ZERO) } else { Action::await_change() })
}

#[tokio::test]
async fn writes_through_kube_api_are_waited_for_in_the_real_informer_before_the_next_reconcile() {
    let server = TestApiServer::start(Config::default()).await.unwrap();
    let client = server.client().unwrap();
    let pods = snapinformer_kube::pods(Api::all(client.clone())).build().unwrap();
    pods.start().unwrap();
    assert!(pods.wait_for_sync(Duration::from_secs(30)).await);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let data = Arc::new(Data { client, pods: pods.informer().clone(), tx });
    let controller = Controller::<StatefulSet>::new("sts").owns(pods.informer()).workers(1);
    let handle = controller.handle();
    handle.enqueue(ObjectKey::new(Some("default"), "web"));
    let run = tokio::spawn(controller.run(create_then_delete, backoff_on_error, data));

    let first = within("create", rx.recv()).await.unwrap();
    let created_rv = first.wrote.clone().expect("the create returned a version");
    assert_eq!(first.cached, None);
    // The second reconcile started only once the informer showed the created pod.
    let second = within("delete", rx.recv()).await.unwrap();
    assert!(
        matches!(second.ryw, ReadYourWrites::CaughtUp { .. } | ReadYourWrites::AlreadyVisible),
        "{second:?}"
    );
    let cached: u64 = second.cached.as_deref().expect("the pod is cached").parse().unwrap();
    assert!(cached >= created_rv.parse::<u64>().unwrap(), "{second:?} after {first:?}");
    assert!(second.wrote.is_some(), "the server returned the deleted pod with its version");
    // The third reconcile sees the pod gone: the delete's version was waited for too.
    let third = within("look", rx.recv()).await.unwrap();
    assert!(third.ryw.is_fresh(), "{third:?}");
    assert_eq!(third.cached, None, "{third:?}");
    assert_eq!(handle.stats().ryw_timeouts, 0);
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
    pods.shutdown().await;
    server.shutdown().await;
}
