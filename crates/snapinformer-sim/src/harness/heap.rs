//! Heap and resident-set measurement: the bytes allocated and not yet freed (as requested: the
//! allocator's rounding to its size classes is not in them), `/proc` figures, and a sampler
//! thread that records both through a whole run.

use std::{
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

/// Heap counters (the simulator's global allocator, counted by `snapinformer_arena::Metered`).
pub trait HeapMeter: Send + Sync {
    /// Bytes allocated now.
    fn current(&self) -> u64;
    /// Largest `current` since the process started.
    fn peak(&self) -> u64;
}

/// A meter that reads zero (tests that do not measure memory).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHeap;

impl HeapMeter for NoHeap {
    fn current(&self) -> u64 {
        0
    }
    fn peak(&self) -> u64 {
        0
    }
}

/// A meter whose allocator peak belongs to memory allocated before the run (what [`prefault`]
/// touched and freed): it reads the current heap only, so a [`MemorySampler`]'s peak is its
/// largest sample (every 100 ms in `seed`), not the allocator's exact peak.
#[derive(Clone, Copy)]
pub struct CurrentOnly(pub &'static dyn HeapMeter);

impl HeapMeter for CurrentOnly {
    fn current(&self) -> u64 {
        self.0.current()
    }
    fn peak(&self) -> u64 {
        0
    }
}

/// The environment variable, and its value, that stops mimalloc from ever returning freed
/// memory to the system: what makes a [`prefault`] last. It must be set when the process starts
/// (mimalloc reads its options then), so the parent sets it on the worker it starts.
pub const KEEP_FREED_MEMORY_ENV: (&str, &str) = ("MIMALLOC_PURGE_DELAY", "-1");

/// Touches `bytes` of heap through the global allocator in 256 KiB blocks, then frees it all,
/// so that the heap a run then grows comes from memory the process already holds and the system
/// has already backed. A control for machines where first touches are dear (see
/// `harness::worker::DEFAULT_REST`): it takes the cost of growing the heap out of every row
/// alike. Only mimalloc keeps what was freed, and only with [`KEEP_FREED_MEMORY_ENV`] set from
/// the start: otherwise this returns an error and touches nothing. Returns the time it took.
pub fn prefault(bytes: u64, allocator: &str) -> Result<Duration, String> {
    let (name, value) = KEEP_FREED_MEMORY_ENV;
    if allocator != "mimalloc" {
        return Err(format!(
            "prefaulting needs mimalloc, which keeps freed memory; this build runs on {allocator}"
        ));
    }
    if std::env::var(name).as_deref() != Ok(value) {
        return Err(format!(
            "prefaulting needs {name}={value} from the process's start, or mimalloc returns the \
             touched memory to the system a second after it is freed"
        ));
    }
    // Blocks small enough for mimalloc's arena pages (objects up to 512 KiB): freed, their pages
    // go back to the arena, where pages of any size class are carved from them again. Blocks
    // of 64 MiB were measured to leave about half the row's heap on fresh memory.
    const BLOCK: u64 = 256 << 10;
    let started = Instant::now();
    let mut blocks: Vec<Vec<u8>> = Vec::with_capacity(bytes.div_ceil(BLOCK) as usize);
    let mut left = bytes;
    while left > 0 {
        let n = left.min(BLOCK) as usize;
        let mut block = Vec::with_capacity(n);
        // Written, not allocated zeroed: an allocator may hand out fresh zeroed memory for a
        // zeroed request without touching it.
        block.resize(n, 1u8);
        blocks.push(std::hint::black_box(block));
        left -= n as u64;
    }
    drop(blocks);
    Ok(started.elapsed())
}

/// Resident set size of this process now (`/proc/self/statm`; 0 where it cannot be read).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// The largest resident set size this process has had (`VmHWM` in `/proc/self/status`; 0 where
/// it cannot be read).
pub fn rss_high_water_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Waits (at most 10 s) until the heap stops shrinking, so that versions a background reclaimer
/// has not dropped yet are not counted; returns the heap then. A short wait for caches that free
/// inline.
pub fn settled(heap: &dyn HeapMeter) -> u64 {
    until_it_stops_shrinking(heap, Duration::from_millis(20), Duration::from_secs(10), |now| {
        now / 1000
    })
    .0
}

/// Waits until the heap has stopped shrinking, for timing: polls every 10 ms and returns the
/// instant of the first poll after which less than 1 MiB was freed (the freeing ended within
/// the 10 ms before it, so a rate counted up to it is low by at most that). Gives up after 30 s.
///
/// Stricter than [`settled`], whose 0.1% of a heap of several GiB is more than a reclaimer
/// frees in some intervals.
pub fn freed_at(heap: &dyn HeapMeter) -> Instant {
    until_it_stops_shrinking(heap, Duration::from_millis(10), Duration::from_secs(30), |_| 1 << 20)
        .1
}

/// Polls `heap` every `poll` until an interval freed less than `least(heap now)` bytes, or
/// `give_up` has passed; returns the heap and the instant of that last poll.
fn until_it_stops_shrinking(
    heap: &dyn HeapMeter,
    poll: Duration,
    give_up: Duration,
    least: impl Fn(u64) -> u64,
) -> (u64, Instant) {
    let deadline = Instant::now() + give_up;
    let mut last = heap.current();
    loop {
        thread::sleep(poll);
        let (now, at) = (heap.current(), Instant::now());
        if now + least(now) >= last || at > deadline {
            return (now, at);
        }
        last = now;
    }
}

/// Memory through a whole run: peaks and a sampled series.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MemoryTrace {
    /// Milliseconds between samples.
    pub period_ms: u64,
    /// The largest heap the allocator counted (exact, not sampled), bytes.
    pub heap_peak_bytes: u64,
    /// The largest resident set: the kernel's high-water mark, or the largest sample, bytes.
    pub rss_peak_bytes: u64,
    /// `(seconds since the sampler started, heap bytes, RSS bytes)`.
    pub series: Vec<(f64, u64, u64)>,
}

/// A thread that samples heap and RSS every `period` until [`MemorySampler::finish`].
pub struct MemorySampler {
    stop: mpsc::Sender<()>,
    handle: thread::JoinHandle<Vec<(f64, u64, u64)>>,
    heap: &'static dyn HeapMeter,
    period: Duration,
}

impl MemorySampler {
    /// Starts sampling `heap` and the RSS every `period`.
    pub fn start(heap: &'static dyn HeapMeter, period: Duration) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let handle = thread::Builder::new()
            .name("memory-sampler".into())
            .spawn(move || {
                let started = Instant::now();
                let mut series = Vec::new();
                loop {
                    series.push((started.elapsed().as_secs_f64(), heap.current(), rss_bytes()));
                    match stopped.recv_timeout(period) {
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
                series
            })
            .expect("spawn the memory sampler");
        MemorySampler { stop, handle, heap, period }
    }

    /// Stops sampling and returns the trace.
    pub fn finish(self) -> MemoryTrace {
        let _ = self.stop.send(());
        let series = self.handle.join().expect("memory sampler panicked");
        let sampled_rss = series.iter().map(|s| s.2).max().unwrap_or(0);
        let sampled_heap = series.iter().map(|s| s.1).max().unwrap_or(0);
        MemoryTrace {
            period_ms: self.period.as_millis() as u64,
            heap_peak_bytes: self.heap.peak().max(sampled_heap),
            rss_peak_bytes: rss_high_water_bytes().max(sampled_rss),
            series,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;

    impl HeapMeter for Fixed {
        fn current(&self) -> u64 {
            7
        }
        fn peak(&self) -> u64 {
            9
        }
    }

    static FIXED: Fixed = Fixed;

    #[test]
    fn prefault_refuses_an_allocator_or_a_process_that_would_not_keep_the_memory() {
        let err = prefault(1 << 20, "system").expect_err("glibc returns large blocks at once");
        assert!(err.contains("needs mimalloc"), "{err}");
        let (name, value) = KEEP_FREED_MEMORY_ENV;
        if std::env::var(name).as_deref() != Ok(value) {
            let err = prefault(1 << 20, "mimalloc").expect_err("purging would undo it");
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn a_current_only_meter_leaves_the_peak_to_the_samples() {
        let trace = MemorySampler::start(&CURRENT_ONLY, Duration::from_secs(3600)).finish();
        assert_eq!(trace.heap_peak_bytes, 7, "the largest sample, not the allocator's 9");
    }

    static CURRENT_ONLY: CurrentOnly = CurrentOnly(&FIXED);

    #[test]
    fn the_sampler_records_from_its_start_and_reports_the_allocators_exact_peak() {
        let trace = MemorySampler::start(&FIXED, Duration::from_secs(3600)).finish();
        assert_eq!(trace.series.len(), 1, "one sample at the start, none while waiting");
        assert_eq!(trace.series[0].1, 7);
        assert_eq!(trace.heap_peak_bytes, 9, "the allocator's peak, not the largest sample");
        assert_eq!(trace.period_ms, 3_600_000);
        assert!(trace.rss_peak_bytes >= trace.series[0].2);
        assert!(trace.rss_peak_bytes > 0, "this process has a resident set");
    }
}
