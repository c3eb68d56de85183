//! The churn: workers updating, deleting and re-creating pods, and the fault driver that cuts
//! watches and forces relists.

use std::{
    collections::BinaryHeap,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use snapinformer_apiserver::ServerHandle;

use super::WORKERS;
use crate::pods::Rng;

#[derive(Debug, Default)]
pub(super) struct ChurnCounters {
    pub(super) status_updates: AtomicU64,
    pub(super) label_updates: AtomicU64,
    pub(super) deletes: AtomicU64,
    pub(super) creates: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) compactions: AtomicU64,
}

/// Retries a write through transport errors and 429/5xx for up to 10 s. `Ok(false)` when the
/// server answered `benign` (404 for a delete, 409 for a create): the write had happened.
pub(super) async fn write<T, Fut>(
    counters: &ChurnCounters,
    benign: u16,
    mut f: impl FnMut() -> Fut,
) -> Result<bool, String>
where
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let attempt = tokio::time::timeout(Duration::from_secs(10), f()).await;
        let err = match attempt {
            Ok(Ok(_)) => return Ok(true),
            Ok(Err(kube::Error::Api(s))) if s.code == benign => return Ok(false),
            Ok(Err(kube::Error::Api(s))) if s.code != 429 && s.code < 500 => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                return Err(format!("{} {}: {}", s.code, s.reason, s.message));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out after 10 s".to_owned(),
        };
        counters.errors.fetch_add(1, Ordering::Relaxed);
        if Instant::now() > deadline {
            return Err(err);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One churn worker: owns the pods whose index is `worker` modulo [`WORKERS`].
pub(super) async fn churn_worker(
    worker: usize,
    api: Api<Pod>,
    templates: Arc<Vec<Pod>>,
    rate: u64,
    stop: Arc<AtomicBool>,
    counters: Arc<ChurnCounters>,
) -> Result<Vec<usize>, String> {
    let mut rng = Rng::from_clock(worker as u64 + 1);
    let mut alive: Vec<usize> = (worker..templates.len()).step_by(WORKERS).collect();
    let mut pending: BinaryHeap<std::cmp::Reverse<(Instant, usize)>> = BinaryHeap::new();
    let period = Duration::from_secs_f64(WORKERS as f64 / rate.max(1) as f64);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let pp = PatchParams::default();
    let post = PostParams::default();
    let dp = DeleteParams::default();
    let mut generation: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        // Re-create what is due (as a StatefulSet controller would, same name, new UID).
        while let Some(std::cmp::Reverse((due, index))) = pending.peek().copied() {
            if due > Instant::now() {
                break;
            }
            pending.pop();
            let pod = &templates[index];
            if write(&counters, 409, || api.create(&post, pod)).await? {
                counters.creates.fetch_add(1, Ordering::Relaxed);
            }
            alive.push(index);
        }
        tick.tick().await;
        if alive.is_empty() {
            continue;
        }
        generation += 1;
        let pos = rng.below(alive.len());
        let index = alive[pos];
        let name = templates[index].metadata.name.as_deref().unwrap_or_default();
        match rng.below(100) {
            0..35 => {
                let patch = Patch::Merge(serde_json::json!({
                    "status": {"message": format!("soak {worker}-{generation}")}
                }));
                if write(&counters, 0, || api.patch_status(name, &pp, &patch)).await? {
                    counters.status_updates.fetch_add(1, Ordering::Relaxed);
                }
            }
            35..70 => {
                let patch = Patch::Merge(serde_json::json!({
                    "metadata": {"labels": {"soak-generation": generation.to_string()}}
                }));
                if write(&counters, 0, || api.patch(name, &pp, &patch)).await? {
                    counters.label_updates.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                if write(&counters, 404, || api.delete(name, &dp)).await? {
                    counters.deletes.fetch_add(1, Ordering::Relaxed);
                }
                alive.swap_remove(pos);
                let delay = rng.between(Duration::from_millis(100), Duration::from_secs(3));
                pending.push(std::cmp::Reverse((Instant::now() + delay, index)));
            }
        }
    }
    Ok(pending.into_iter().map(|std::cmp::Reverse((_, index))| index).collect())
}

/// Watch events per churn write: the write, plus for a delete (30 %) the re-create and the
/// kubelet's start of the new pod.
const EVENTS_PER_WRITE: f64 = 1.6;

/// Per-event probability of cutting a watch stream so that cuts come every `mean` on average
/// at `rate` churn writes per second.
pub(super) fn cut_probability(rate: u64, mean: Duration) -> f64 {
    (1.0 / (rate.max(1) as f64 * EVENTS_PER_WRITE * mean.as_secs_f64().max(0.001))).min(1.0)
}

/// Every `10 * mean` on average (uniformly between a third and five thirds of it) forces a
/// relist: either a 410 on the next re-watch (after the next random cut), or a restart onto a
/// compacted history that ends the watch at once, with a 410 forced on the re-watch (a watch
/// from the very version of the compaction would still be valid) and half the time on the
/// relist's first list too. The random cuts themselves are the server's
/// `watch_cut_probability`, set by the caller (it applies to watches opened after it is set).
pub(super) async fn fault_driver(
    server: Arc<ServerHandle>,
    mean: Duration,
    stop: Arc<AtomicBool>,
    counters: Arc<ChurnCounters>,
) {
    let mut rng = Rng::from_clock(1000);
    let faults = server.faults();
    let every = mean * 10;
    while !stop.load(Ordering::Relaxed) {
        let wait = rng.between(every / 3, every * 5 / 3);
        let until = Instant::now() + wait;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if rng.below(2) == 0 {
            faults.update(|f| f.force_watch_410 += 1);
        } else {
            faults.update(|f| {
                f.force_watch_410 += 1;
                f.force_list_410 += u32::from(rng.below(2) == 0);
            });
            server.restart_with_compacted_history();
            counters.compactions.fetch_add(1, Ordering::Relaxed);
        }
    }
}
