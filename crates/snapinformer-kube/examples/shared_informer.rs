//! Starts the test API server, runs a shared pod informer with two handlers and an owner-UID
//! index, churns pods while every watch stream is cut after two events, and prints what it
//! sees.
//!
//! `cargo run -p snapinformer-kube --example shared_informer`

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, ListParams},
};
use snapinformer_apiserver::{Config, FaultConfig, TestApiServer, generate};
use snapinformer_core::{HandlerOptions, Notification};
use snapinformer_kube::{OWNER_UID_INDEX, ReflectorConfig, pods, transform};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Every watch stream is cut after two events, as a flaky network would.
    let faults = FaultConfig { watch_cut_after_events: Some(2), ..FaultConfig::default() };
    let server = TestApiServer::start(Config { faults, ..Config::default() }).await?;
    server.bulk_create_nodes(generate::nodes(3))?;
    let set = server.create(&generate::statefulset("default", "web", 5))?;
    let nodes: Vec<String> = (0..3).map(|i| format!("node-{i}")).collect();
    server.bulk_create_pods(generate::statefulset_pods(&set, &nodes))?;
    println!("test API server at {} with {} pods", server.url(), 5);

    // One shared informer for pods, with the owner-UID index and a transform.
    let informer = pods(Api::all(server.client()?))
        .reflector(ReflectorConfig::new().name("pods"))
        .transform(transform::strip_managed_fields)
        .build()?;

    // Handler 1: prints every change.
    informer.add_event_handler_with(
        |n: &Notification<Pod>| match n {
            Notification::Add { obj, is_in_initial_list } => println!(
                "[printer] add {} (initial list: {is_in_initial_list})",
                obj.metadata.name.as_deref().unwrap_or("?")
            ),
            Notification::Update { new, .. } => println!(
                "[printer] update {} -> rv {}",
                new.metadata.name.as_deref().unwrap_or("?"),
                new.metadata.resource_version.as_deref().unwrap_or("?")
            ),
            Notification::Delete { obj } => println!(
                "[printer] delete {} (tombstone: {})",
                obj.object().and_then(|o| o.metadata.name.as_deref()).unwrap_or("?"),
                obj.is_tombstone()
            ),
        },
        HandlerOptions::new().name("printer"),
    )?;

    // Handler 2: counts notifications, as a controller's enqueue function would.
    let seen = Arc::new(AtomicU64::new(0));
    let counter = seen.clone();
    informer.add_event_handler_with(
        move |_: &Notification<Pod>| {
            counter.fetch_add(1, Ordering::Relaxed);
        },
        HandlerOptions::new().name("counter"),
    )?;

    informer.start()?;
    assert!(informer.wait_for_sync(Duration::from_secs(10)).await, "informer synced");
    let uid = set.metadata.uid.clone().unwrap_or_default();
    println!(
        "synced: {} pods, {} owned by statefulset web",
        informer.snapshot().len(),
        informer.snapshot().by_index(OWNER_UID_INDEX, &uid)?.len()
    );

    // Churn while watch streams are cut.
    let api: Api<Pod> = Api::default_namespaced(server.client()?);
    for i in 0..4 {
        server.create(&generate::pod("default", &format!("extra-{i}"), None, &[]))?;
    }
    api.delete("web-0", &DeleteParams::default()).await?;
    api.delete("extra-1", &DeleteParams::default()).await?;

    // Wait until what readers see includes the server's latest version.
    let rv = api.list(&ListParams::default()).await?.metadata.resource_version.unwrap_or_default();
    let snapshot = informer.wait_for(&rv, Duration::from_secs(10)).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    println!(
        "at rv {rv}: {} pods, {} owned by web; counter handler saw {} notifications",
        snapshot.len(),
        snapshot.by_index(OWNER_UID_INDEX, &uid)?.len(),
        seen.load(Ordering::Relaxed)
    );
    println!("lag: {:?}", informer.lag());
    println!("reflector: {:?}", informer.reflector_status().stats);
    println!("faults injected: {:?}", server.faults().stats());
    informer.shutdown().await;
    server.shutdown().await;
    Ok(())
}
