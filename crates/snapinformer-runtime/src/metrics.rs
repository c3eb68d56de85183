//! Prometheus metrics of a controller (`prometheus-client`).
//!
//! | metric (prefix `snapinformer_controller_`) | type | meaning |
//! | --- | --- | --- |
//! | `reconciles_total{result}` | counter | reconciles run, by `result`: `success`, `error`, `panic` |
//! | `reconcile_duration_seconds` | histogram | time of one reconcile (after its read-your-writes wait) |
//! | `ryw_waits_total` | counter | reconciles that waited for a cache to show the key's last writes |
//! | `ryw_wait_duration_seconds` | histogram | how long those waits took (timeouts included) |
//! | `ryw_timeouts_total` | counter | waits that gave up after the timeout |
//! | `ryw_requeues_total` | counter | reconciles put off after a timeout (policy [`OnTimeout::Requeue`](crate::OnTimeout::Requeue)) |
//! | `ryw_untracked_writes_total` | counter | writes of a type no registered cache shows: not waited for |
//! | `expected_adds` | gauge | creates made and not yet observed, over all keys |
//! | `expected_deletes` | gauge | deletes made and not yet observed, over all keys |
//! | `expectations_expired_total` | counter | keys whose expectations expired unobserved |
//!
//! Every metric carries the label `controller="<name>"`. The controller's work queue registers
//! its own metrics alongside (prefix `snapinformer_workqueue_`, label `name="<name>"`).

use std::borrow::Cow;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Registry, Unit},
};

use crate::expectations::ExpectationMetrics;

/// The `result` label of `reconciles_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ResultLabel {
    pub(crate) result: &'static str,
}

/// The metrics of one controller. Cheap to clone (every metric is shared).
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    pub(crate) reconciles: Family<ResultLabel, Counter>,
    pub(crate) reconcile_duration: Histogram,
    pub(crate) ryw_waits: Counter,
    pub(crate) ryw_wait_duration: Histogram,
    pub(crate) ryw_timeouts: Counter,
    pub(crate) ryw_requeues: Counter,
    pub(crate) ryw_untracked_writes: Counter,
    pub(crate) expectations: ExpectationMetrics,
}

/// 100 µs to about 430 s, factor 4.
fn buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(1e-4, 4.0, 12)
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            reconciles: Family::default(),
            reconcile_duration: Histogram::new(buckets()),
            ryw_waits: Counter::default(),
            ryw_wait_duration: Histogram::new(buckets()),
            ryw_timeouts: Counter::default(),
            ryw_requeues: Counter::default(),
            ryw_untracked_writes: Counter::default(),
            expectations: ExpectationMetrics::default(),
        }
    }
}

impl Metrics {
    pub(crate) fn reconciled(&self, result: &'static str) {
        self.reconciles.get_or_create(&ResultLabel { result }).inc();
    }

    pub(crate) fn register(&self, registry: &mut Registry, controller: &str) {
        let sub = registry
            .sub_registry_with_prefix("snapinformer_controller")
            .sub_registry_with_label((Cow::Borrowed("controller"), Cow::Owned(controller.into())));
        sub.register("reconciles", "Reconciles run, by result", self.reconciles.clone());
        sub.register_with_unit(
            "reconcile_duration",
            "Time of one reconcile, after its read-your-writes wait",
            Unit::Seconds,
            self.reconcile_duration.clone(),
        );
        sub.register(
            "ryw_waits",
            "Reconciles that waited for a cache to show the key's last writes",
            self.ryw_waits.clone(),
        );
        sub.register_with_unit(
            "ryw_wait_duration",
            "Time reconciles waited for their last writes to be visible",
            Unit::Seconds,
            self.ryw_wait_duration.clone(),
        );
        sub.register(
            "ryw_timeouts",
            "Read-your-writes waits that gave up after the timeout",
            self.ryw_timeouts.clone(),
        );
        sub.register(
            "ryw_requeues",
            "Reconciles put off after a read-your-writes timeout",
            self.ryw_requeues.clone(),
        );
        sub.register(
            "ryw_untracked_writes",
            "Writes of a type no registered cache shows, not waited for",
            self.ryw_untracked_writes.clone(),
        );
        sub.register(
            "expected_adds",
            "Creates made and not yet observed",
            self.expectations.adds.clone(),
        );
        sub.register(
            "expected_deletes",
            "Deletes made and not yet observed",
            self.expectations.deletes.clone(),
        );
        sub.register(
            "expectations_expired",
            "Keys whose expectations expired unobserved",
            self.expectations.expired.clone(),
        );
    }
}
