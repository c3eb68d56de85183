//! Headroom: the open loop at a series of offered rates, and the highest rate each row sustains.
//!
//! A rate is **sustainable** when, over a point of the sweep, the queue stayed bounded and
//! fresh: at the scheduled end of the point at most one batch ([`MAX_BATCH`] updates) was still
//! waiting, and staleness p99 stayed under one second. A row's **highest sustainable rate** is
//! the highest offered rate of the sweep at which that row, and every lower rate of the sweep,
//! was sustainable: a row that falls behind at some rate and keeps up again at a higher one (a
//! noisy point) is credited only up to the first rate it did not sustain.
//!
//! Each point generates its own `rate * duration` updates before it starts (not measured) and
//! frees them after, so the heap holds one point's updates at a time. Point `i` (from 0) draws
//! its updates with seed `100 + i`, resource versions continuing from the previous phase; the
//! Go worker does the same.

use std::sync::Arc;

use super::{InProcessRow, MAX_BATCH, RowDriver, readers::Readers};
use crate::{
    harness::{
        PhaseLog,
        heap::{HeapMeter, settled},
        placement::WriterPriority,
        stats::Summary,
    },
    pods::{Shape, WorkloadDigest},
    rows::CacheReader,
};

/// Staleness p99 at or above this is not sustainable, microseconds.
pub const MAX_P99_US: u64 = 1_000_000;

/// One offered rate of the sweep, as measured.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SweepPoint {
    /// Offered updates per second.
    pub rate: u64,
    /// Updates offered.
    pub updates: u64,
    /// Seconds from the first arrival until the last update was visible.
    pub elapsed_s: f64,
    /// Scheduled arrival to visibility, microseconds.
    pub staleness_us: Summary,
    /// Largest backlog.
    pub queue_depth_max: u64,
    /// Backlog at the scheduled end of the point.
    pub queue_depth_end: u64,
    /// Reader operations per second during the point.
    pub reader_ops_per_s: f64,
}

impl SweepPoint {
    /// Whether the row kept up at this rate (see the module docs).
    pub fn sustainable(&self) -> bool {
        self.queue_depth_end <= MAX_BATCH as u64 && self.staleness_us.p99 < MAX_P99_US
    }

    /// Whether `readers` reader threads completed fewer operations over the point than there
    /// are readers: most of them read nothing while it ran (a reader that waited long sleeps
    /// nine times as long), so the point measured the row with little read contention.
    pub fn readers_idle(&self, readers: usize) -> bool {
        readers > 0 && self.reader_ops_per_s * self.elapsed_s < readers as f64
    }
}

/// The highest offered rate sustained at it and at every lower rate of `points` (see the module
/// docs); `None` if the lowest rate was not sustained or there is no point.
pub fn highest_sustainable_rate(points: &[SweepPoint]) -> Option<u64> {
    let mut sorted: Vec<&SweepPoint> = points.iter().collect();
    sorted.sort_by_key(|p| p.rate);
    sorted.iter().take_while(|p| p.sustainable()).last().map(|p| p.rate)
}

/// The load of every point of a sweep.
pub struct Load<'a> {
    /// The row (its updates are generated in the form it holds pods).
    pub row: InProcessRow,
    /// The population.
    pub shape: &'a Shape,
    /// Reader threads.
    pub readers: usize,
    /// Seconds per point.
    pub duration_s: f64,
    /// Where the readers are pinned, if anywhere.
    pub reader_core: Option<core_affinity::CoreId>,
    /// How long the readers run, unrecorded, before the point starts.
    pub reader_warmup: std::time::Duration,
    /// How the readers space their operations.
    pub reader_pacing: super::readers::Pacing,
    /// How the writer is scheduled during the point.
    pub writer_priority: WriterPriority,
    /// Seed of the point's updates.
    pub seed: u64,
    /// The heap, to wait until it stops shrinking before the point starts.
    pub heap: &'a dyn HeapMeter,
    /// How the point gets its updates.
    pub updates: super::OpenLoopUpdates,
}

/// Runs one point of the sweep at `rate`, with resource versions from `first_rv`; adds its
/// updates to `digest` as phase `sweep-<rate>`.
pub fn point(
    row: &mut dyn RowDriver,
    reader: &Arc<dyn CacheReader>,
    load: &Load<'_>,
    rate: u64,
    first_rv: u64,
    digest: &mut WorkloadDigest,
    log: PhaseLog<'_>,
) -> Result<SweepPoint, String> {
    let count = ((rate as f64 * load.duration_s) as usize).max(1);
    log(&format!("sweep {rate}/s: preparing {count} updates"));
    let pool = super::open_loop_updates(
        load.row,
        load.shape,
        count,
        first_rv,
        load.seed,
        load.updates,
        load.heap,
    );
    pool.add_to_digest(digest, &format!("sweep-{rate}"));
    log(&format!("sweep {rate}/s for {:.0}s with {} readers", load.duration_s, load.readers));
    settled(load.heap);
    let readers = Readers::start(
        reader.clone(),
        load.readers,
        load.shape,
        load.reader_core,
        load.reader_warmup,
        load.reader_pacing,
    );
    load.writer_priority.enter();
    let ol = row.open_loop(pool, rate);
    load.writer_priority.leave();
    let rl = readers.stop();
    let ol = ol?;
    Ok(SweepPoint {
        rate,
        updates: count as u64,
        elapsed_s: ol.elapsed_s,
        staleness_us: ol.staleness.summary(),
        queue_depth_max: ol.depth_max,
        queue_depth_end: ol.depth_end,
        reader_ops_per_s: rl.ops as f64 / ol.elapsed_s.max(1e-9),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(rate: u64, end: u64, p99: u64) -> SweepPoint {
        SweepPoint {
            rate,
            queue_depth_end: end,
            staleness_us: Summary { p99, ..Summary::default() },
            ..SweepPoint::default()
        }
    }

    #[test]
    fn a_rate_is_sustainable_with_at_most_one_batch_left_and_p99_under_a_second() {
        assert!(point(5000, 1000, 999_999).sustainable());
        assert!(!point(5000, 1001, 10).sustainable());
        assert!(!point(5000, 0, 1_000_000).sustainable());
    }

    #[test]
    fn a_point_whose_readers_made_fewer_operations_than_there_are_readers_is_marked_idle() {
        let p = |ops_per_s: f64| SweepPoint {
            elapsed_s: 20.0,
            reader_ops_per_s: ops_per_s,
            ..SweepPoint::default()
        };
        assert!(p(0.0).readers_idle(10));
        assert!(p(0.45).readers_idle(10), "9 operations among 10 readers");
        assert!(!p(0.5).readers_idle(10), "10 operations among 10 readers");
        assert!(!p(0.0).readers_idle(0), "no readers, nothing to be idle");
    }

    #[test]
    fn the_highest_sustainable_rate_stops_at_the_first_rate_not_sustained() {
        let points = [
            point(40_000, 0, 100),
            point(5000, 0, 100),
            point(20_000, 50_000, 3_000_000),
            point(10_000, 10, 900),
        ];
        assert_eq!(highest_sustainable_rate(&points), Some(10_000));
        assert_eq!(highest_sustainable_rate(&points[..2]), Some(40_000));
        assert_eq!(highest_sustainable_rate(&[point(5000, 5000, 1)]), None);
        assert_eq!(highest_sustainable_rate(&[]), None);
    }
}
