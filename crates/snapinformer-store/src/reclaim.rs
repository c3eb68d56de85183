//! Freeing superseded versions off the writer's thread: the store's reclaimer, and the
//! [`ReclaimPriority`] it runs at.
//!
//! [`Reclaimer`] is public so that a benchmark's baseline can free its garbage exactly as the
//! store does (the same thread, bound and priority): like against like.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    thread,
};

use crate::{Error, Result};

/// The least garbage, in superseded changes, the reclaimer thread may have waiting before the
/// writer frees the next version itself (see
/// [`StoreBuilder::background_reclaim`](crate::StoreBuilder::background_reclaim)); above it, the
/// bound is the number of objects in the store.
pub const RECLAIM_BACKLOG_MIN: usize = 10_000;

/// How the store's reclaimer thread is scheduled (see
/// [`StoreBuilder::reclaim_priority`](crate::StoreBuilder::reclaim_priority)).
///
/// Freeing what a publication superseded is work nobody waits for. At the default,
/// [`Normal`](ReclaimPriority::Normal), the reclaimer competes for cores as an equal of the
/// writer and the readers, and mostly keeps up. At [`Idle`](ReclaimPriority::Idle) it gets
/// only the CPU time nothing else wants, as Go's background sweeper does: on busy cores it
/// falls behind until its backlog reaches the bound (see
/// [`StoreBuilder::background_reclaim`](crate::StoreBuilder::background_reclaim)), and from
/// then on the writer frees inline, so a starved reclaimer costs the writer what freeing inline
/// costs and never more memory than the bound.
///
/// Measured in the `store` benchmark (200,000 realistic pods, ten readers on two cores, against
/// real client-go in the same runs; BENCHMARKS.md), `Idle` raised the informer's apply rate with
/// readers to 1.32x client-go's (median of five runs interleaved with five at `Normal`, which
/// gave 0.77x), but not its freshness: staleness p99 spread over 28-339 ms at `Idle` and
/// 51-536 ms at `Normal`, with medians pointing opposite ways. Garbage waits at its bound (as
/// much superseded state as the store holds) whenever the cores are busy, and with an allocator
/// that frees under a lock (glibc's malloc frees a block under its arena's lock) a preempted idle
/// reclaimer can keep the writer waiting for that lock until a core goes idle. Hence the
/// default, `Normal`; choose `Idle` for write throughput under load on an allocator that frees
/// without a lock (mimalloc, as the benchmarks use) and with memory to spare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReclaimPriority {
    /// The scheduling policy the writer's thread had when it built the store, competing for
    /// cores as an equal.
    #[default]
    Normal,
    /// Linux `SCHED_IDLE`: the thread runs when a core would otherwise be idle. An unprivileged
    /// thread may always lower itself to it. Elsewhere, or where the call is refused, the thread
    /// stays at [`Normal`](ReclaimPriority::Normal) ([`Writer::reclaim_priority`](crate::Writer::reclaim_priority) says which).
    Idle,
}

impl ReclaimPriority {
    /// Gives the calling thread this priority, as the store's reclaimer thread does when it
    /// starts; returns the priority the thread runs at. `Normal` changes nothing; `Idle` falls
    /// back to `Normal` where the system refuses it. For threads of your own that do the same
    /// kind of work (the benchmarks' locked baseline uses it for its reclaimer).
    pub fn apply_to_current_thread(self) -> ReclaimPriority {
        match self {
            ReclaimPriority::Idle if lower_to_idle() => ReclaimPriority::Idle,
            _ => ReclaimPriority::Normal,
        }
    }
}

/// Lowers the calling thread to `SCHED_IDLE`; whether it now runs there.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn lower_to_idle() -> bool {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id, thread_schedule_policy,
    };
    let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
    // The result of the call is not the whole story: the policy may be set and the niceness
    // call after it refused. What the thread runs at is what counts.
    let _ = set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle);
    thread_schedule_policy().is_ok_and(|p| p == idle)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn lower_to_idle() -> bool {
    false
}

/// A thread that drops what a writer hands it (superseded versions, replaced objects), so the
/// writer does not spend its time freeing. The store's writer has one (see
/// [`StoreBuilder::background_reclaim`](crate::StoreBuilder::background_reclaim)).
///
/// **Bounded.** [`hand_over`](Reclaimer::hand_over) drops the garbage on the caller's thread
/// instead when the thread's backlog would pass the caller's limit, so a reclaimer that cannot
/// keep up slows the writer down instead of letting garbage grow without bound.
///
/// **Prompt.** Every hand-over wakes the thread if it sleeps: a system call on the writer's
/// thread at every publication of small batches. Waking it less often (only when asleep or
/// every 1000 changes, draining every 5 ms in between) was measured and not adopted: with
/// `k8s_openapi` pods the thread then needed 1.6x the CPU to free the same garbage (5.2 s
/// against 3.2 s over a 20 s open loop, medians of four runs each, ranges apart), more than the
/// writer saved, and the staleness p99 rose; with compact pods it helped. Draining every
/// 0.5 ms instead did not pay either: over six interleaved runs a side both informer rows
/// were staler with it (BENCHMARKS.md, "Waking the reclaimer less often").
///
/// Dropping the `Reclaimer` waits until the thread has dropped everything it was handed.
pub struct Reclaimer<G: Send + 'static> {
    tx: Option<mpsc::Sender<(G, usize)>>,
    /// Changes handed to the thread and not yet dropped.
    backlog: Arc<AtomicUsize>,
    /// The priority the thread runs at.
    priority: ReclaimPriority,
    thread: Option<thread::JoinHandle<()>>,
}

impl<G: Send + 'static> std::fmt::Debug for Reclaimer<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reclaimer")
            .field("backlog", &self.backlog())
            .field("priority", &self.priority)
            .finish()
    }
}

impl<G: Send + 'static> Reclaimer<G> {
    /// Starts the thread, named `name` (without NUL bytes), at `wanted` priority (see [`ReclaimPriority`]: `Idle`
    /// falls back to `Normal` where the system refuses it; [`priority`](Reclaimer::priority)
    /// says which).
    pub fn start(name: &str, wanted: ReclaimPriority) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<(G, usize)>();
        let (started_tx, started) = mpsc::sync_channel::<ReclaimPriority>(1);
        let backlog = Arc::new(AtomicUsize::new(0));
        let thread = {
            let backlog = backlog.clone();
            thread::Builder::new()
                // A NUL byte would make the spawn panic.
                .name(name.replace('\0', ""))
                .spawn(move || {
                    let _ = started_tx.send(wanted.apply_to_current_thread());
                    // Ends once the handle is dropped and everything it sent is dropped.
                    for (garbage, weight) in rx {
                        drop(garbage);
                        backlog.fetch_sub(weight, Ordering::Relaxed);
                    }
                })
                .map_err(|e| Error::Reclaimer(e.to_string()))?
        };
        let priority = started
            .recv()
            .map_err(|_| Error::Reclaimer("the thread ended before it started".into()))?;
        Ok(Reclaimer { tx: Some(tx), backlog, priority, thread: Some(thread) })
    }

    /// The priority the thread runs at.
    pub fn priority(&self) -> ReclaimPriority {
        self.priority
    }

    /// Changes handed to the thread and not dropped yet.
    pub fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }

    /// Hands `garbage`, which counts as `weight` changes, to the thread, unless that would take
    /// its backlog above `limit` changes or the thread is gone: then drops it here.
    pub fn hand_over(&mut self, garbage: G, weight: usize, limit: usize) {
        let Some(tx) = &self.tx else { return drop(garbage) };
        // Only this handle adds to the backlog, so the check and the add do not race with
        // another add; the thread only lowers it.
        if self.backlog.load(Ordering::Relaxed).saturating_add(weight) > limit {
            return drop(garbage);
        }
        self.backlog.fetch_add(weight, Ordering::Relaxed);
        if let Err(mpsc::SendError((garbage, weight))) = tx.send((garbage, weight)) {
            self.backlog.fetch_sub(weight, Ordering::Relaxed);
            drop(garbage);
        }
    }
}

impl<G: Send + 'static> Drop for Reclaimer<G> {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            // The thread only drops values; it ends when the channel closes.
            let _ = thread.join();
        }
    }
}
