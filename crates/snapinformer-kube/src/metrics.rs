//! Prometheus metrics of a reflector (`prometheus-client`), computed at scrape time from its
//! [`StatusHandle`].
//!
//! | metric (prefix `snapinformer_kube_`) | type | meaning |
//! | --- | --- | --- |
//! | `received_resource_version` | gauge | numeric last synced version (received and queued) |
//! | `lists` / `list_pages` | counter | completed lists / list pages received |
//! | `full_list_fallbacks` | counter | lists restarted without paging after an expired continue token |
//! | `streaming_lists` / `watch_list_fallbacks` | counter | streaming lists completed / fallen back to a list |
//! | `watches` / `watches_ended` | counter | watches opened / ended normally by the server |
//! | `watch_events` / `bookmarks` | counter | object events / bookmarks received |
//! | `expired` / `too_large` / `throttled` / `errors` | counter | 410s / "too large resource version" / 429s / other failures |
//! | `malformed` | counter | malformed events or objects |
//! | `watch_timeouts` | counter | watches abandoned past their timeout |
//! | `backoffs` / `backoff_seconds` | counter | backoff waits / time spent in them |
//!
//! Every metric carries the label `reflector="<name>"`. Compare `received_resource_version`
//! with the informer's `snapinformer_published_resource_version` to see the writer's lag.

use std::{borrow::Cow, fmt};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
    registry::{Registry, Unit},
};

use crate::StatusHandle;

#[derive(Debug)]
struct ReflectorCollector {
    status: StatusHandle,
}

fn counter(enc: &mut DescriptorEncoder<'_>, name: &str, help: &str, value: u64) -> fmt::Result {
    let c = ConstCounter::new(value);
    c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
}

impl Collector for ReflectorCollector {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> fmt::Result {
        let status = self.status.get();
        let rv = status
            .last_sync_resource_version
            .as_deref()
            .and_then(snapinformer_core::parse_resource_version)
            .unwrap_or(0);
        let g = ConstGauge::new(i64::try_from(rv).unwrap_or(i64::MAX));
        g.encode(enc.encode_descriptor(
            "received_resource_version",
            "Numeric resource version the reflector last received and queued",
            None,
            g.metric_type(),
        )?)?;
        let s = &status.stats;
        let counters: [(&str, &str, u64); 16] = [
            ("lists", "Completed lists", s.lists),
            ("list_pages", "List pages received", s.list_pages),
            (
                "full_list_fallbacks",
                "Lists restarted after an expired continue token",
                s.full_list_fallbacks,
            ),
            ("streaming_lists", "Streaming lists completed", s.streaming_lists),
            (
                "watch_list_fallbacks",
                "Streaming lists that fell back to a list",
                s.watch_list_fallbacks,
            ),
            ("watches", "Watches opened", s.watches),
            ("watches_ended", "Watches ended normally by the server", s.watches_ended),
            ("watch_events", "Object events received", s.watch_events),
            ("bookmarks", "Bookmarks received", s.bookmarks),
            ("expired", "410 Gone/Expired answers", s.expired),
            ("too_large", "Too large resource version answers", s.too_large),
            ("throttled", "429 answers", s.throttled),
            ("errors", "Other failures", s.errors),
            ("malformed", "Malformed events or objects", s.malformed),
            ("watch_timeouts", "Watches abandoned past their timeout", s.watch_timeouts),
            ("backoffs", "Backoff waits", s.backoffs),
        ];
        for (name, help, value) in counters {
            counter(&mut enc, name, help, value)?;
        }
        let c = ConstCounter::new(s.backoff_time.as_secs_f64());
        c.encode(enc.encode_descriptor(
            "backoff",
            "Time spent in backoff waits",
            Some(&Unit::Seconds),
            c.metric_type(),
        )?)?;
        Ok(())
    }
}

impl StatusHandle {
    /// Registers the reflector's metrics in `registry` under the prefix
    /// `snapinformer_kube` and the label `reflector="<name>"` (see [`crate::metrics`]).
    pub fn register_metrics(&self, registry: &mut Registry, name: &str) {
        registry
            .sub_registry_with_prefix("snapinformer_kube")
            .sub_registry_with_label((Cow::Borrowed("reflector"), Cow::Owned(name.to_owned())))
            .register_collector(Box::new(ReflectorCollector { status: self.clone() }));
    }
}
