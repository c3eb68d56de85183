//! Prometheus metrics of a work queue (`prometheus-client`), client-go's workqueue metric set.

use std::{
    borrow::Cow,
    fmt,
    hash::Hash,
    sync::{Arc, Weak},
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{
        counter::ConstCounter,
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Registry, Unit},
};

use super::{Inner, WorkQueue};
use crate::metrics::gauge;

/// The histograms a queue observes into from its creation (shared with every registry it is
/// registered in).
#[derive(Debug, Clone)]
pub(super) struct Histograms {
    pub(super) queue_duration: Histogram,
    pub(super) work_duration: Histogram,
}

/// 10 µs to about 671 s, factor 4.
fn buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(1e-5, 4.0, 14)
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            queue_duration: Histogram::new(buckets()),
            work_duration: Histogram::new(buckets()),
        }
    }
}

/// Computes the gauges and counters from [`WorkQueue::stats`] at scrape time. Holds the queue
/// weakly: once every handle is dropped it encodes nothing.
struct StatsCollector<K> {
    queue: Weak<Inner<K>>,
}

impl<K> fmt::Debug for StatsCollector<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatsCollector").finish_non_exhaustive()
    }
}

fn counter(enc: &mut DescriptorEncoder<'_>, name: &str, help: &str, value: u64) -> fmt::Result {
    let c = ConstCounter::new(value);
    c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
}

impl<K: Hash + Eq + Clone + Send + Sync + fmt::Debug + 'static> Collector for StatsCollector<K> {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> fmt::Result {
        let Some(inner) = self.queue.upgrade() else { return Ok(()) };
        let stats = WorkQueue { inner }.stats();
        gauge(&mut enc, "depth", "Items ready in the work queue", None, stats.depth as i64)?;
        counter(&mut enc, "adds", "Items added to the work queue", stats.adds)?;
        counter(&mut enc, "retries", "Delayed re-adds handled by the work queue", stats.retries)?;
        gauge(
            &mut enc,
            "unfinished_work",
            "Sum of how long every item being processed has been processing",
            Some(&Unit::Seconds),
            stats.unfinished_work.as_secs_f64(),
        )?;
        gauge(
            &mut enc,
            "longest_running_processor",
            "How long the longest-running item being processed has been processing",
            Some(&Unit::Seconds),
            stats.longest_running.as_secs_f64(),
        )?;
        gauge(
            &mut enc,
            "waiting",
            "Items parked until a delay passes",
            None,
            stats.waiting as i64,
        )?;
        gauge(&mut enc, "processing", "Items being processed", None, stats.processing as i64)?;
        Ok(())
    }
}

/// Registers `queue`'s metrics in `registry` under the prefix `snapinformer_workqueue` and the
/// label `name="<queue name>"`:
///
/// | metric (prefix `snapinformer_workqueue_`) | type | meaning |
/// | --- | --- | --- |
/// | `depth` | gauge | items ready to be handed out |
/// | `adds_total` | counter | adds that queued an item (deduplicated adds excluded) |
/// | `retries_total` | counter | delayed re-adds (`add_after`, `add_rate_limited`) |
/// | `queue_duration_seconds` | histogram | time from being added to being handed out |
/// | `work_duration_seconds` | histogram | time from `get` to `done` |
/// | `unfinished_work_seconds` | gauge | sum of the ages of the items being processed |
/// | `longest_running_processor_seconds` | gauge | age of the oldest item being processed |
/// | `waiting` | gauge | items parked until a delay passes |
/// | `processing` | gauge | items being processed |
///
/// Gauges and counters are computed from [`WorkQueue::stats`] at scrape time (so they are
/// right even while every worker is stuck); the histograms hold every observation since the
/// queue was created. The registry holds the queue weakly. Register a queue once per registry:
/// two queues with the same name in one registry would produce duplicate series.
#[doc(alias = "MetricsProvider")]
pub fn register_metrics<K: Hash + Eq + Clone + Send + Sync + fmt::Debug + 'static>(
    queue: &WorkQueue<K>,
    registry: &mut Registry,
) {
    let sub = registry
        .sub_registry_with_prefix("snapinformer_workqueue")
        .sub_registry_with_label((Cow::Borrowed("name"), Cow::Owned(queue.inner.name.clone())));
    let h = &queue.inner.histograms;
    sub.register_with_unit(
        "queue_duration",
        "Time an item waits in the work queue before it is handed out",
        Unit::Seconds,
        h.queue_duration.clone(),
    );
    sub.register_with_unit(
        "work_duration",
        "Time from handing an item out to its done",
        Unit::Seconds,
        h.work_duration.clone(),
    );
    sub.register_collector(Box::new(StatsCollector { queue: Arc::downgrade(&queue.inner) }));
}
