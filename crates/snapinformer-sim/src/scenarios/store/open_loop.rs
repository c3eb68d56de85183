//! The open loop: updates arrive on a fixed schedule whatever the writer does.

use std::{
    thread,
    time::{Duration, Instant},
};

use super::MAX_BATCH;
use crate::{
    harness::stats::Latency,
    rows::{CacheWriter, Objects},
};

/// What one open-loop phase measured.
pub struct OpenLoop {
    /// Scheduled arrival to visibility, per update.
    pub staleness: Latency,
    /// Largest backlog (arrived, not yet visible).
    pub depth_max: u64,
    /// Backlog at the scheduled end of the phase.
    pub depth_end: u64,
    /// `(seconds since the start, backlog)` samples every 50 ms.
    pub series: Vec<(f64, u64)>,
    /// Seconds until the last update was visible.
    pub elapsed_s: f64,
}

/// Applies `pool` as it arrives at `rate` per second. Update `i` arrives at `start + i / rate`,
/// whether or not the writer kept up (open loop); the writer takes what has arrived, up to
/// [`MAX_BATCH`] at a time.
pub fn run(store: &mut dyn CacheWriter, pool: Objects, rate: u64) -> OpenLoop {
    let total = pool.len();
    let mut pool = pool.into_batches();
    let ns_per = 1e9 / rate.max(1) as f64;
    let arrival =
        |start: Instant, i: usize| start + Duration::from_nanos((i as f64 * ns_per) as u64);
    let mut staleness = Latency::default();
    let (mut depth_max, mut series) = (0u64, Vec::new());
    let mut visible = 0usize;
    let mut last_sample = f64::NEG_INFINITY;
    let start = Instant::now();
    let end = arrival(start, total);
    while visible < total {
        let now = Instant::now();
        let arrived = ((now - start).as_nanos() as f64 / ns_per) as usize;
        let arrived = (arrived + 1).min(total); // update 0 arrives at `start`
        let depth = (arrived - visible) as u64;
        depth_max = depth_max.max(depth);
        let t = (now - start).as_secs_f64();
        if t - last_sample >= 0.05 {
            series.push((t, depth));
            last_sample = t;
        }
        if arrived == visible {
            let next = arrival(start, visible);
            if next > now {
                thread::sleep(next - now);
            }
            continue;
        }
        let n = (arrived - visible).min(MAX_BATCH);
        let first = visible;
        let mut recorded = 0;
        store.apply_objects(pool.take(n), &mut |done, at| {
            for i in recorded..done {
                staleness.record(at.saturating_duration_since(arrival(start, first + i)));
            }
            recorded = done;
        });
        visible += n;
    }
    let elapsed = start.elapsed();
    let depth_end = {
        // Whatever had arrived by the scheduled end but was not yet visible then.
        let finished_late = Instant::now().saturating_duration_since(end);
        (finished_late.as_secs_f64() * rate as f64).min(total as f64) as u64
    };
    series.push((elapsed.as_secs_f64(), 0));
    OpenLoop { staleness, depth_max, depth_end, series, elapsed_s: elapsed.as_secs_f64() }
}
