//! The open loop: updates arrive on a fixed schedule whatever the writer does.

use std::{
    thread,
    time::{Duration, Instant},
};

use super::MAX_BATCH;
use crate::{
    harness::{
        sched::{GroupTime, ThreadSched},
        stats::{Latency, Summary},
    },
    rows::CacheWriter,
};

use super::Updates;

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
    /// Where the writer's time went.
    pub writer: WriterTime,
    /// The informer rows: staleness split at the pipeline's inner points.
    pub stages: Option<PipelineStages>,
    /// Threads of the phase that exited before it ended (the informer rows' feeder), with what
    /// they used: a snapshot of the process's threads after the phase misses them.
    pub exited_threads: Vec<(String, GroupTime)>,
    /// Wall time of building one update at its slot, microseconds (`None` for a pool).
    pub build_us_per_update: Option<f64>,
}

/// An informer row's open-loop staleness split at the pipeline's inner points: scheduled slot
/// to queued (the source's hop), queued to published (queue wait, then the batch's apply and
/// publication) and published to the handler (distribution). The three need not add up
/// percentile by percentile; each is its own distribution over the phase's updates.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PipelineStages {
    /// Scheduled slot to the feeder's send into the watch channel: how late the source's own
    /// thread ran (part of `arrival_us`), microseconds.
    #[serde(default)]
    pub sent_us: Summary,
    /// Scheduled slot to the queue's `update`: the feeder thread, the watch channel and the
    /// reflector task, microseconds.
    pub arrival_us: Summary,
    /// Queued to published: waiting in the queue, then the apply and publication of the batch
    /// that carried the update, microseconds.
    pub queued_us: Summary,
    /// Published to the handler's `on_update` on its own thread, microseconds.
    pub delivery_us: Summary,
    /// Publications that carried the phase's updates.
    pub batches: u64,
    /// The batch window the row's informer was built with, microseconds (0: none).
    #[serde(default)]
    pub batch_window_us: u64,
    /// Windows the processing loop waited out during the phase (the informer's
    /// `batch_window_waits` counter): it waits only when updates arrived while a batch was
    /// applied.
    #[serde(default)]
    pub window_waits: u64,
    /// With `--writer-priority realtime`: what the pipeline's threads (the feeder, the
    /// runtime's, the handler's) got for the phase, e.g. `realtime (3 threads)`; `None` when
    /// they ran at the normal policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_priority: Option<String>,
}

/// Where the open-loop writer's time went: applying, sleeping for the next arrival, or waiting
/// for a core. Separates a slow cache from a busy machine.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WriterTime {
    /// Batches applied.
    pub batches: u64,
    /// Wall time of each batch's apply (taking the batch, applying, publishing), microseconds.
    pub apply_us: Summary,
    /// Total wall time spent applying, seconds.
    pub apply_s: f64,
    /// How late the writer woke after sleeping until the next arrival, microseconds.
    pub wake_late_us: Summary,
    /// Total wall time spent sleeping until the next arrival, seconds.
    #[serde(default)]
    pub sleep_s: f64,
    /// Wall time of the phase, seconds.
    #[serde(default)]
    pub elapsed_s: f64,
    /// CPU time of the writer thread over the phase, seconds (`None` without `/proc`).
    pub cpu_s: Option<f64>,
    /// Time the writer was runnable but waited for a core, seconds.
    pub runqueue_wait_s: Option<f64>,
    /// Preemptions of the writer.
    pub involuntary_switches: Option<u64>,
    /// Staleness of the updates that arrived one second or more after the phase began, when the
    /// readers (which all start with the phase) have settled into their pacing, microseconds.
    #[serde(default)]
    pub staleness_after_1s_us: Summary,
    /// The scheduling the writer ran with (`normal`, `realtime`, or why not `realtime`).
    #[serde(default)]
    pub writer_priority: String,
    /// CPU time of all reader threads together over the phase, seconds.
    #[serde(default)]
    pub readers_cpu_s: Option<f64>,
    /// Time the reader threads were runnable but waited for a core, together, seconds.
    #[serde(default)]
    pub readers_runqueue_wait_s: Option<f64>,
}

/// Applies `updates` as they arrive at `rate` per second. Update `i` arrives at
/// `start + i / rate`, whether or not the writer kept up (open loop); the writer takes what has
/// arrived, up to [`MAX_BATCH`] at a time (building them first, when they are built at their
/// slots: this row's writer is its own source).
pub fn run(store: &mut dyn CacheWriter, mut pool: Updates, rate: u64) -> OpenLoop {
    let total = pool.len();
    let ns_per = 1e9 / rate.max(1) as f64;
    let arrival =
        |start: Instant, i: usize| start + Duration::from_nanos((i as f64 * ns_per) as u64);
    let (mut staleness, mut settled) = (Latency::default(), Latency::default());
    let settle = Duration::from_secs(1);
    let (mut apply_us, mut wake_late_us) = (Latency::default(), Latency::default());
    let (mut batches, mut apply_time, mut slept) = (0u64, Duration::ZERO, Duration::ZERO);
    let (mut depth_max, mut series) = (0u64, Vec::new());
    let mut visible = 0usize;
    let mut last_sample = f64::NEG_INFINITY;
    let sched_start = ThreadSched::now();
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
                let woke = Instant::now();
                wake_late_us.record(woke.saturating_duration_since(next));
                slept += woke - now;
            }
            continue;
        }
        let n = (arrived - visible).min(MAX_BATCH);
        let first = visible;
        let mut recorded = 0;
        let began = Instant::now();
        store.apply_objects(pool.take(n), &mut |done, at| {
            for i in recorded..done {
                let arrived_at = arrival(start, first + i);
                let stale = at.saturating_duration_since(arrived_at);
                staleness.record(stale);
                if arrived_at >= start + settle {
                    settled.record(stale);
                }
            }
            recorded = done;
        });
        let took = began.elapsed();
        apply_us.record(took);
        apply_time += took;
        batches += 1;
        visible += n;
    }
    let elapsed = start.elapsed();
    let sched = sched_start.and_then(|s| Some(ThreadSched::now()?.since(&s)));
    let depth_end = {
        // Whatever had arrived by the scheduled end but was not yet visible then.
        let finished_late = Instant::now().saturating_duration_since(end);
        (finished_late.as_secs_f64() * rate as f64).min(total as f64) as u64
    };
    series.push((elapsed.as_secs_f64(), 0));
    let writer = WriterTime {
        batches,
        apply_us: apply_us.summary(),
        apply_s: apply_time.as_secs_f64(),
        wake_late_us: wake_late_us.summary(),
        sleep_s: slept.as_secs_f64(),
        staleness_after_1s_us: settled.summary(),
        elapsed_s: elapsed.as_secs_f64(),
        cpu_s: sched.map(|s| s.cpu().as_secs_f64()),
        runqueue_wait_s: sched.map(|s| s.wait().as_secs_f64()),
        involuntary_switches: sched.map(|s| s.involuntary),
        ..WriterTime::default()
    };
    OpenLoop {
        staleness,
        depth_max,
        depth_end,
        series,
        elapsed_s: elapsed.as_secs_f64(),
        writer,
        stages: None,
        exited_threads: Vec::new(),
        build_us_per_update: pool.build_us_per_update(),
    }
}
