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
/// **Shared.** Other threads can hand garbage of any type to the same thread through a
/// [`ReclaimHandle`] ([`handle`](Reclaimer::handle)), each handle with a backlog and bound of
/// its own: the informer's handler threads give it the notifications they have handled, so one
/// thread per informer frees both what the store superseded and what the handlers held.
///
/// Dropping the `Reclaimer` waits until the thread has dropped everything handed to it so far,
/// through any handle. The thread ends then, or, while handles remain, once the last is dropped.
pub struct Reclaimer<G: Send + 'static> {
    tx: Option<mpsc::Sender<Item<G>>>,
    /// Changes handed to the thread and not yet dropped.
    backlog: Arc<AtomicUsize>,
    /// Sends garbage of other types; cloned into every [`ReclaimHandle`].
    foreign: Option<Arc<SendForeign>>,
    /// The priority the thread runs at.
    priority: ReclaimPriority,
    thread: Option<thread::JoinHandle<()>>,
}

/// What the thread receives.
enum Item<G> {
    /// The owner's garbage and its weight.
    Own(G, usize),
    /// A handle's garbage, its weight and the handle's backlog.
    Foreign(Box<dyn Send>, usize, Arc<AtomicUsize>),
    /// Acknowledge once everything sent before is dropped.
    Flush(mpsc::SyncSender<()>),
}

/// Sends a handle's garbage to the thread; false (the garbage dropped here) once it is gone.
type SendForeign = dyn Fn(Box<dyn Send>, usize, Arc<AtomicUsize>) -> bool + Send + Sync;

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
        let (tx, rx) = mpsc::channel::<Item<G>>();
        let (started_tx, started) = mpsc::sync_channel::<ReclaimPriority>(1);
        let backlog = Arc::new(AtomicUsize::new(0));
        let thread = {
            let backlog = backlog.clone();
            thread::Builder::new()
                // A NUL byte would make the spawn panic.
                .name(name.replace('\0', ""))
                .spawn(move || {
                    let _ = started_tx.send(wanted.apply_to_current_thread());
                    // Ends once the owner and every handle are dropped and everything they
                    // sent is dropped.
                    for item in rx {
                        match item {
                            Item::Own(garbage, weight) => {
                                drop(garbage);
                                backlog.fetch_sub(weight, Ordering::Relaxed);
                            }
                            Item::Foreign(garbage, weight, theirs) => {
                                drop(garbage);
                                theirs.fetch_sub(weight, Ordering::Relaxed);
                            }
                            Item::Flush(done) => {
                                let _ = done.send(());
                            }
                        }
                    }
                })
                .map_err(|e| Error::Reclaimer(e.to_string()))?
        };
        let priority = started
            .recv()
            .map_err(|_| Error::Reclaimer("the thread ended before it started".into()))?;
        let foreign_tx = tx.clone();
        let foreign: Arc<SendForeign> = Arc::new(move |garbage, weight, theirs| {
            // On failure the garbage comes back inside the error and is dropped here.
            foreign_tx.send(Item::Foreign(garbage, weight, theirs)).is_ok()
        });
        Ok(Reclaimer {
            tx: Some(tx),
            backlog,
            foreign: Some(foreign),
            priority,
            thread: Some(thread),
        })
    }

    /// The priority the thread runs at.
    pub fn priority(&self) -> ReclaimPriority {
        self.priority
    }

    /// Changes handed to the thread (by this owner, not its handles) and not dropped yet.
    pub fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }

    /// Hands `garbage`, which counts as `weight` changes, to the thread, unless that would take
    /// its backlog above `limit` changes or the thread is gone: then drops it here.
    pub fn hand_over(&mut self, garbage: G, weight: usize, limit: usize) {
        let Some(tx) = &self.tx else { return drop(garbage) };
        // Only the owner adds to its backlog, so the check and the add do not race with
        // another add; the thread only lowers it.
        if self.backlog.load(Ordering::Relaxed).saturating_add(weight) > limit {
            return drop(garbage);
        }
        self.backlog.fetch_add(weight, Ordering::Relaxed);
        if let Err(mpsc::SendError(item)) = tx.send(Item::Own(garbage, weight)) {
            self.backlog.fetch_sub(weight, Ordering::Relaxed);
            drop(item);
        }
    }

    /// A handle through which other threads hand garbage of any type to this thread, with a
    /// backlog of its own (shared by the handle's clones) that does not count against the
    /// owner's.
    pub fn handle(&self) -> ReclaimHandle {
        ReclaimHandle {
            send: self.foreign.clone(),
            backlog: Arc::new(AtomicUsize::new(0)),
            priority: self.priority,
        }
    }
}

impl<G: Send + 'static> Drop for Reclaimer<G> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let (done_tx, done) = mpsc::sync_channel(1);
            if tx.send(Item::Flush(done_tx)).is_ok() {
                // Everything sent before the marker, by the owner or a handle, is dropped
                // once it is acknowledged.
                let _ = done.recv();
            }
        }
        let handles_remain = self.foreign.take().is_some_and(|f| Arc::strong_count(&f) > 1);
        if let Some(thread) = self.thread.take()
            && !handles_remain
        {
            // No sender is left: the thread ends at once. With handles left it ends when the
            // last one is dropped, and is not waited for here.
            let _ = thread.join();
        }
    }
}

/// A way for any thread to hand garbage to a [`Reclaimer`]'s thread ([`Reclaimer::handle`]),
/// so that it frees nothing itself. Cloning is cheap; clones share one backlog.
///
/// The bound holds per hand-over: a hand-over that would take the backlog above its `limit`
/// drops the garbage on the caller's thread. Clones that hand over at the same moment may each
/// pass the check, so the backlog can exceed the limit by what they hand over together.
#[derive(Clone)]
pub struct ReclaimHandle {
    send: Option<Arc<SendForeign>>,
    backlog: Arc<AtomicUsize>,
    priority: ReclaimPriority,
}

impl std::fmt::Debug for ReclaimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReclaimHandle")
            .field("backlog", &self.backlog())
            .field("priority", &self.priority)
            .finish()
    }
}

impl ReclaimHandle {
    /// The priority the reclaimer's thread runs at.
    pub fn priority(&self) -> ReclaimPriority {
        self.priority
    }

    /// Changes handed over through this handle and its clones and not dropped yet.
    pub fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }

    /// Hands `garbage`, which counts as `weight` changes, to the reclaimer's thread, unless
    /// that would take this handle's backlog above `limit` or the thread is gone: then drops it
    /// here.
    pub fn hand_over<X: Send + 'static>(&self, garbage: X, weight: usize, limit: usize) {
        let Some(send) = &self.send else { return drop(garbage) };
        if self.backlog.load(Ordering::Relaxed).saturating_add(weight) > limit {
            return drop(garbage);
        }
        self.backlog.fetch_add(weight, Ordering::Relaxed);
        if !send(Box::new(garbage), weight, self.backlog.clone()) {
            self.backlog.fetch_sub(weight, Ordering::Relaxed);
        }
    }
}
