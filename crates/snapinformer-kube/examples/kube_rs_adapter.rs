//! A kube-rs controller swapping its `reflector::Store` for snapinformer's store: the kube-rs
//! watcher stays, its events are fed into a snapinformer informer, and reads become snapshots
//! (O(1), never blocking the writer) with indexes, which kube-rs' store does not have.
//!
//! `cargo run -p snapinformer-kube --example kube_rs_adapter`

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    runtime::{WatchStreamExt, watcher},
};
use snapinformer_apiserver::{Config, TestApiServer, generate};
use snapinformer_store::{IndexFn, StoreBuilder};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = TestApiServer::start(Config::default()).await?;
    for i in 0..6 {
        let node = format!("node-{}", i % 2);
        server.create(&generate::pod("default", &format!("p{i}"), Some(&node), &[]))?;
    }
    let api: Api<Pod> = Api::all(server.client()?);

    // Before (kube-rs):
    //   let (reader, writer) = kube::runtime::reflector::store();
    //   let stream = reflector(writer, watcher(api, watcher::Config::default()));
    // After: the same watcher, our store and informer.
    let access = snapinformer_kube::access::<Pod>();
    let informer = snapinformer_core::InformerBuilder::with_store(
        StoreBuilder::new(access)
            .index("node", IndexFn::field(|p: &Pod| p.spec.as_ref()?.node_name.as_deref())),
    )
    .name("pods")
    .build()?;
    informer.start()?;
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let feed = tokio::spawn(snapinformer_kube::feed_watcher(stream, informer.queue().clone()));

    assert!(informer.wait_for_sync(Duration::from_secs(10)).await);
    let snapshot = informer.snapshot();
    println!(
        "{} pods; {} on node-0 (index lookup, no full-list copy)",
        snapshot.len(),
        snapshot.by_index("node", "node-0")?.len()
    );
    feed.abort();
    informer.shutdown().await;
    server.shutdown().await;
    Ok(())
}
