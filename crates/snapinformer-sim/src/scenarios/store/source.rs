//! Where an open-loop phase's updates come from: built before the phase (a pool) or built one
//! by one at their slots, as a reflector decodes each event it receives.
//!
//! A pool is fair to a Rust row but not to a Go one. The pool is live heap until the phase
//! ends, so Go's collector, whose next cycle starts when the heap has grown by as much as was
//! live after the last one, sees a phase that allocates almost nothing: in every `store` run
//! of 2026-12-03 the Go rows' 20 s open loop ran with **no** collection cycle, while a cluster
//! decoding 20,000 pods/s would start one about every 10 s. Building each update at its slot
//! (the same generator in Rust, [`pods::make_pod`], and in Go, `makePod`) puts that allocation
//! back into the phase, on every row alike, and leaves no pool to keep the collector's trigger
//! out of reach. The build stands in for decoding; its cost per update is reported for every
//! row (`open_loop_build_us_per_update`), since it lands on the source's thread (the informer
//! rows' feeder) or on the writer (the cache rows, whose writer takes updates straight from
//! their source).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use super::InProcessRow;
use crate::{
    pods::{self, Shape, WorkloadDigest},
    rows::{Batches, CacheKind, Objects},
};

/// How the open loop and the sweep get their updates (`--open-loop-updates`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum OpenLoopUpdates {
    /// Each update is built at its slot, by the row's source: the allocation decoding makes
    /// happens in the phase, on both sides (the default).
    #[default]
    AtSlot,
    /// Every update is built before the phase, all held in a pool until it ends: how runs before
    /// 2026-12-04 measured (and what their reports mean when the field is missing).
    Prebuilt,
}

impl OpenLoopUpdates {
    /// What reports from before the field existed measured.
    pub fn before_the_field() -> Self {
        OpenLoopUpdates::Prebuilt
    }
}

/// One phase's updates, handed to a row a batch at a time.
pub struct Updates {
    total: usize,
    first_rv: Option<u64>,
    kind: Kind,
    built: usize,
    build_time: Duration,
}

enum Kind {
    Prebuilt(Batches),
    AtSlot(Plan),
}

/// What to build: update `u` is pod `plan[u].0` on node `plan[u].1` at resource version
/// `first_rv + u`, in the form `row` holds pods.
struct Plan {
    row: InProcessRow,
    shape: Shape,
    plan: Vec<(usize, usize)>,
    next: usize,
}

impl Updates {
    /// Updates built before the phase.
    pub fn prebuilt(pool: Objects) -> Self {
        Updates {
            total: pool.len(),
            first_rv: pool.first_resource_version(),
            kind: Kind::Prebuilt(pool.into_batches()),
            built: 0,
            build_time: Duration::ZERO,
        }
    }

    /// `count` updates of random pods (the plan of [`pods::update_plan`] with `seed`, the same
    /// as [`super::updates`] builds), each built when it is taken.
    pub fn at_slot(
        row: InProcessRow,
        shape: &Shape,
        count: usize,
        first_rv: u64,
        seed: u64,
    ) -> Self {
        Updates {
            total: count,
            first_rv: (count > 0).then_some(first_rv),
            kind: Kind::AtSlot(Plan {
                row,
                shape: *shape,
                plan: pods::update_plan(shape, count, seed),
                next: 0,
            }),
            built: 0,
            build_time: Duration::ZERO,
        }
    }

    /// How many updates the phase has.
    pub fn len(&self) -> usize {
        self.total
    }

    /// Whether the phase has none.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// How many are left to take.
    pub fn remaining(&self) -> usize {
        match &self.kind {
            Kind::Prebuilt(b) => b.remaining(),
            Kind::AtSlot(p) => p.plan.len() - p.next,
        }
    }

    /// The resource version of the first update (`None` without updates, or for a pool whose
    /// first pod has no numeric one).
    pub fn first_resource_version(&self) -> Option<u64> {
        self.first_rv
    }

    /// The next `n` updates (fewer at the end; none when none is left), built now if they are
    /// built at their slots.
    pub fn take(&mut self, n: usize) -> Objects {
        match &mut self.kind {
            Kind::Prebuilt(b) => b.take(n),
            Kind::AtSlot(p) => {
                let began = Instant::now();
                let end = (p.next + n).min(p.plan.len());
                let first_rv = self.first_rv.unwrap_or(0);
                let out = build(p.row, &p.shape, &p.plan[p.next..end], first_rv + p.next as u64);
                self.built += end - p.next;
                p.next = end;
                self.build_time += began.elapsed();
                out
            }
        }
    }

    /// Average wall time of building one update at its slot, microseconds (`None` for a pool,
    /// or before any was built).
    pub fn build_us_per_update(&self) -> Option<f64> {
        (self.built > 0).then(|| self.build_time.as_secs_f64() * 1e6 / self.built as f64)
    }

    /// Adds every update of the phase to `digest` (call before the phase: for updates built at
    /// their slots it builds each once more on every core, untimed, and drops it).
    pub fn add_to_digest(&self, digest: &mut WorkloadDigest, phase: &str) {
        match &self.kind {
            Kind::Prebuilt(b) => super::add_to_digest(digest, phase, &b.as_objects()),
            Kind::AtSlot(p) => {
                const CHUNK: usize = 20_000;
                let first_rv = self.first_rv.unwrap_or(0);
                for (c, chunk) in p.plan.chunks(CHUNK).enumerate() {
                    let rv = first_rv + (c * CHUNK) as u64;
                    let pods = pods::generate(chunk.len(), |u| {
                        pods::make_pod(&p.shape, chunk[u].0, rv + u as u64, chunk[u].1)
                    });
                    digest.add(phase, &pods);
                }
            }
        }
    }
}

/// `plan` built in `row`'s form on this thread, resource versions from `first_rv`.
fn build(row: InProcessRow, shape: &Shape, plan: &[(usize, usize)], first_rv: u64) -> Objects {
    let pod = |u: usize| pods::make_pod(shape, plan[u].0, first_rv + u as u64, plan[u].1);
    match row {
        InProcessRow::Cache(CacheKind::SnapshotCompact) | InProcessRow::InformerCompact => {
            Objects::Compact(
                (0..plan.len())
                    .map(|u| Arc::new(crate::rows::compact::to_compact(&pod(u))))
                    .collect(),
            )
        }
        InProcessRow::InformerArena => {
            Objects::Pods((0..plan.len()).map(|u| pods::in_arena(pod(u))).collect())
        }
        InProcessRow::Cache(_) | InProcessRow::Informer | InProcessRow::InformerCovering => {
            Objects::Pods((0..plan.len()).map(|u| Arc::new(pod(u))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::PodProfile;
    use k8s_openapi::api::core::v1::Pod;

    fn shape() -> Shape {
        Shape::for_objects(500, 7).with_profile(PodProfile::Realistic)
    }

    fn collect(mut u: Updates, step: usize) -> Vec<Arc<Pod>> {
        let mut out = Vec::new();
        while u.remaining() > 0 {
            out.extend(u.take(step).into_pods());
        }
        assert!(u.take(step).is_empty(), "nothing is left after the last update");
        out
    }

    #[test]
    fn updates_built_at_their_slots_equal_the_prebuilt_pool() {
        let shape = shape();
        let row = InProcessRow::Cache(CacheKind::Snapshot);
        let pool = super::super::updates(row, &shape, 1234, 9000, 13);
        let prebuilt = collect(Updates::prebuilt(pool), 1000);
        let at_slot = Updates::at_slot(row, &shape, 1234, 9000, 13);
        assert_eq!(at_slot.first_resource_version(), Some(9000));
        assert_eq!(at_slot.len(), 1234);
        let built = collect(at_slot, 7);
        assert_eq!(built.len(), prebuilt.len());
        assert!(built.iter().zip(&prebuilt).all(|(a, b)| **a == **b));
    }

    #[test]
    fn both_sources_give_the_same_digest() {
        let shape = shape();
        let row = InProcessRow::Informer;
        let pool = super::super::updates(row, &shape, 45_000, 1, 5);
        let (mut a, mut b) = (WorkloadDigest::default(), WorkloadDigest::default());
        Updates::prebuilt(pool).add_to_digest(&mut a, "open-loop");
        Updates::at_slot(row, &shape, 45_000, 1, 5).add_to_digest(&mut b, "open-loop");
        assert_eq!(a.hex(), b.hex());
        let mut c = WorkloadDigest::default();
        Updates::at_slot(row, &shape, 45_000, 1, 6).add_to_digest(&mut c, "open-loop");
        assert_ne!(a.hex(), c.hex(), "another plan gives another digest");
    }

    #[test]
    fn compact_rows_get_compact_pods_built_at_their_slots() {
        let shape = shape();
        let mut u = Updates::at_slot(InProcessRow::InformerCompact, &shape, 10, 77, 3);
        let Objects::Compact(pods) = u.take(4) else { panic!("compact rows take compact pods") };
        assert_eq!(pods.len(), 4);
        assert_eq!(pods[0].resource_version(), Some("77"));
        assert_eq!(pods[3].resource_version(), Some("80"));
        assert!(u.build_us_per_update().is_some());
        assert_eq!(u.remaining(), 6);
    }

    #[test]
    fn a_pool_reports_no_build_time() {
        let shape = shape();
        let row = InProcessRow::Cache(CacheKind::Snapshot);
        let mut u = Updates::prebuilt(super::super::updates(row, &shape, 10, 5, 1));
        assert_eq!(u.first_resource_version(), Some(5));
        assert_eq!(u.take(10).len(), 10);
        assert_eq!(u.build_us_per_update(), None);
    }
}
