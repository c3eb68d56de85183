//! Settling before a measurement: the server quiet, the informer caught up, the heap steady.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_apiserver::ServerHandle;
use snapinformer_kube::KubeInformer;

use crate::harness::heap::HeapMeter;

/// Waits until the server's resourceVersion has not moved for `quiet` (at most 60 s).
pub(super) async fn server_quiet(server: &ServerHandle, quiet: Duration) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rv = server.resource_version();
    let mut since = Instant::now();
    while since.elapsed() < quiet && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = server.resource_version();
        if now != rv {
            rv = now;
            since = Instant::now();
        }
    }
    rv
}

/// Waits until the informer has published `rv` and the handler has handled everything.
pub(super) async fn caught_up(
    informer: &KubeInformer<Pod>,
    registration: &snapinformer_core::HandlerRegistration,
    rv: u64,
) -> Result<(), String> {
    informer
        .wait_for(&rv.to_string(), Duration::from_secs(300))
        .await
        .map_err(|e| format!("the informer did not catch up with the server: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut handled = registration.handled();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = registration.handled();
        if registration.buffer_depth() == 0 && now == handled {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the handler is still busy after 120 s ({} buffered)",
                registration.buffer_depth()
            ));
        }
        handled = now;
    }
}

/// Live heap bytes once they stop falling (at most 5 s).
async fn settled_heap(heap: &dyn HeapMeter) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = heap.current();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = heap.current();
        if now + now / 1000 >= last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Brings the process to the state in which the heap is compared: server history compacted,
/// informer relisted and caught up, handler idle, heap steady.
pub(super) async fn measure_heap(
    server: &ServerHandle,
    informer: &KubeInformer<Pod>,
    registration: &snapinformer_core::HandlerRegistration,
    heap: &dyn HeapMeter,
) -> Result<u64, String> {
    let lists = informer.reflector_status().stats.lists;
    // The re-watch from the last version seen would be valid after the compaction: force the
    // relist, so that both measurements see a freshly listed cache.
    server.faults().update(|f| f.force_watch_410 = 1);
    server.restart_with_compacted_history();
    let deadline = Instant::now() + Duration::from_secs(300);
    while informer.reflector_status().stats.lists == lists {
        if Instant::now() > deadline {
            return Err("no relist within 300 s of compacting the history".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rv = server_quiet(server, Duration::from_millis(500)).await;
    caught_up(informer, registration, rv).await?;
    Ok(settled_heap(heap).await)
}

/// UID and resourceVersion per pod key.
pub(super) type State = std::collections::BTreeMap<String, (String, u64)>;

pub(super) fn first_differences(want: &State, got: &State, what: &str) -> String {
    let mut out = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => out.push(format!("{k} missing from {what}")),
            Some(g) if g != v => out.push(format!("{k}: server {v:?}, {what} {g:?}")),
            _ => {}
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        out.push(format!("{k} in {what} but not on the server"));
    }
    let n = out.len();
    out.truncate(10);
    format!("{n} differences: {}", out.join("; "))
}
