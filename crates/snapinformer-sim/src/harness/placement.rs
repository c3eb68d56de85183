//! Where the measured threads run.
//!
//! **Unpinned** (the default) is how a controller manager runs: kube-controller-manager's
//! goroutines are scheduled on every core (`GOMAXPROCS` = cores), its garbage collector
//! included, so the cache's writer competes with the readers for the same cores. **Pinned** is
//! the earlier layout, kept as an option: the cache's writer alone on the first core, every
//! reader (or controller) on the last one, so that readers together use at most one core and
//! never the writer's.

/// How the measured threads are placed on cores.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// No thread is pinned: the scheduler places writer and readers on any core.
    #[default]
    Unpinned,
    /// The writer on the first core, the readers (or controllers) on the last.
    Pinned,
}

/// The cores the writer and the readers are pinned to (`None`: not pinned).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cores {
    /// The cache writer's core.
    pub writer: Option<core_affinity::CoreId>,
    /// The readers' (controllers') core.
    pub readers: Option<core_affinity::CoreId>,
}

impl Placement {
    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Unpinned => "unpinned",
            Placement::Pinned => "pinned",
        }
    }

    /// The cores of this placement. Pinned needs at least two cores that can be listed;
    /// elsewhere nothing is pinned.
    pub fn cores(self) -> Cores {
        match self {
            Placement::Unpinned => Cores::default(),
            Placement::Pinned => match core_affinity::get_core_ids() {
                Some(cores) if cores.len() >= 2 => {
                    Cores { writer: Some(cores[0]), readers: Some(cores[cores.len() - 1]) }
                }
                _ => Cores::default(),
            },
        }
    }
}

/// Pins the calling thread to `core`, if one is given.
pub fn pin(core: Option<core_affinity::CoreId>) {
    if let Some(core) = core {
        core_affinity::set_for_current(core);
    }
}

/// How the cache's writer thread is scheduled while staleness is measured (the `store`
/// scenario's open loop and sweep). In the informer rows, whose writer is a task, it is every
/// thread on an update's path: the source, the runtime's threads and the handler's thread
/// ([`WriterPriority::apply_to_threads`]).
///
/// On a machine shared with other work, a staleness tail is mostly the time the writer spent
/// runnable but waiting for a core ([`crate::harness::sched`] measures it). Real-time priority
/// takes that wait away, so that what remains is the cache's own: a diagnostic for comparing
/// caches on a busy machine, not how a controller manager runs (that is `normal`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum WriterPriority {
    /// The default policy, like every other thread.
    #[default]
    Normal,
    /// `SCHED_FIFO` priority 10 (set with `chrt`; needs the privilege to, else it stays normal).
    Realtime,
}

/// `chrt`'s arguments (before the thread id) for [`WriterPriority::Realtime`].
const REALTIME_ARGS: &[&str] = &["--fifo", "--pid", "10"];
/// `chrt`'s arguments (before the thread id) that give a thread the normal policy back.
const NORMAL_ARGS: &[&str] = &["--other", "--pid", "0"];

impl WriterPriority {
    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WriterPriority::Normal => "normal",
            WriterPriority::Realtime => "realtime",
        }
    }

    /// Gives the calling thread this priority; returns what it got (`normal`, `realtime`, or
    /// `normal (...)` with the reason a real-time request failed). Normal changes nothing.
    pub fn enter(self) -> String {
        match self {
            WriterPriority::Normal => self.name().into(),
            WriterPriority::Realtime => chrt(REALTIME_ARGS, self.name()),
        }
    }

    /// Returns the calling thread to the normal policy after [`enter`](WriterPriority::enter).
    pub fn leave(self) {
        if self == WriterPriority::Realtime {
            chrt(NORMAL_ARGS, WriterPriority::Normal.name());
        }
    }

    /// Gives this priority to every thread of the process whose name starts with one of
    /// `prefixes` (with `back`, the normal policy again): how the informer rows' pipeline
    /// threads, which are not the thread that runs the phase, get it. Returns what the threads
    /// got, e.g. `realtime (5 threads)`, or each distinct failure. Normal, without `back`,
    /// changes nothing.
    pub fn apply_to_threads(self, prefixes: &[&str], back: bool) -> String {
        if self == WriterPriority::Normal {
            return self.name().into();
        }
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return "normal (no /proc/self/task)".into();
        };
        let (args, name) = if back {
            (NORMAL_ARGS, WriterPriority::Normal.name())
        } else {
            (REALTIME_ARGS, self.name())
        };
        let mut got = std::collections::BTreeMap::<String, usize>::new();
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if prefixes.iter().any(|p| comm.trim_end().starts_with(p)) {
                let tid = task.file_name().to_string_lossy().into_owned();
                *got.entry(chrt_tid(args, &tid, name)).or_default() += 1;
            }
        }
        if got.is_empty() {
            return format!("normal (no thread named {})", prefixes.join(" or "));
        }
        let parts: Vec<String> =
            got.into_iter().map(|(what, n)| format!("{what} ({n} threads)")).collect();
        parts.join(", ")
    }
}

/// Runs `chrt <args> <this thread's id>`; returns `got` or why it failed.
fn chrt(args: &[&str], got: &str) -> String {
    let tid = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let Some(tid) = tid else { return "normal (no thread id)".into() };
    chrt_tid(args, &tid, got)
}

/// Runs `chrt <args> <tid>`; returns `got` or why it failed.
fn chrt_tid(args: &[&str], tid: &str, got: &str) -> String {
    match std::process::Command::new("chrt")
        .args(args)
        .arg(tid)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
    {
        Ok(out) if out.status.success() => got.into(),
        Ok(out) => format!("normal (chrt: {})", String::from_utf8_lossy(&out.stderr).trim()),
        Err(e) => format!("normal (chrt: {e})"),
    }
}

/// Where the informer rows (`snapinformer`, `snapinformer-compact`) run their processing loop:
/// `--informer-processing` of the `store` command.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum InformerProcessing {
    /// The informer's default: a task on the row's Tokio runtime, beside the reflector.
    #[default]
    Runtime,
    /// A thread of its own (the informer's `Processing::DedicatedThread`).
    Thread,
}

impl InformerProcessing {
    /// The informer's setting.
    pub fn informer(self) -> snapinformer_core::Processing {
        match self {
            InformerProcessing::Runtime => snapinformer_core::Processing::Runtime,
            InformerProcessing::Thread => snapinformer_core::Processing::DedicatedThread,
        }
    }
}

/// Where the informer rows (`snapinformer`, `snapinformer-arena`, `snapinformer-compact`, ...)
/// run their registered visibility handler: `--informer-handler` of the `store` command.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum InformerHandler {
    /// The informer's default: a thread per handler.
    #[default]
    Thread,
    /// A task per handler on the informer's runtime (`HandlerExecution::Task`).
    Task,
}

impl InformerHandler {
    /// The handler option.
    pub fn execution(self) -> snapinformer_core::HandlerExecution {
        match self {
            InformerHandler::Thread => snapinformer_core::HandlerExecution::Thread,
            InformerHandler::Task => snapinformer_core::HandlerExecution::Task,
        }
    }
}

/// The rows' order from run to run of a repeated set: `--row-order` of the `store` and `seed`
/// commands.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RowOrder {
    /// Run `k` (from 0) starts with row `k mod n` and goes on in `--rows` order, wrapping
    /// around: over `n` runs each row holds each place once.
    #[default]
    Rotate,
    /// Every run in `--rows` order.
    Fixed,
}

impl RowOrder {
    /// The indices of `n` rows in the order run `run` (from 0) runs them.
    pub fn places(self, n: usize, run: usize) -> Vec<usize> {
        let start = match self {
            RowOrder::Rotate if n > 0 => run % n,
            _ => 0,
        };
        (0..n).map(|i| (start + i) % n).collect()
    }

    /// Runs `run` on each of `rows` in the order run `run_index` (from 0) takes them, stopping
    /// at the first error. Returns the results in `rows`' own order, so that repeated runs line
    /// up row by row whatever order they ran in, and the order they ran in (indices into
    /// `rows`).
    pub fn run_rows<R, T, E>(
        self,
        rows: &[R],
        run_index: usize,
        mut run: impl FnMut(&R) -> Result<T, E>,
    ) -> Result<(Vec<T>, Vec<usize>), E> {
        let order = self.places(rows.len(), run_index);
        let mut results: Vec<Option<T>> = rows.iter().map(|_| None).collect();
        for &r in &order {
            results[r] = Some(run(&rows[r])?);
        }
        let results =
            results.into_iter().map(|t| t.expect("an order runs every row once")).collect();
        Ok((results, order))
    }
}

/// How the rows' reclaimer threads are scheduled (`snapinformer`, `snapshot-bg`, `locked-bg`):
/// `--reclaim-priority` of the `store` command.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ReclaimerPriority {
    /// The store's default: the reclaimer competes for cores as an equal.
    #[default]
    Normal,
    /// `SCHED_IDLE` (the store's `ReclaimPriority::Idle`): it frees with CPU time nothing else
    /// wants.
    Idle,
}

impl ReclaimerPriority {
    /// The store's setting.
    pub fn store(self) -> snapinformer_store::ReclaimPriority {
        match self {
            ReclaimerPriority::Normal => snapinformer_store::ReclaimPriority::Normal,
            ReclaimerPriority::Idle => snapinformer_store::ReclaimPriority::Idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scheduling policy of thread `tid` of this process (field 41 of its `stat`).
    fn policy(tid: &str) -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        // The name, in parentheses, may hold spaces: count fields after its closing one.
        let rest = &stat[stat.rfind(')')? + 2..];
        rest.split(' ').nth(41 - 3)?.parse().ok()
    }

    #[test]
    fn rotating_rows_puts_each_row_in_each_place_once_every_n_runs() {
        for n in 1..=5 {
            let mut seen = vec![vec![0; n]; n];
            for run in 0..n {
                let order = RowOrder::Rotate.places(n, run);
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "run {run} runs every row once");
                for (place, &row) in order.iter().enumerate() {
                    seen[row][place] += 1;
                }
            }
            assert!(seen.iter().flatten().all(|&c| c == 1), "n = {n}: {seen:?}");
            assert_eq!(RowOrder::Rotate.places(n, n), RowOrder::Rotate.places(n, 0));
        }
        assert_eq!(RowOrder::Rotate.places(3, 1), vec![1, 2, 0]);
        assert!(RowOrder::Rotate.places(0, 4).is_empty());
    }

    #[test]
    fn rows_run_in_the_rotated_order_come_back_in_their_own_order_and_stop_at_an_error() {
        let rows = ["a", "b", "c"];
        let mut ran = Vec::new();
        let (results, order) = RowOrder::Rotate
            .run_rows(&rows, 1, |r| {
                ran.push(*r);
                Ok::<_, String>(r.to_uppercase())
            })
            .expect("no row fails");
        assert_eq!(ran, ["b", "c", "a"]);
        assert_eq!(order, [1, 2, 0]);
        assert_eq!(results, ["A", "B", "C"]);
        let mut ran = 0;
        let failed = RowOrder::Rotate.run_rows(&rows, 2, |r| {
            ran += 1;
            if *r == "a" { Err(format!("{r} failed")) } else { Ok(()) }
        });
        assert_eq!(failed.unwrap_err(), "a failed");
        assert_eq!(ran, 2, "c ran, then a failed, and b never ran");
    }

    #[test]
    fn a_fixed_row_order_runs_the_rows_as_given_every_time() {
        for run in 0..4 {
            assert_eq!(RowOrder::Fixed.places(3, run), vec![0, 1, 2]);
        }
        assert_eq!(RowOrder::default(), RowOrder::Rotate);
    }

    #[test]
    fn threads_priority_reports_when_no_thread_has_the_name() {
        let got = WriterPriority::Realtime.apply_to_threads(&["no-such-thread-"], false);
        assert_eq!(got, "normal (no thread named no-such-thread-)");
        assert_eq!(WriterPriority::Normal.apply_to_threads(&["no-such-thread-"], false), "normal");
    }

    #[test]
    fn named_threads_get_the_priority_and_give_it_back() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let probe = std::thread::Builder::new()
            .name("prio-probe-a".into())
            .spawn(move || {
                let tid = std::fs::read_link("/proc/thread-self")
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
                tid_tx.send(tid).unwrap();
                let _ = rx.recv();
            })
            .unwrap();
        let tid = tid_rx.recv().unwrap().expect("a thread id");
        assert_eq!(policy(&tid), Some(0), "a new thread runs at SCHED_OTHER");
        let got = WriterPriority::Realtime.apply_to_threads(&["prio-probe-"], false);
        if got == "realtime (1 threads)" {
            assert_eq!(policy(&tid), Some(1), "SCHED_FIFO after {got}");
            let back = WriterPriority::Realtime.apply_to_threads(&["prio-probe-"], true);
            assert_eq!(back, "normal (1 threads)");
            assert_eq!(policy(&tid), Some(0));
        } else {
            // Without the privilege (or chrt), the thread keeps its policy and the report
            // says why.
            assert!(got.starts_with("normal (chrt"), "{got}");
            assert_eq!(policy(&tid), Some(0));
        }
        tx.send(()).unwrap();
        probe.join().unwrap();
    }
}
