//! Prometheus metrics of an informer (`prometheus-client`).
//!
//! | metric (prefix `snapinformer_`) | type | meaning |
//! | --- | --- | --- |
//! | `queue_depth` | gauge | deltas queued |
//! | `queue_entries` | gauge | queue entries (keys for a DeltaFIFO) |
//! | `lag_deltas` | gauge | deltas queued or in flight: not yet visible to readers |
//! | `lag_seconds` | gauge | age of the oldest delta not yet visible to readers |
//! | `queue_producer_blocked` | counter | times a producer waited for room (bounded queues) |
//! | `queue_producer_blocked_seconds` | counter | time producers waited for room |
//! | `published_resource_version` | gauge | numeric resource version of the published snapshot |
//! | `batch_size` | histogram | deltas per applied batch |
//! | `batch_duration_seconds` | histogram | time to apply, publish and distribute one batch |
//! | `staleness_seconds` | histogram | per delta: time from entering the queue to being visible to readers |
//! | `publications` | counter | snapshots published |
//! | `deltas_applied` | counter | deltas applied to the store |
//! | `batch_window_waits` | counter | times the processing loop waited out its batch window |
//! | `handler_buffer_depth{handler}` | gauge | notifications waiting in a handler's buffer |
//! | `handler_notifications{handler}` | counter | notifications pushed to a handler |
//!
//! Queue and lag gauges are computed at scrape time, so they are right even while the
//! processing loop is stuck. Every metric carries the label `informer="<name>"`.

use std::{borrow::Cow, fmt, sync::Arc, time::Instant};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        counter::{ConstCounter, Counter},
        family::Family,
        gauge::{ConstGauge, Gauge},
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Registry, Unit},
};
use tokio::sync::watch;

use crate::{freshness::Progress, queue::Queue};

/// Labels of per-handler metrics.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct HandlerLabels {
    /// The handler's name.
    pub handler: String,
}

/// The metrics one informer maintains. Cheap to clone (every metric is shared).
#[derive(Debug, Clone)]
pub struct InformerMetrics {
    /// Deltas per applied batch.
    pub batch_size: Histogram,
    /// Seconds to apply, publish and distribute one batch.
    pub batch_duration: Histogram,
    /// Seconds from a delta entering the queue to its publication (staleness), per delta.
    pub staleness: Histogram,
    /// Snapshots published.
    pub publications: Counter,
    /// Deltas applied.
    pub deltas_applied: Counter,
    /// Times the processing loop waited out its
    /// [`batch_window`](crate::InformerBuilder::batch_window) before the next batch.
    pub batch_window_waits: Counter,
    /// Notifications waiting per handler.
    pub handler_buffer_depth: Family<HandlerLabels, Gauge>,
    /// Notifications pushed per handler.
    pub handler_notifications: Family<HandlerLabels, Counter>,
}

impl Default for InformerMetrics {
    fn default() -> Self {
        InformerMetrics {
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
            batch_duration: Histogram::new(exponential_buckets(1e-5, 4.0, 10)),
            staleness: Histogram::new(exponential_buckets(1e-5, 4.0, 12)),
            publications: Counter::default(),
            deltas_applied: Counter::default(),
            batch_window_waits: Counter::default(),
            handler_buffer_depth: Family::default(),
            handler_notifications: Family::default(),
        }
    }
}

/// Computes the queue and lag gauges at scrape time.
struct LagCollector<T> {
    queue: Arc<dyn Queue<T>>,
    progress: watch::Receiver<Progress>,
}

impl<T> fmt::Debug for LagCollector<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LagCollector").finish_non_exhaustive()
    }
}

/// Encodes one constant gauge at scrape time (shared by the informer's and the work queue's
/// collectors).
pub(crate) fn gauge<N>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: N,
) -> fmt::Result
where
    ConstGauge<N>: EncodeMetric,
{
    let g = ConstGauge::new(value);
    let m = enc.encode_descriptor(name, help, unit, g.metric_type())?;
    g.encode(m)
}

impl<T: Send + Sync + 'static> Collector for LagCollector<T> {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> fmt::Result {
        let stats = self.queue.stats();
        gauge(&mut enc, "queue_depth", "Deltas queued", None, stats.depth as i64)?;
        gauge(
            &mut enc,
            "queue_entries",
            "Queue entries (keys for a DeltaFIFO)",
            None,
            stats.entries as i64,
        )?;
        gauge(
            &mut enc,
            "lag_deltas",
            "Deltas queued or in flight, not yet visible to readers",
            None,
            stats.lag_deltas() as i64,
        )?;
        gauge(
            &mut enc,
            "lag",
            "Age of the oldest delta not yet visible to readers",
            Some(&Unit::Seconds),
            stats.lag_time(Instant::now()).as_secs_f64(),
        )?;
        let c = ConstCounter::new(stats.producer_blocked_total);
        c.encode(enc.encode_descriptor(
            "queue_producer_blocked",
            "Times a producer waited for room in a bounded queue",
            None,
            c.metric_type(),
        )?)?;
        let c = ConstCounter::new(stats.producer_blocked.as_secs_f64());
        c.encode(enc.encode_descriptor(
            "queue_producer_blocked",
            "Time producers waited for room in a bounded queue",
            Some(&Unit::Seconds),
            c.metric_type(),
        )?)?;
        let rv = self.progress.borrow().resource_version_num.unwrap_or(0);
        gauge(
            &mut enc,
            "published_resource_version",
            "Numeric resource version of the published snapshot",
            None,
            i64::try_from(rv).unwrap_or(i64::MAX),
        )?;
        Ok(())
    }
}

impl InformerMetrics {
    /// Registers these metrics and the scrape-time queue gauges of `queue` in `registry`, under
    /// the prefix `snapinformer` and the label `informer="<name>"`.
    pub(crate) fn register<T: Send + Sync + 'static>(
        &self,
        registry: &mut Registry,
        name: &str,
        queue: Arc<dyn Queue<T>>,
        progress: watch::Receiver<Progress>,
    ) {
        let sub = registry
            .sub_registry_with_prefix("snapinformer")
            .sub_registry_with_label((Cow::Borrowed("informer"), Cow::Owned(name.to_owned())));
        sub.register("batch_size", "Deltas per applied batch", self.batch_size.clone());
        sub.register_with_unit(
            "batch_duration",
            "Time to apply, publish and distribute one batch",
            Unit::Seconds,
            self.batch_duration.clone(),
        );
        sub.register_with_unit(
            "staleness",
            "Time from a delta entering the queue to its publication to readers",
            Unit::Seconds,
            self.staleness.clone(),
        );
        sub.register("publications", "Snapshots published", self.publications.clone());
        sub.register("deltas_applied", "Deltas applied to the store", self.deltas_applied.clone());
        sub.register(
            "batch_window_waits",
            "Times the processing loop waited out its batch window",
            self.batch_window_waits.clone(),
        );
        sub.register(
            "handler_buffer_depth",
            "Notifications waiting in a handler's buffer",
            self.handler_buffer_depth.clone(),
        );
        sub.register(
            "handler_notifications",
            "Notifications pushed to a handler",
            self.handler_notifications.clone(),
        );
        sub.register_collector(Box::new(LagCollector { queue, progress }));
    }
}

/// Encodes `registry` in the OpenMetrics text format, as an HTTP `/metrics` endpoint serves it
/// (content type `application/openmetrics-text; version=1.0.0; charset=utf-8`).
pub fn encode_text(registry: &Registry) -> Result<String, fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}
