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
//! | `writes_total{verb,outcome}` | counter | writes through [`Tracked`](crate::Tracked), by `verb` (`create`, `replace`, `replace_status`, `patch`, `patch_status`, `delete`) and `outcome` (`success`; `already_exists`: a create answered 409 because the object exists, the sign of a decision made on a cache that did not show it; `conflict`: another 409; `not_found`; `error`: anything else) |
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

/// The labels of `writes_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct WriteLabels {
    pub(crate) verb: &'static str,
    pub(crate) outcome: &'static str,
}

/// What a write through [`Tracked`](crate::Tracked) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    Success,
    AlreadyExists,
    Conflict,
    NotFound,
    Error,
}

impl WriteOutcome {
    /// The outcome of a `verb` write that ended as `result`.
    pub(crate) fn of<T>(verb: &str, result: &kube::Result<T>) -> Self {
        match result {
            Ok(_) => WriteOutcome::Success,
            Err(kube::Error::Api(status)) => {
                if status.is_already_exists() || (verb == "create" && status.code == 409) {
                    WriteOutcome::AlreadyExists
                } else if status.is_conflict() {
                    WriteOutcome::Conflict
                } else if status.is_not_found() {
                    WriteOutcome::NotFound
                } else {
                    WriteOutcome::Error
                }
            }
            Err(_) => WriteOutcome::Error,
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            WriteOutcome::Success => "success",
            WriteOutcome::AlreadyExists => "already_exists",
            WriteOutcome::Conflict => "conflict",
            WriteOutcome::NotFound => "not_found",
            WriteOutcome::Error => "error",
        }
    }
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
    pub(crate) writes: Family<WriteLabels, Counter>,
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
            writes: Family::default(),
            expectations: ExpectationMetrics::default(),
        }
    }
}

impl Metrics {
    pub(crate) fn reconciled(&self, result: &'static str) {
        self.reconciles.get_or_create(&ResultLabel { result }).inc();
    }

    /// Counts one `verb` write that ended as `outcome`.
    pub(crate) fn wrote(&self, verb: &'static str, outcome: WriteOutcome) {
        self.writes.get_or_create(&WriteLabels { verb, outcome: outcome.label() }).inc();
    }

    /// Writes counted with `outcome` (every verb, or only `verb`).
    pub(crate) fn writes_with(&self, verb: Option<&str>, outcome: WriteOutcome) -> u64 {
        const VERBS: [&str; 6] =
            ["create", "replace", "replace_status", "patch", "patch_status", "delete"];
        VERBS
            .into_iter()
            .filter(|v| verb.is_none_or(|only| only == *v))
            .map(|verb| {
                self.writes
                    .get(&WriteLabels { verb, outcome: outcome.label() })
                    .map_or(0, |c| c.get())
            })
            .sum()
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
            "writes",
            "Writes through the tracked client, by verb and outcome",
            self.writes.clone(),
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
