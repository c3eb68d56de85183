//! A StatefulSet controller on snapinformer's runtime: for every StatefulSet it keeps the pods
//! `<set>-0` .. `<set>-<replicas - 1>`, controlled by the set, and deletes the others.
//! Read-your-writes (on by default) and expectations keep it from creating again a pod whose
//! creation has not come back through the watch yet.
//!
//! `cargo run -p snapinformer --example statefulset` against the cluster of `KUBECONFIG`
//! (the test API server's kubeconfig works); Ctrl-C stops it gracefully.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ObjectMeta, PostParams},
};
use snapinformer::{
    Action, Context, Controller, Informer, OWNER_UID_INDEX, backoff_on_error, pods, statefulsets,
};

/// What a reconcile can fail with.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// What every reconcile shares.
pub struct Data {
    /// Writes go through this client.
    pub client: kube::Client,
    /// The pod cache (indexed by owner UID).
    pub pods: Informer<Pod>,
}

/// One StatefulSet: creates its missing ordinals, deletes ordinals at or above `replicas`.
pub async fn reconcile(ctx: Context<StatefulSet>, data: Arc<Data>) -> Result<Action, Error> {
    let Some(set) = ctx.object() else { return Ok(Action::await_change()) }; // deleted
    if !ctx.expectations_satisfied() {
        return Ok(Action::await_change()); // our creates and deletes have not all come back yet
    }
    let (name, uid) = (set.name_any(), set.uid().unwrap_or_default());
    let replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as usize;
    let owned = data.pods.snapshot().by_index(OWNER_UID_INDEX, &uid)?;
    let ordinal = |p: &Pod| p.name_any().strip_prefix(&format!("{name}-"))?.parse::<usize>().ok();
    let pods = ctx
        .track(Api::<Pod>::namespaced(data.client.clone(), &set.namespace().unwrap_or_default()));
    for i in (0..replicas).filter(|i| !owned.iter().any(|p| ordinal(p) == Some(*i))) {
        pods.create(&PostParams::default(), &pod_for(set, i)).await?;
    }
    for extra in owned.iter().filter(|p| ordinal(p).is_none_or(|i| i >= replicas)) {
        pods.delete(&extra.name_any(), &DeleteParams::default()).await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// The pod `ordinal` of `set`, from its template, controlled by it.
fn pod_for(set: &StatefulSet, ordinal: usize) -> Pod {
    let template = set.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{}-{ordinal}", set.name_any())),
            namespace: set.namespace(),
            labels: template.metadata.and_then(|m| m.labels),
            owner_references: set.controller_owner_ref(&()).map(|r| vec![r]),
            ..Default::default()
        },
        spec: template.spec,
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let client = kube::Client::try_default().await?;
    let sets = statefulsets(Api::all(client.clone())).build()?;
    let pods = pods(Api::all(client.clone())).build()?; // with the owner-UID index
    sets.start()?;
    pods.start()?;
    let data = Arc::new(Data { client, pods: pods.informer().clone() });
    Controller::new("statefulset")
        .for_informer(&sets)
        .owns(&pods)
        .workers(4)
        .graceful_shutdown_on(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .run(reconcile, backoff_on_error, data)
        .await?;
    pods.shutdown().await;
    sets.shutdown().await;
    Ok(())
}
