//! Runs a pod informer against the cluster of your kubeconfig (or in-cluster config) and
//! prints its size, lag and reflector counters every five seconds, for a minute.
//!
//! `cargo run -p snapinformer-kube --example real_cluster` (needs a reachable cluster;
//! `cargo test` only builds it).

use std::time::Duration;

use kube::Api;
use snapinformer_kube::{ReflectorConfig, pods, transform};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = kube::Client::try_default().await?;
    let informer = pods(Api::all(client))
        .reflector(ReflectorConfig::new().name("pods"))
        .transform(transform::strip_managed_fields)
        .build()?;
    informer.start()?;
    if !informer.wait_for_sync(Duration::from_secs(120)).await {
        eprintln!("not synced after 2 minutes: {:?}", informer.reflector_status());
    }
    for _ in 0..12 {
        let snapshot = informer.snapshot();
        println!(
            "{} pods at rv {:?}; lag {:?}",
            snapshot.len(),
            snapshot.resource_version(),
            informer.lag()
        );
        println!("  reflector: {:?}", informer.reflector_status().stats);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    informer.shutdown().await;
    Ok(())
}
