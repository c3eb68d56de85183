//! How fast the machine was just before a row ran: the same fixed work, timed in the parent
//! process, so that runs from different hours can be told apart before they are pooled.
//!
//! # Why
//!
//! This machine's speed changes by the hour: on 2026-12-07 building one update at its slot took
//! 19.1 µs in an afternoon set and 24.7 µs in the evening set, the same code, and our rows'
//! staleness tail grew 3.5-4.4x between the two (BENCHMARKS.md, "Page faults at the loop's
//! start"). A row's own build time is not a neutral gauge: it runs beside the row's other
//! threads, and with mimalloc the thread that allocates also collects what other threads freed,
//! so a row that frees more makes its own source slower. This probe runs in the parent while no
//! worker runs, after the rest before the row, and does the same work every time.
//!
//! # What it measures
//!
//! - [`MachineSpeed::pod_build_ns`]: building one realistic pod with the generator every row
//!   uses (`pods::make_pod`) and dropping it, on one thread with a warm cache: the cores' speed
//!   and the allocator's fast path.
//! - [`MachineSpeed::memory_load_ns`]: one load that misses every cache (a random cycle through
//!   a buffer four times the last-level cache, each load's address taken from the one before):
//!   the memory's latency as this guest sees it.
//!
//! Each is the median of [`CHUNKS`] timed chunks. The cycle is built at the first probe and kept
//! for the process's life (128 MiB), so that every later probe follows the same one through
//! pages already in place. A probe then builds 5,000 pods and makes 2.4 million loads: at the
//! figures measured on the project machine (5-10 µs a pod, 150-175 ns a load) about 0.4 s.
//! [`measure_small`] (for `--quick` runs and the tests, whose builds are unoptimized) uses a
//! 4 MiB cycle, which the last-level cache holds: its load time is a cache's, not memory's;
//! [`MachineSpeed::cycle_mib`] says which.
//!
//! # What it is worth
//!
//! Measured on 2026-12-07 (six runs, three rows; BENCHMARKS.md, "A speed reference for the
//! machine"): neither figure followed how fast the rows then ran (rank correlation with the
//! rows' own build time in their loops 0.22 and 0.19), and the pod build was bimodal (4.6-4.9 or
//! 7.3-9.8 µs). It is a record of the moment before each row, not a gauge of the row's hour;
//! nothing leans on it.

use std::{sync::OnceLock, time::Instant};

use crate::pods::{self, PodProfile, Rng, Shape};

/// Timed chunks per figure; the figure is their median.
pub const CHUNKS: usize = 5;
/// Pods built and dropped per chunk.
const PODS_PER_CHUNK: usize = 1_000;
/// The random cycle's size: 128 MiB of `u32` indices, four times this machine's 32 MiB L3.
const CYCLE_ENTRIES: usize = 32 << 20;
/// Loads per chunk.
const LOADS_PER_CHUNK: usize = 400_000;

/// The probe's two figures (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MachineSpeed {
    /// Building one realistic pod and dropping it, one thread, warm cache, nanoseconds (median
    /// of the chunks).
    pub pod_build_ns: f64,
    /// One dependent load from memory, nanoseconds (median of the chunks).
    pub memory_load_ns: f64,
    /// The size of the buffer the loads went through, MiB (128 for [`measure`], 4 for
    /// [`measure_small`]).
    #[serde(default)]
    pub cycle_mib: u64,
}

/// The probe a run uses: [`measure_small`] for a `--quick` run, [`measure`] otherwise.
pub fn measure_for(quick: bool) -> MachineSpeed {
    if quick { measure_small() } else { measure() }
}

/// Runs the probe on the calling thread.
pub fn measure() -> MachineSpeed {
    static CYCLE: OnceLock<Vec<u32>> = OnceLock::new();
    measure_with(PODS_PER_CHUNK, CYCLE.get_or_init(|| random_cycle(CYCLE_ENTRIES)), LOADS_PER_CHUNK)
}

/// A smaller probe, for `--quick` runs: a tenth of the pods and a 4 MiB cycle, which the cache
/// holds.
pub fn measure_small() -> MachineSpeed {
    static CYCLE: OnceLock<Vec<u32>> = OnceLock::new();
    measure_with(
        PODS_PER_CHUNK / 10,
        CYCLE.get_or_init(|| random_cycle(1 << 20)),
        LOADS_PER_CHUNK / 4,
    )
}

fn measure_with(pods_per_chunk: usize, cycle: &[u32], loads: usize) -> MachineSpeed {
    let shape = Shape::for_objects(1_000, 100).with_profile(PodProfile::Realistic);
    // One pod built first, so the allocator's pages for its sizes exist before the timing.
    drop(std::hint::black_box(pods::make_pod(&shape, 0, 1, 0)));
    let pod_build_ns = median_of(|| {
        let began = Instant::now();
        for i in 0..pods_per_chunk {
            let pod = pods::make_pod(&shape, i % 1_000, i as u64 + 2, i % 100);
            drop(std::hint::black_box(pod));
        }
        began.elapsed().as_nanos() as f64 / pods_per_chunk as f64
    });
    let mut at = 0u32;
    // Once around the first chunk's length, untimed, to take the buffer's pages out of the timing.
    for _ in 0..loads {
        at = cycle[at as usize];
    }
    let memory_load_ns = median_of(|| {
        let began = Instant::now();
        for _ in 0..loads {
            at = cycle[at as usize];
        }
        std::hint::black_box(at);
        began.elapsed().as_nanos() as f64 / loads as f64
    });
    MachineSpeed {
        pod_build_ns,
        memory_load_ns,
        cycle_mib: (std::mem::size_of_val(cycle) >> 20) as u64,
    }
}

/// A single cycle through `0..n` in random order (Sattolo's shuffle): following it from any
/// index visits every index once before coming back.
fn random_cycle(n: usize) -> Vec<u32> {
    assert!(n >= 2 && n <= u32::MAX as usize, "a cycle of {n} entries");
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = Rng::new(0x5eed_cafe);
    for i in (1..n).rev() {
        let j = rng.below(i);
        order.swap(i, j);
    }
    // `order` is a random cyclic permutation as a sequence; link each entry to the next.
    let mut next = vec![0u32; n];
    for w in 0..n {
        next[order[w] as usize] = order[(w + 1) % n];
    }
    next
}

fn median_of(mut chunk: impl FnMut() -> f64) -> f64 {
    let mut times: Vec<f64> = (0..CHUNKS).map(|_| chunk()).collect();
    times.sort_by(f64::total_cmp);
    times[CHUNKS / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_cycle_visits_every_index_once_before_returning() {
        for n in [2, 3, 10, 1_000] {
            let next = random_cycle(n);
            let mut seen = vec![false; n];
            let mut at = 0usize;
            for _ in 0..n {
                assert!(!seen[at], "index {at} visited twice in a cycle of {n}");
                seen[at] = true;
                at = next[at] as usize;
            }
            assert_eq!(at, 0, "the cycle of {n} returns to its start after {n} steps");
        }
    }

    #[test]
    fn the_probe_reports_positive_finite_times() {
        let speed = measure_with(20, &random_cycle(1 << 16), 10_000);
        for (what, v) in [("pod build", speed.pod_build_ns), ("memory load", speed.memory_load_ns)]
        {
            assert!(v.is_finite() && v > 0.0, "{what}: {v} ns");
        }
        // Building a realistic pod allocates about 160 blocks: it cannot take less than a load.
        assert!(speed.pod_build_ns > speed.memory_load_ns, "{speed:?}");
    }
}
