//! What the scheduler did to one thread: CPU time, time spent runnable but waiting for a core,
//! and context switches (`/proc/thread-self/schedstat` and `status`, Linux).
//!
//! A latency figure alone cannot tell a slow cache from a busy machine. The time a thread spent
//! waiting on a run queue can: it is the part of its wall time during which it wanted a core and
//! another thread (of this process or another) had it.

use std::time::Duration;

/// Scheduler counters of the calling thread at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadSched {
    /// CPU time used, nanoseconds.
    pub cpu_ns: u64,
    /// Time spent runnable but waiting for a core, nanoseconds.
    pub wait_ns: u64,
    /// Context switches the thread asked for (sleeps, blocking).
    pub voluntary: u64,
    /// Context switches the scheduler imposed (preemptions).
    pub involuntary: u64,
}

impl ThreadSched {
    /// The calling thread's counters now, `None` where `/proc` does not have them.
    pub fn now() -> Option<ThreadSched> {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        let mut it = stat.split_whitespace().map(|v| v.parse::<u64>().ok());
        let (cpu_ns, wait_ns) = (it.next()??, it.next()??);
        let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        Some(ThreadSched {
            cpu_ns,
            wait_ns,
            voluntary: field("voluntary_ctxt_switches:")?,
            involuntary: field("nonvoluntary_ctxt_switches:")?,
        })
    }

    /// The counters accumulated since `earlier`.
    pub fn since(&self, earlier: &ThreadSched) -> ThreadSched {
        ThreadSched {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }

    /// CPU time.
    pub fn cpu(&self) -> Duration {
        Duration::from_nanos(self.cpu_ns)
    }

    /// Time runnable but waiting for a core.
    pub fn wait(&self) -> Duration {
        Duration::from_nanos(self.wait_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_accumulates_cpu_time() {
        let Some(before) = ThreadSched::now() else { return };
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let used = ThreadSched::now().expect("read once, readable again").since(&before);
        // 30 ms of wall time, of which the thread ran or waited for a core.
        assert!(used.cpu() + used.wait() >= Duration::from_millis(25), "{used:?}");
        assert!(used.cpu() > Duration::ZERO);
    }
}
