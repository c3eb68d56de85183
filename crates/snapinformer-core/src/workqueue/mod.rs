//! A rate-limited, deduplicating work queue for controllers: client-go's workqueue
//! (`TypedRateLimitingInterface`) as one synchronous type, [`WorkQueue`].
//!
//! # What it is
//!
//! Event handlers [`add`](WorkQueue::add) keys of objects that need reconciling; worker threads
//! [`get`](WorkQueue::get) a key, reconcile it with no queue lock held, then call
//! [`done`](WorkQueue::done); a failed reconcile calls
//! [`add_rate_limited`](WorkQueue::add_rate_limited) (retry after a [`RateLimiter`]'s delay), a
//! successful one [`forget`](WorkQueue::forget) (reset the item's failure count).
//!
//! ```
//! use std::{sync::mpsc, thread, time::Duration};
//! use snapinformer_core::workqueue::{WorkQueue, WorkQueueConfig};
//!
//! let queue = WorkQueue::<String>::new(WorkQueueConfig::new("statefulset"));
//! let (tx, reconciled) = mpsc::channel();
//! let worker = {
//!     let queue = queue.clone();
//!     thread::spawn(move || {
//!         while let Some(key) = queue.get() {
//!             let ok = true; // reconcile `key` here, with no queue lock held
//!             if ok { queue.forget(&key) } else { queue.add_rate_limited(key.clone()) }
//!             queue.done(&key);
//!             tx.send(key).unwrap();
//!         }
//!     })
//! };
//! queue.add("default/web".to_owned());
//! queue.add("default/web".to_owned()); // deduplicated if still queued
//! queue.add_after("default/db".to_owned(), Duration::from_millis(10));
//! while reconciled.recv().unwrap() != "default/db" {}
//! queue.shut_down_with_drain();
//! worker.join().unwrap();
//! ```
//!
//! # Guarantees
//!
//! - **Deduplication.** An item is queued at most once, however often it is added before a
//!   worker gets it.
//! - **No concurrent processing of one item.** An item handed out by `get` is *processing*
//!   until `done`; adding it meanwhile marks it *dirty*, and `done` re-queues it once (however
//!   many adds came in). No two workers ever hold the same item.
//! - **Order.** Ready items are handed out first in, first out (by when they became ready).
//! - **Delays.** [`add_after`](WorkQueue::add_after) parks an item until its time (a zero delay
//!   is a plain `add`). An item already parked with an earlier or equal time keeps it; a later
//!   add moves it earlier. A parked item and a queued copy are independent (client-go's rule):
//!   when the parked one comes due it is added again, and deduplicated if still queued.
//! - **Shutdown.** [`shut_down`](WorkQueue::shut_down) wakes every blocked getter; items already
//!   queued are still handed out, then `get` returns `None`. Adds after shutdown are ignored
//!   and counted ([`WorkQueueStats::ignored_after_shutdown`]); parked items are discarded and
//!   counted ([`WorkQueueStats::discarded_delayed`]).
//!   [`shut_down_with_drain`](WorkQueue::shut_down_with_drain) also waits until no item is
//!   processing.
//! - **No lock is held while an item is processed**: the queue's mutex is taken only inside its
//!   methods.
//!
//! # Timers: no thread
//!
//! Parked items live in a min-heap keyed by ready time. There is no timer thread: only `get`
//! can hand an item out, so a getter waiting on the queue's condition variable sleeps at most
//! until the heap's earliest time, then moves every due item into the queue itself (`len` and
//! `stats` do the same, so depth is exact when asked). A new earliest time wakes the waiting
//! getters so they shorten their sleep. This saves a thread and its shutdown per queue; the
//! price is that when a parked item comes due, every idle getter of that queue wakes once (a
//! controller has a handful of workers).
//!
//! # Costs
//!
//! - One mutex acquisition per operation; `add`, `get` and `done` are O(1) hash-map and deque
//!   operations plus clones of the item (keep items cheap to clone: `String`, `Arc<str>`).
//!   `add_after` is O(log n) in parked items.
//! - `add_rate_limited` asks the rate limiter outside the queue's lock (the limiter has its own).
//! - `stats` (and so a metrics scrape) walks the items being processed.
//! - Each handed-out and each finished item observes a histogram (queue latency, work
//!   duration) after the lock is released.
//!
//! Metrics: [`register_metrics`] (client-go's workqueue metric set).

mod metrics;
mod rate_limiter;

use std::{
    cmp::{Ordering, Reverse},
    collections::{BinaryHeap, HashMap, VecDeque},
    fmt,
    hash::Hash,
    sync::{Arc, Condvar, Mutex, MutexGuard},
    time::{Duration, Instant},
};

pub use metrics::register_metrics;
pub use rate_limiter::{
    ExponentialBackoff, MaxOf, RateLimiter, TokenBucket, default_controller_rate_limiter,
};

use metrics::Histograms;

/// Errors of the work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The queue is shut down and has nothing left to hand out.
    #[error("the work queue is shut down")]
    ShutDown,
}

/// `Result` with the work queue [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to build a [`WorkQueue`]: its name (the `name` label of its metrics) and its rate
/// limiter ([`default_controller_rate_limiter`] unless set).
#[doc(alias = "RateLimitingQueueConfig")]
#[doc(alias = "TypedRateLimitingQueueConfig")]
#[must_use]
pub struct WorkQueueConfig<K> {
    name: String,
    rate_limiter: Box<dyn RateLimiter<K>>,
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> WorkQueueConfig<K> {
    /// A queue named `name` with the [`default_controller_rate_limiter`].
    pub fn new(name: impl Into<String>) -> Self {
        WorkQueueConfig {
            name: name.into(),
            rate_limiter: Box::new(default_controller_rate_limiter()),
        }
    }
}

impl<K> WorkQueueConfig<K> {
    /// Uses `limiter` for [`WorkQueue::add_rate_limited`], [`WorkQueue::forget`] and
    /// [`WorkQueue::num_requeues`].
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<K>) -> Self {
        self.rate_limiter = Box::new(limiter);
        self
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<K> fmt::Debug for WorkQueueConfig<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueConfig").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Count, sum and maximum of a set of durations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DurationSummary {
    /// Number of durations observed.
    pub count: u64,
    /// Their sum.
    pub sum: Duration,
    /// The longest one.
    pub max: Duration,
}

impl DurationSummary {
    fn observe(&mut self, d: Duration) {
        self.count += 1;
        self.sum = self.sum.saturating_add(d);
        self.max = self.max.max(d);
    }

    /// The mean duration (zero before the first observation).
    pub fn mean(&self) -> Duration {
        match u32::try_from(self.count) {
            Ok(0) => Duration::ZERO,
            Ok(n) => self.sum / n,
            Err(_) => Duration::from_secs_f64(self.sum.as_secs_f64() / self.count as f64),
        }
    }
}

/// A point-in-time view of a [`WorkQueue`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkQueueStats {
    /// Items ready to be handed out (the queue's depth, [`WorkQueue::len`]).
    pub depth: usize,
    /// Items parked by `add_after`/`add_rate_limited`, not yet due.
    pub waiting: usize,
    /// Items handed out and not yet `done`.
    pub processing: usize,
    /// Items processing that were added again: `done` re-queues them.
    pub requeue_pending: usize,
    /// Adds that queued an item (or marked a processing one dirty), including parked items
    /// coming due. Deduplicated adds are not counted.
    pub adds: u64,
    /// Adds dropped because the item was already queued or dirty.
    pub deduplicated: u64,
    /// Delayed re-adds accepted (`add_after` and `add_rate_limited` calls).
    pub retries: u64,
    /// Items handed out by `get`.
    pub handed_out: u64,
    /// Adds of any kind ignored because the queue was shutting down.
    pub ignored_after_shutdown: u64,
    /// Parked items discarded by shutdown.
    pub discarded_delayed: u64,
    /// How long the longest-running item being processed has been processing.
    pub longest_running: Duration,
    /// Sum of how long every item being processed has been processing (client-go's
    /// "unfinished work").
    pub unfinished_work: Duration,
    /// Time from an item being added (or coming due) to a worker getting it.
    pub queue_latency: DurationSummary,
    /// Time from `get` to `done`.
    pub work_duration: DurationSummary,
    /// Whether shutdown has begun.
    pub shutting_down: bool,
}

/// A parked item in the delay heap, ordered by ready time, then by arrival.
struct Timer<K> {
    ready: Instant,
    seq: u64,
    item: K,
}

impl<K> PartialEq for Timer<K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<K> Eq for Timer<K> {}
impl<K> PartialOrd for Timer<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Timer<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.ready, self.seq).cmp(&(other.ready, other.seq))
    }
}

struct State<K> {
    /// Items ready to be handed out; each is in `dirty` and not in `processing`.
    queue: VecDeque<K>,
    /// Items that need processing (queued, or added again while processing), with when they
    /// were added.
    dirty: HashMap<K, Instant>,
    /// Items handed out and not done, with when they were handed out.
    processing: HashMap<K, Instant>,
    /// Parked items: their ready time and the `seq` of their live heap entry. Heap entries with
    /// another `seq` are stale (the item was moved earlier) and skipped.
    waiting: HashMap<K, (Instant, u64)>,
    heap: BinaryHeap<Reverse<Timer<K>>>,
    next_seq: u64,
    shutting_down: bool,
    drain: bool,
    adds: u64,
    deduplicated: u64,
    retries: u64,
    handed_out: u64,
    ignored_after_shutdown: u64,
    discarded_delayed: u64,
    queue_latency: DurationSummary,
    work_duration: DurationSummary,
}

impl<K: Hash + Eq + Clone> State<K> {
    fn new() -> Self {
        State {
            queue: VecDeque::new(),
            dirty: HashMap::new(),
            processing: HashMap::new(),
            waiting: HashMap::new(),
            heap: BinaryHeap::new(),
            next_seq: 0,
            shutting_down: false,
            drain: false,
            adds: 0,
            deduplicated: 0,
            retries: 0,
            handed_out: 0,
            ignored_after_shutdown: 0,
            discarded_delayed: 0,
            queue_latency: DurationSummary::default(),
            work_duration: DurationSummary::default(),
        }
    }

    /// Adds `item`; returns whether it was pushed onto the ready queue.
    fn add(&mut self, item: K, now: Instant) -> bool {
        if self.dirty.contains_key(&item) {
            self.deduplicated += 1;
            return false;
        }
        self.adds += 1;
        self.dirty.insert(item.clone(), now);
        if self.processing.contains_key(&item) {
            return false;
        }
        self.queue.push_back(item);
        true
    }

    /// Moves every parked item due at `now` into the queue; returns how many were queued.
    fn promote(&mut self, now: Instant) -> usize {
        let mut queued = 0;
        while self.heap.peek().is_some_and(|t| t.0.ready <= now) {
            let Some(Reverse(t)) = self.heap.pop() else { break };
            if self.waiting.get(&t.item).is_some_and(|&(_, seq)| seq == t.seq) {
                self.waiting.remove(&t.item);
                queued += usize::from(self.add(t.item, now));
            }
        }
        queued
    }

    /// The earliest time a parked item may come due (a stale entry may make it early).
    fn next_ready(&self) -> Option<Instant> {
        self.heap.peek().map(|t| t.0.ready)
    }

    fn discard_parked(&mut self) {
        self.discarded_delayed += self.waiting.len() as u64;
        self.waiting.clear();
        self.heap.clear();
    }
}

struct Inner<K> {
    name: String,
    limiter: Box<dyn RateLimiter<K>>,
    state: Mutex<State<K>>,
    /// Signalled when an item is ready, a new earliest parked time arrives, or on shutdown.
    ready: Condvar,
    /// Signalled when the last item being processed is done, and on shutdown.
    idle: Condvar,
    histograms: Histograms,
}

/// A rate-limited, deduplicating, delaying work queue of items `K` (object keys) for
/// controller worker threads. Cheap to clone: every clone is a handle to the same queue.
///
/// Build one with [`WorkQueue::new`] from a [`WorkQueueConfig`]. See the
/// [module documentation](self) for the guarantees and costs.
#[doc(alias = "RateLimitingInterface")]
#[doc(alias = "TypedRateLimitingInterface")]
#[doc(alias = "DelayingInterface")]
#[doc(alias = "Interface")]
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue { inner: Arc::clone(&self.inner) }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync + fmt::Debug + 'static> fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("depth", &st.queue.len())
            .field("waiting", &st.waiting.len())
            .field("processing", &st.processing.len())
            .field("shutting_down", &st.shutting_down)
            .finish_non_exhaustive()
    }
}

/// A far-away instant for delays too large to add to `now`.
fn far_future(now: Instant) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    now.checked_add(CENTURY).unwrap_or(now)
}

impl<K: Hash + Eq + Clone + Send + Sync + fmt::Debug + 'static> WorkQueue<K> {
    /// A new, empty queue.
    #[doc(alias = "NewRateLimitingQueueWithConfig")]
    #[doc(alias = "NewTypedRateLimitingQueueWithConfig")]
    pub fn new(config: WorkQueueConfig<K>) -> Self {
        WorkQueue {
            inner: Arc::new(Inner {
                name: config.name,
                limiter: config.rate_limiter,
                state: Mutex::new(State::new()),
                ready: Condvar::new(),
                idle: Condvar::new(),
                histograms: Histograms::default(),
            }),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake(&self, n: usize) {
        for _ in 0..n {
            self.inner.ready.notify_one();
        }
    }

    /// Queues `item` unless it is already queued (deduplicated). If it is being processed, it
    /// is re-queued once `done` is called for it. Ignored (and counted) once shutdown began.
    pub fn add(&self, item: K) {
        let mut st = self.lock();
        if st.shutting_down {
            st.ignored_after_shutdown += 1;
            tracing::trace!(queue = %self.inner.name, ?item, "add ignored: shutting down");
            return;
        }
        let queued = st.add(item, Instant::now());
        drop(st);
        self.wake(usize::from(queued));
    }

    /// Adds `item` once `delay` has passed (at once if `delay` is zero). If the item is already
    /// parked with an earlier or equal ready time, that time is kept; otherwise it moves to the
    /// new, earlier time. Ignored (and counted) once shutdown began.
    #[doc(alias = "AddAfter")]
    pub fn add_after(&self, item: K, delay: Duration) {
        self.add_after_at(item, delay, Instant::now());
    }

    fn add_after_at(&self, item: K, delay: Duration, now: Instant) {
        let mut st = self.lock();
        if st.shutting_down {
            st.ignored_after_shutdown += 1;
            tracing::trace!(queue = %self.inner.name, ?item, "delayed add ignored: shutting down");
            return;
        }
        st.retries += 1;
        if delay.is_zero() {
            let queued = st.add(item, now);
            drop(st);
            self.wake(usize::from(queued));
            return;
        }
        let ready = now.checked_add(delay).unwrap_or_else(|| far_future(now));
        if st.waiting.get(&item).is_some_and(|&(t, _)| t <= ready) {
            return;
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        let new_head = st.next_ready().is_none_or(|head| ready < head);
        st.waiting.insert(item.clone(), (ready, seq));
        st.heap.push(Reverse(Timer { ready, seq, item }));
        drop(st);
        if new_head {
            // Waiting getters sleep until the old earliest time (or forever): let them re-time.
            self.inner.ready.notify_all();
        }
    }

    /// Adds `item` after the rate limiter's delay for it
    /// ([`RateLimiter::when`], which also counts a failure). Ignored once shutdown began.
    #[doc(alias = "AddRateLimited")]
    pub fn add_rate_limited(&self, item: K) {
        if self.is_shutting_down() {
            self.lock().ignored_after_shutdown += 1;
            return;
        }
        let now = Instant::now();
        let delay = self.inner.limiter.when(&item, now);
        self.add_after_at(item, delay, now);
    }

    /// Resets `item`'s failure count in the rate limiter (call once it was processed
    /// successfully). Does not remove it from the queue.
    pub fn forget(&self, item: &K) {
        self.inner.limiter.forget(item);
    }

    /// How many times `item` was rate-limited since it was last forgotten
    /// ([`RateLimiter::retries`]).
    #[doc(alias = "NumRequeues")]
    pub fn num_requeues(&self, item: &K) -> u32 {
        self.inner.limiter.retries(item)
    }

    /// Waits for an item and hands it out; the caller must call [`done`](WorkQueue::done) with
    /// it once processed. Parked items become ready at their time while this waits. Returns
    /// `None` once the queue is shut down and no ready item is left.
    pub fn get(&self) -> Option<K> {
        self.get_until(None).ok().flatten()
    }

    /// Like [`get`](WorkQueue::get), but waits at most `timeout` (zero: do not wait), so a
    /// worker can poll.
    ///
    /// - `Ok(Some(item))`: an item to process (call [`done`](WorkQueue::done) afterwards);
    /// - `Ok(None)`: nothing became ready within `timeout`;
    /// - `Err(Error::ShutDown)`: the queue is shut down and no ready item is left; stop.
    pub fn get_timeout(&self, timeout: Duration) -> Result<Option<K>> {
        let now = Instant::now();
        self.get_until(Some(now.checked_add(timeout).unwrap_or_else(|| far_future(now))))
    }

    fn get_until(&self, deadline: Option<Instant>) -> Result<Option<K>> {
        let mut st = self.lock();
        loop {
            let now = Instant::now();
            let promoted = st.promote(now);
            if let Some(item) = st.queue.pop_front() {
                let added = st.dirty.remove(&item).unwrap_or(now);
                st.processing.insert(item.clone(), now);
                st.handed_out += 1;
                let latency = now.saturating_duration_since(added);
                st.queue_latency.observe(latency);
                drop(st);
                // Items promoted beyond the one taken here are for other getters.
                self.wake(promoted.saturating_sub(1));
                self.inner.histograms.queue_duration.observe(latency.as_secs_f64());
                return Ok(Some(item));
            }
            if st.shutting_down {
                return Err(Error::ShutDown);
            }
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            let wake_at = match (deadline, st.next_ready()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            st = match wake_at {
                None => self.inner.ready.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(at) => {
                    let (st, _) = self
                        .inner
                        .ready
                        .wait_timeout(st, at.saturating_duration_since(now))
                        .unwrap_or_else(|e| e.into_inner());
                    st
                }
            };
        }
    }

    /// Marks `item` as processed. If it was added again while being processed, it is queued
    /// again now. Does nothing for an item that is not being processed.
    pub fn done(&self, item: &K) {
        let now = Instant::now();
        let mut st = self.lock();
        let Some(started) = st.processing.remove(item) else { return };
        let work = now.saturating_duration_since(started);
        st.work_duration.observe(work);
        let requeued = st.dirty.contains_key(item);
        if requeued {
            st.queue.push_back(item.clone());
        }
        let idle = st.processing.is_empty();
        drop(st);
        self.wake(usize::from(requeued));
        if idle {
            self.inner.idle.notify_all();
        }
        self.inner.histograms.work_duration.observe(work.as_secs_f64());
    }

    /// Items ready to be handed out (not counting parked or processing items). Moves due
    /// parked items into the queue first.
    pub fn len(&self) -> usize {
        let mut st = self.lock();
        let promoted = st.promote(Instant::now());
        let len = st.queue.len();
        drop(st);
        self.wake(promoted);
        len
    }

    /// Whether no item is ready ([`len`](WorkQueue::len) is 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Begins shutdown: later adds are ignored (and counted), parked items are discarded, and
    /// every blocked getter wakes up. Getters still receive the items already queued, then
    /// `None`. Also ends a [`shut_down_with_drain`](WorkQueue::shut_down_with_drain) waiting in
    /// another thread. Idempotent.
    #[doc(alias = "ShutDown")]
    pub fn shut_down(&self) {
        let mut st = self.lock();
        st.shutting_down = true;
        st.drain = false;
        st.discard_parked();
        drop(st);
        self.inner.ready.notify_all();
        self.inner.idle.notify_all();
    }

    /// Begins shutdown like [`shut_down`](WorkQueue::shut_down), then blocks until no item is
    /// being processed (every handed-out item is `done`), or until `shut_down` is called. Items
    /// still queued are not waited for: workers keep receiving them until the queue is empty.
    ///
    /// Do not call it from a worker while that worker holds an item: it would wait for itself.
    #[doc(alias = "ShutDownWithDrain")]
    pub fn shut_down_with_drain(&self) {
        let mut st = self.begin_drain();
        while st.drain && !st.processing.is_empty() {
            st = self.inner.idle.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Like [`shut_down_with_drain`](WorkQueue::shut_down_with_drain), but waits at most
    /// `timeout`. Returns whether no item was being processed when it returned.
    pub fn shut_down_with_drain_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.begin_drain();
        while st.drain && !st.processing.is_empty() {
            let now = Instant::now();
            let left = match deadline {
                Some(d) if now >= d => break,
                Some(d) => d - now,
                None => Duration::MAX,
            };
            st = self.inner.idle.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        st.processing.is_empty()
    }

    fn begin_drain(&self) -> MutexGuard<'_, State<K>> {
        let mut st = self.lock();
        st.shutting_down = true;
        st.drain = true;
        st.discard_parked();
        self.inner.ready.notify_all();
        st
    }

    /// Whether shutdown has begun.
    #[doc(alias = "ShuttingDown")]
    pub fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    /// Depth, counters, the items being processed and latency summaries, at this moment. Moves
    /// due parked items into the queue first.
    pub fn stats(&self) -> WorkQueueStats {
        let now = Instant::now();
        let mut st = self.lock();
        let promoted = st.promote(now);
        let mut longest_running = Duration::ZERO;
        let mut unfinished_work = Duration::ZERO;
        for started in st.processing.values() {
            let age = now.saturating_duration_since(*started);
            longest_running = longest_running.max(age);
            unfinished_work = unfinished_work.saturating_add(age);
        }
        let stats = WorkQueueStats {
            depth: st.queue.len(),
            waiting: st.waiting.len(),
            processing: st.processing.len(),
            requeue_pending: st.processing.keys().filter(|k| st.dirty.contains_key(*k)).count(),
            adds: st.adds,
            deduplicated: st.deduplicated,
            retries: st.retries,
            handed_out: st.handed_out,
            ignored_after_shutdown: st.ignored_after_shutdown,
            discarded_delayed: st.discarded_delayed,
            longest_running,
            unfinished_work,
            queue_latency: st.queue_latency,
            work_duration: st.work_duration,
            shutting_down: st.shutting_down,
        };
        drop(st);
        self.wake(promoted);
        stats
    }

    /// Registers this queue's metrics in `registry` (see [`register_metrics`]).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        register_metrics(self, registry);
    }
}
