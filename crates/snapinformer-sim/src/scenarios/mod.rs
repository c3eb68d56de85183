//! The scenarios, each with its command-line arguments, its run and its report:
//!
//! - [`store`]: the cache alone: one writer (saturated, open loop, a sweep of rates) and paced
//!   readers, one worker process per row;
//! - [`seed`]: the field report reproduced: StatefulSet and DaemonSet controllers on 200,000
//!   pods, in process, over HTTP to the test API server and against the real control plane;
//! - [`informer`]: the whole informer fed open loop in process, serving `/metrics`;
//! - [`soak`]: pod churn with watch faults for a long time, then checks;
//! - [`kcm`]: the real kube-controller-manager against the test API server at the field
//!   report's scale, counted from the server side.
//!
//! [`serverside`] holds what `kcm` and `seed --mode real` share to count from the API server's
//! side: its metrics, its audit log and a watch of its pods.

pub mod informer;
pub mod kcm;
pub mod seed;
pub mod serverside;
pub mod soak;
pub mod store;

use std::time::Duration;

use crate::{harness::placement::Placement, pods::PodProfile};

/// The load shared by the `store` and `informer` scenarios: population, readers, open loop.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Pods in the store (200 owners of 1000 pods at the default).
    #[arg(long, default_value_t = 200_000)]
    pub objects: usize,
    /// Nodes the pods are spread over.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Reader threads (paced to use about one core together).
    #[arg(long, default_value_t = 10)]
    pub readers: usize,
    /// Length of the open-loop phase.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Open-loop arrival rate in updates per second (for `store`, 0 runs saturation only).
    #[arg(long, default_value_t = 20_000)]
    pub rate: u64,
    /// How much of each pod to fill in (`small` for a million pods on 24 GiB).
    #[arg(long, value_enum, default_value_t = PodProfile::Realistic)]
    pub pod_profile: PodProfile,
    /// Where the writer and the readers run: unpinned (any core, as a controller manager runs)
    /// or pinned (writer on the first core, readers on the last).
    #[arg(long, value_enum, default_value_t = Placement::Unpinned)]
    pub placement: Placement,
}
