//! What the scheduler did to one thread: CPU time, time spent runnable but waiting for a core,
//! and context switches (`/proc/thread-self/schedstat` and `status`, Linux).
//!
//! A latency figure alone cannot tell a slow cache from a busy machine. The time a thread spent
//! waiting on a run queue can: it is the part of its wall time during which it wanted a core and
//! another thread (of this process or another) had it.
//!
//! For a whole pipeline (an informer's threads, or a Go process's goroutines and garbage
//! collector), [`process_cpu`] gives the CPU time of every thread of the process and
//! [`ThreadsCpu`] splits it by thread name: the work a phase cost, whatever the machine's other
//! load did to its wall time.

use std::{collections::BTreeMap, time::Duration};

/// Clock ticks per second of the times in `/proc/<pid>/stat` (`USER_HZ`, 100 on every Linux
/// architecture the simulator runs on).
const USER_HZ: u64 = 100;

/// CPU time (user and system) of the whole process, every thread it has or had, from
/// `/proc/self/stat`; `None` without `/proc`. Its resolution is the kernel's clock tick (10 ms).
pub fn process_cpu() -> Option<Duration> {
    ProcessUsage::now().map(|u| u.cpu())
}

/// User plus system time from a `/proc/<pid>/stat` line.
#[cfg(test)]
fn parse_stat_cpu(stat: &str) -> Option<Duration> {
    parse_stat_usage(stat).map(|u| u.cpu())
}

/// User and system time, in clock ticks (`USER_HZ`, 10 ms), from a `/proc/<pid>/stat` or
/// `/proc/thread-self/stat` line. The command name (field 2) may hold spaces and parentheses,
/// so fields are counted from its closing parenthesis.
pub fn stat_ticks(stat: &str) -> Option<(u64, u64)> {
    parse_stat_usage(stat).map(|u| (u.user_ticks, u.system_ticks))
}

/// The whole process's CPU time split into user and kernel (system) time, and its minor and
/// major page faults, at one moment (`/proc/self/stat`). The kernel's share shows what the
/// machine charges for memory: on a virtual machine whose host takes freed memory back, a first
/// touch of fresh memory (zeroing the page, and the host's own fault) can cost a large part of
/// a run's CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessUsage {
    /// User time, clock ticks (10 ms).
    pub user_ticks: u64,
    /// Kernel time, clock ticks (10 ms).
    pub system_ticks: u64,
    /// Page faults served without I/O (a transparent huge page counts once).
    pub minor_faults: u64,
    /// Page faults that waited for I/O: a page of the executable, a library or a mapped file
    /// read back from disk, e.g. after the page cache was dropped.
    pub major_faults: u64,
}

impl ProcessUsage {
    /// The process's counters now; `None` without `/proc`.
    pub fn now() -> Option<ProcessUsage> {
        parse_stat_usage(&std::fs::read_to_string("/proc/self/stat").ok()?)
    }

    /// User plus kernel time.
    pub fn cpu(&self) -> Duration {
        Duration::from_millis((self.user_ticks + self.system_ticks) * 1000 / USER_HZ)
    }

    /// Kernel time used since `earlier`.
    pub fn system_since(&self, earlier: &ProcessUsage) -> Duration {
        Duration::from_millis(
            self.system_ticks.saturating_sub(earlier.system_ticks) * 1000 / USER_HZ,
        )
    }

    /// Minor page faults since `earlier`.
    pub fn minor_faults_since(&self, earlier: &ProcessUsage) -> u64 {
        self.minor_faults.saturating_sub(earlier.minor_faults)
    }

    /// Major page faults since `earlier`.
    pub fn major_faults_since(&self, earlier: &ProcessUsage) -> u64 {
        self.major_faults.saturating_sub(earlier.major_faults)
    }
}

/// [`ProcessUsage`] from a `/proc/<pid>/stat` line.
fn parse_stat_usage(stat: &str) -> Option<ProcessUsage> {
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state (field 3) is index 0, minflt (field 10) index 7, majflt (field 12)
    // index 9, utime (field 14) index 11, stime index 12.
    let mut fields = rest.split_whitespace().skip(7);
    let minor_faults = fields.next()?.parse().ok()?;
    let major_faults = fields.nth(1)?.parse().ok()?;
    let mut ticks = fields.skip(1);
    let user_ticks = ticks.next()?.parse().ok()?;
    let system_ticks = ticks.next()?.parse().ok()?;
    Some(ProcessUsage { user_ticks, system_ticks, minor_faults, major_faults })
}

/// One reading of [`ProcessUsage`] taken on a thread of its own a set time after
/// [`UsageAfter::start`], so that a phase's first seconds can be told from the rest of it
/// without the phase's own threads stopping to look.
#[derive(Debug)]
pub struct UsageAfter {
    stop: std::sync::mpsc::Sender<()>,
    handle: std::thread::JoinHandle<Option<ProcessUsage>>,
}

impl UsageAfter {
    /// Reads the process's usage `delay` from now, unless [`UsageAfter::finish`] comes first.
    pub fn start(delay: Duration) -> std::io::Result<UsageAfter> {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let handle =
            std::thread::Builder::new().name("usage-after".into()).spawn(move || match stopped
                .recv_timeout(delay)
            {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => ProcessUsage::now(),
                _ => None,
            })?;
        Ok(UsageAfter { stop, handle })
    }

    /// The reading, or `None` when the phase ended before the delay was up (or `/proc` could
    /// not be read).
    pub fn finish(self) -> Option<ProcessUsage> {
        // A send fails only when the thread has already read and returned.
        let _ = self.stop.send(());
        self.handle.join().ok().flatten()
    }
}

/// CPU time and run-queue wait of each live thread of the process at one moment
/// (`/proc/self/task/*/schedstat`, nanoseconds), with its name.
#[derive(Debug, Clone, Default)]
pub struct ThreadsCpu {
    by_tid: BTreeMap<u32, (String, u64, u64)>,
}

/// What one group of threads used over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupTime {
    /// CPU time.
    pub cpu: Duration,
    /// Time runnable but waiting for a core.
    pub wait: Duration,
}

impl ThreadsCpu {
    /// Every live thread's counter now; `None` without `/proc`.
    pub fn now() -> Option<ThreadsCpu> {
        let mut by_tid = BTreeMap::new();
        for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
                continue;
            };
            // A thread may exit between listing and reading: skip it.
            let (Ok(comm), Ok(schedstat)) = (
                std::fs::read_to_string(entry.path().join("comm")),
                std::fs::read_to_string(entry.path().join("schedstat")),
            ) else {
                continue;
            };
            let mut fields = schedstat.split_whitespace().map(|v| v.parse::<u64>().ok());
            let (Some(Some(cpu_ns)), Some(Some(wait_ns))) = (fields.next(), fields.next()) else {
                continue;
            };
            by_tid.insert(tid, (comm.trim().to_string(), cpu_ns, wait_ns));
        }
        Some(ThreadsCpu { by_tid })
    }

    /// CPU time used since `earlier`, summed by thread group: a thread's name without a
    /// trailing number (`reader-3` counts as `reader`). A thread started since `earlier`
    /// counts whole; one that exited since is missing (the process total has it).
    pub fn since(&self, earlier: &ThreadsCpu) -> BTreeMap<String, Duration> {
        self.times_since(earlier).into_iter().map(|(group, t)| (group, t.cpu)).collect()
    }

    /// CPU time and run-queue wait since `earlier`, summed by thread group as in
    /// [`ThreadsCpu::since`].
    pub fn times_since(&self, earlier: &ThreadsCpu) -> BTreeMap<String, GroupTime> {
        let mut out: BTreeMap<String, GroupTime> = BTreeMap::new();
        for (tid, (name, cpu, wait)) in &self.by_tid {
            let (cpu0, wait0) = earlier.by_tid.get(tid).map_or((0, 0), |(_, c, w)| (*c, *w));
            let t = out.entry(thread_group(name)).or_default();
            t.cpu += Duration::from_nanos(cpu.saturating_sub(cpu0));
            t.wait += Duration::from_nanos(wait.saturating_sub(wait0));
        }
        out
    }
}

/// A thread's name without a trailing number and separator: `reader-3` -> `reader`.
fn thread_group(name: &str) -> String {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let trimmed = trimmed.trim_end_matches(['-', '_', '#']);
    if trimmed.is_empty() { name } else { trimmed }.to_string()
}

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
        // Spin until the thread has run 25 ms by its own account. Wall time is no yardstick
        // here: on a VM the host can take the vCPU away (steal time), which the thread's
        // schedstat counts neither as running nor as waiting (once 24.8 of 30 ms wall in CI).
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let used = loop {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let used = ThreadSched::now().expect("read once, readable again").since(&before);
            if used.cpu() >= Duration::from_millis(25) || start.elapsed() > Duration::from_secs(10)
            {
                break used;
            }
        };
        let wall = start.elapsed();
        assert!(
            used.cpu() >= Duration::from_millis(25),
            "under 25 ms of CPU in {wall:?}: {used:?}"
        );
        // It cannot have run, or waited for a core, longer than it existed (give or take the
        // scheduler tick at which the kernel brings its counts up to date).
        assert!(used.cpu() + used.wait() <= wall + Duration::from_millis(10), "{wall:?}: {used:?}");
    }

    #[test]
    fn process_cpu_is_read_past_a_command_name_with_spaces_and_parentheses() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let line = "4242 (sim (x) y) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 12 0";
        assert_eq!(parse_stat_cpu(line), Some(Duration::from_secs(3)));
        assert_eq!(parse_stat_cpu("4242 (truncated"), None);
        assert_eq!(parse_stat_cpu("4242 (x) R 1 2"), None);
    }

    #[test]
    fn process_usage_splits_user_and_kernel_time_and_counts_minor_and_major_faults() {
        let line = "4242 (sim (x) y) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 12 0";
        let usage = parse_stat_usage(line).expect("a full line");
        let expected =
            ProcessUsage { user_ticks: 250, system_ticks: 50, minor_faults: 7, major_faults: 9 };
        assert_eq!(usage, expected);
        let later = ProcessUsage {
            user_ticks: 300,
            system_ticks: 170,
            minor_faults: 1007,
            major_faults: 12,
        };
        assert_eq!(later.system_since(&usage), Duration::from_millis(1200));
        assert_eq!(later.minor_faults_since(&usage), 1000);
        assert_eq!(later.major_faults_since(&usage), 3);
        assert_eq!(parse_stat_usage("4242 (x) R 1 2 3 4 5 6 7"), None);
    }

    #[test]
    fn usage_after_reads_once_its_delay_is_up_and_not_when_finished_before() {
        if ProcessUsage::now().is_none() {
            return;
        }
        let early = UsageAfter::start(Duration::from_secs(3600)).expect("spawn");
        assert_eq!(early.finish(), None, "finished an hour early: no reading");
        let late = UsageAfter::start(Duration::from_millis(1)).expect("spawn");
        std::thread::sleep(Duration::from_millis(50));
        assert!(late.finish().is_some(), "the delay was up before finish");
    }

    #[test]
    fn touching_fresh_memory_counts_page_faults() {
        let Some(before) = ProcessUsage::now() else { return };
        // 64 MiB touched page by page: at least one fault per 2 MiB even with huge pages.
        let mut block = vec![0u8; 64 << 20];
        for i in (0..block.len()).step_by(4096) {
            block[i] = 1;
        }
        std::hint::black_box(&block);
        let after = ProcessUsage::now().expect("read once, readable again");
        assert!(after.minor_faults_since(&before) >= 32, "{before:?} -> {after:?}");
    }

    /// Spins until the calling thread has used `cpu` of CPU time (not wall time: a busy
    /// machine only delays it).
    fn spin_for_cpu(cpu: Duration) {
        let start = ThreadSched::now().expect("/proc was readable a moment ago");
        let mut x = 0u64;
        while ThreadSched::now().expect("readable").since(&start).cpu() < cpu {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
    }

    #[test]
    fn process_cpu_counts_a_thread_that_has_exited() {
        let (Some(before), Some(_)) = (process_cpu(), ThreadSched::now()) else { return };
        std::thread::spawn(|| spin_for_cpu(Duration::from_millis(80)))
            .join()
            .expect("the busy thread ran");
        let used = process_cpu().expect("readable again").saturating_sub(before);
        // 80 ms of CPU, counted by the kernel in 10 ms ticks.
        assert!(used >= Duration::from_millis(50), "{used:?}");
    }

    #[test]
    fn threads_sharing_one_core_each_wait_for_it() {
        let (Some(before), Some(_)) = (ThreadsCpu::now(), ThreadSched::now()) else { return };
        let Some(core) = core_affinity::get_core_ids().and_then(|ids| ids.first().copied()) else {
            return;
        };
        // Both start spinning once both are pinned.
        let pinned_both = std::sync::Arc::new(std::sync::Barrier::new(2));
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
        let exit_rx = std::sync::Arc::new(std::sync::Mutex::new(exit_rx));
        let spinners: Vec<_> = (0..2)
            .map(|i| {
                let (start, done, exit) = (pinned_both.clone(), done_tx.clone(), exit_rx.clone());
                std::thread::Builder::new()
                    .name(format!("waittest-{i}"))
                    .spawn(move || {
                        let pinned = core_affinity::set_for_current(core);
                        start.wait();
                        if pinned {
                            spin_for_cpu(Duration::from_millis(60));
                        }
                        done.send(()).expect("the test waits");
                        let _ = exit.lock().expect("not poisoned").recv();
                        pinned
                    })
                    .expect("spawn")
            })
            .collect();
        for _ in 0..2 {
            done_rx.recv().expect("a spinner reports");
        }
        let used = ThreadsCpu::now().expect("readable again").times_since(&before);
        drop(exit_tx);
        let pinned = spinners.into_iter().all(|h| h.join().expect("joined"));
        if !pinned {
            return; // this machine does not let threads pin themselves
        }
        let group = used.get("waittest").copied().unwrap_or_default();
        assert!(group.cpu >= Duration::from_millis(100), "{used:?}");
        // Two threads that each need 60 ms of one core: while one runs, the other waits, and
        // the kernel shares the core in slices of a few milliseconds.
        assert!(group.wait >= Duration::from_millis(30), "{used:?}");
    }

    #[test]
    fn threads_cpu_groups_numbered_threads_and_counts_new_ones_whole() {
        let (Some(before), Some(_)) = (ThreadsCpu::now(), ThreadSched::now()) else { return };
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
        let exit_rx = std::sync::Arc::new(std::sync::Mutex::new(exit_rx));
        let spin = |name: &str| {
            let (done, exit) = (done_tx.clone(), exit_rx.clone());
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    spin_for_cpu(Duration::from_millis(20));
                    done.send(()).expect("the test waits");
                    // Stay alive until the counters are read.
                    let _ = exit.lock().expect("not poisoned").recv();
                })
                .expect("spawn")
        };
        let (a, b) = (spin("cputest-1"), spin("cputest-2"));
        for _ in 0..2 {
            done_rx.recv().expect("a spinning thread reports");
        }
        let used = ThreadsCpu::now().expect("readable again").since(&before);
        drop(exit_tx);
        a.join().expect("joined");
        b.join().expect("joined");
        let group = used.get("cputest").copied().unwrap_or_default();
        assert!(group >= Duration::from_millis(40), "{used:?}");
        assert!(!used.contains_key("cputest-1"), "{used:?}");
        assert_eq!(thread_group("reader-12"), "reader");
        assert_eq!(thread_group("informer-rt"), "informer-rt");
        assert_eq!(thread_group("42"), "42");
    }
}
