//! client-go conformance of the work queue: the cases of client-go's `util/workqueue` tests
//! (v0.37.2; v0.34.0 has the same cases), ported to [`WorkQueue`] and its rate limiters.
//!
//! Upstream files, and the cases taken from each:
//!
//! - `queue_test.go`: `TestBasic` (both shutdown modes), `TestAddWhileProcessing` (both modes),
//!   `TestLen`, `TestReinsert`, `TestCollapse`, `TestCollapseWhileProcessing`,
//!   `TestQueueDrainageUsingShutDownWithDrain`, `TestNoQueueDrainageUsingShutDown`,
//!   `TestForceQueueShutdownUsingShutDown`, `TestQueueDrainageUsingShutDownWithDrainWithDirtyItem`,
//!   `TestGarbageCollection`.
//! - `delaying_queue_test.go`: `TestSimpleQueue`, `TestDeduping`, `TestAddTwoFireEarly`,
//!   `TestCopyShifting`.
//! - `rate_limiting_queue_test.go`: `TestRateLimitingQueue`.
//! - `default_rate_limiters_test.go`: `TestItemExponentialFailureRateLimiter`,
//!   `TestItemExponentialFailureRateLimiterOverFlow`, `TestItemFastSlowRateLimiter`,
//!   `TestMaxOfRateLimiter`, `TestWithMaxWaitRateLimiter`.
//! - `metrics_test.go`: `TestMetrics`, `TestMetricShutdown` (which pins a deliberate difference:
//!   see its test).
//! - `parallelizer_test.go` is not ported: `ParallelizeUntil` is a helper beside the queue with
//!   no counterpart here (`std::thread::scope` covers it in Rust).
//!
//! Each test is named after the upstream test (and case), then says in our words what it
//! checks. Upstream's fake clock (`k8s.io/utils/clock/testing`) is our [`FakeClock`]; where
//! upstream sleeps to let a goroutine block, these tests see the thread blocked in the queue
//! (its waiting-getter and waiting-drain counts), so "not yet" never depends on a sleep.

use std::{
    hash::{Hash, Hasher},
    sync::{Arc, Weak},
    thread,
    time::{Duration, Instant},
};

use prometheus_client::registry::Registry;
use snapinformer_core::workqueue::{
    ExponentialBackoff, FakeClock, FastSlow, MaxOf, RateLimiter, WithMaxWait, WorkQueue,
    WorkQueueConfig, WorkQueueStats,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn queue<K: Hash + Eq + Clone + Send + Sync + std::fmt::Debug + 'static>() -> WorkQueue<K> {
    WorkQueue::new(WorkQueueConfig::new("conformance"))
}

fn fake_queue(name: &str) -> (WorkQueue<String>, FakeClock) {
    let clock = FakeClock::new();
    (WorkQueue::new(WorkQueueConfig::new(name).clock(clock.clone())), clock)
}

fn s(v: &str) -> String {
    v.to_owned()
}

/// Runs `f` on its own thread, failing the test after 20 s (a deadlock) or on a panic.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{what}: no result within 20 s ({e})"))
}

/// Waits (bounded) until the queue's stats satisfy `cond`: to see a thread blocked in the
/// queue.
fn wait_until<K>(q: &WorkQueue<K>, what: &str, cond: impl Fn(&WorkQueueStats) -> bool)
where
    K: Hash + Eq + Clone + Send + Sync + std::fmt::Debug + 'static,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond(&q.stats()) {
        assert!(Instant::now() < deadline, "{what}: not within 20 s");
        thread::yield_now();
    }
}

fn take<K>(q: &WorkQueue<K>) -> K
where
    K: Hash + Eq + Clone + Send + Sync + std::fmt::Debug + 'static,
{
    q.get_timeout(Duration::ZERO).expect("shut down").expect("an item is ready")
}

// ------------------------------------------------------------------------ queue_test.go

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shutdown {
    Plain,
    WithDrain,
}

impl Shutdown {
    fn apply<K>(self, q: &WorkQueue<K>)
    where
        K: Hash + Eq + Clone + Send + Sync + std::fmt::Debug + 'static,
    {
        match self {
            Shutdown::Plain => q.shut_down(),
            Shutdown::WithDrain => q.shut_down_with_drain(),
        }
    }
}

/// Upstream: 50 producers add 50 items each, 10 consumers process them; after the producers
/// finish, the queue shuts down and an item added then must never be handed out.
fn basic(mode: Shutdown) {
    const PRODUCERS: usize = 50;
    const CONSUMERS: usize = 10;
    let q: WorkQueue<String> = queue();
    let late = "added after shutdown!";
    let q2 = q.clone();
    let len = within("basic", move || {
        let q = q2;
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|i| {
                let q = q.clone();
                thread::spawn(move || {
                    for _ in 0..50 {
                        q.add(i.to_string());
                        thread::yield_now();
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                let q = q.clone();
                thread::spawn(move || {
                    while let Some(item) = q.get() {
                        assert_ne!(item, late, "an item added after shutdown was handed out");
                        thread::yield_now();
                        q.done(&item);
                    }
                })
            })
            .collect();
        producers.into_iter().for_each(|p| p.join().unwrap());
        mode.apply(&q);
        q.add(late.to_owned());
        consumers.into_iter().for_each(|c| c.join().unwrap());
        q.len()
    });
    assert_eq!(len, 0, "the queue is empty after the consumers quit");
    assert_eq!(q.stats().ignored_after_shutdown, 1);
}

#[test]
fn test_basic_shut_down_hands_out_nothing_added_after_it_and_ends_empty() {
    basic(Shutdown::Plain);
}

#[test]
fn test_basic_shut_down_with_drain_hands_out_nothing_added_after_it_and_ends_empty() {
    basic(Shutdown::WithDrain);
}

/// Upstream: every consumer re-adds each item it gets once, while processing it (the
/// dirty-while-processing path), and the queue still ends empty.
fn add_while_processing(mode: Shutdown) {
    let q: WorkQueue<usize> = queue();
    let q2 = q.clone();
    let len = within("add while processing", move || {
        let q = q2;
        let producers: Vec<_> = (0..50)
            .map(|i| {
                let q = q.clone();
                thread::spawn(move || q.add(i))
            })
            .collect();
        let consumers: Vec<_> = (0..10)
            .map(|_| {
                let q = q.clone();
                thread::spawn(move || {
                    let mut counters = std::collections::HashMap::new();
                    while let Some(item) = q.get() {
                        let n = counters.entry(item).or_insert(0);
                        *n += 1;
                        if *n < 2 {
                            q.add(item);
                        }
                        q.done(&item);
                    }
                })
            })
            .collect();
        producers.into_iter().for_each(|p| p.join().unwrap());
        mode.apply(&q);
        consumers.into_iter().for_each(|c| c.join().unwrap());
        q.len()
    });
    assert_eq!(len, 0);
}

#[test]
fn test_add_while_processing_shut_down_ends_empty() {
    add_while_processing(Shutdown::Plain);
}

#[test]
fn test_add_while_processing_shut_down_with_drain_ends_empty() {
    add_while_processing(Shutdown::WithDrain);
}

#[test]
fn test_len_counts_distinct_queued_items() {
    let q: WorkQueue<String> = queue();
    q.add(s("foo"));
    assert_eq!(q.len(), 1);
    q.add(s("bar"));
    assert_eq!(q.len(), 2);
    q.add(s("foo"));
    assert_eq!(q.len(), 2, "a duplicate does not lengthen the queue");
}

#[test]
fn test_reinsert_an_item_added_while_processing_is_back_after_done() {
    let q: WorkQueue<String> = queue();
    q.add(s("foo"));
    let i = take(&q);
    assert_eq!(i, "foo");
    q.add(i.clone());
    q.done(&i);
    let i = take(&q);
    assert_eq!(i, "foo");
    q.done(&i);
    assert_eq!(q.len(), 0);
}

#[test]
fn test_collapse_an_item_added_twice_is_handed_out_once() {
    // Upstream also checks that its pluggable inner queue is "touched" on the duplicate add;
    // this queue has no pluggable inner queue, so only the observable collapse is ported.
    let q: WorkQueue<String> = queue();
    q.add(s("bar"));
    q.add(s("bar"));
    assert_eq!(take(&q), "bar");
    q.done(&s("bar"));
    assert_eq!(q.len(), 0);
    assert_eq!(q.stats().deduplicated, 1);
}

#[test]
fn test_collapse_while_processing_a_second_worker_waits_for_done_then_gets_it_once() {
    let q: WorkQueue<String> = queue();
    q.add(s("foo"));
    let i = take(&q);
    assert_eq!(i, "foo");
    q.add(s("foo"));
    q.add(s("foo"));
    let q2 = q.clone();
    let worker = thread::spawn(move || {
        let i = q2.get().expect("an item");
        q2.done(&i);
        i
    });
    // Upstream sleeps 100 ms and checks the worker has not finished; here the worker is seen
    // blocked in the queue, which fails if it was handed "foo" while it was processing.
    wait_until(&q, "worker blocked", |st| st.waiting_getters == 1);
    assert!(!worker.is_finished(), "the worker got an item that is still processing");
    q.done(&s("foo"));
    assert_eq!(within("worker", move || worker.join().unwrap()), "foo");
    assert_eq!(q.len(), 0);
    assert_eq!(q.stats().handed_out, 2, "collapsed to one re-delivery");
}

#[test]
fn test_queue_drainage_using_shut_down_with_drain_waits_for_items_being_processed() {
    let q: WorkQueue<String> = queue();
    q.add(s("foo"));
    q.add(s("bar"));
    let first = take(&q);
    let second = take(&q);
    let q2 = q.clone();
    let drainer = thread::spawn(move || q2.shut_down_with_drain());
    wait_until(&q, "drain blocked", |st| st.waiting_drains == 1);
    assert_eq!(q.get(), None, "getters learn of the shutdown during the drain");
    assert!(!drainer.is_finished());
    q.done(&first);
    q.done(&second);
    within("drain", move || drainer.join().unwrap());
}

#[test]
fn test_no_queue_drainage_using_shut_down_returns_with_items_still_processing() {
    let q: WorkQueue<String> = queue();
    q.add(s("foo"));
    q.add(s("bar"));
    let _first = take(&q);
    let _second = take(&q);
    let q2 = q.clone();
    within("shut down", move || q2.shut_down());
    assert_eq!(q.stats().processing, 2);
}

#[test]
fn test_force_queue_shutdown_using_shut_down_ends_a_waiting_drain() {
    let q: WorkQueue<String> = queue();
    q.add(s("foo"));
    q.add(s("bar"));
    let _first = take(&q);
    let _second = take(&q);
    let q2 = q.clone();
    let drainer = thread::spawn(move || q2.shut_down_with_drain());
    wait_until(&q, "drain blocked", |st| st.waiting_drains == 1);
    assert_eq!(q.get(), None);
    q.shut_down();
    within("drain", move || drainer.join().unwrap());
    assert_eq!(q.stats().processing, 2, "nothing was done: the drain was cut short");
}

#[test]
fn test_queue_drainage_using_shut_down_with_drain_with_dirty_item_hands_it_out_once_more() {
    let q: WorkQueue<String> = queue();
    q.add(s("foo"));
    let gotten = take(&q);
    q.add(s("foo"));
    let q2 = q.clone();
    let drainer = thread::spawn(move || q2.shut_down_with_drain());
    wait_until(&q, "drain blocked", |st| st.waiting_drains == 1);
    assert_eq!(q.get(), None, "nothing ready while `foo` is processing");
    q.done(&gotten);
    // `done` queued the dirty item again: it is handed out although shutdown began.
    let again = q.get().expect("the dirty item is handed out");
    assert_eq!(again, "foo");
    q.done(&again);
    assert_eq!(q.get(), None, "now really done");
    within("drain", move || drainer.join().unwrap());
}

/// An item holding a shared allocation, compared by content.
#[derive(Debug, Clone)]
struct Big(Arc<Vec<u8>>);

impl PartialEq for Big {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Big {}
impl Hash for Big {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

#[test]
fn test_garbage_collection_the_queue_keeps_no_copy_of_a_finished_item() {
    let q: WorkQueue<Big> = queue();
    let data = Arc::new(b"hello".to_vec());
    let weak: Weak<Vec<u8>> = Arc::downgrade(&data);
    q.add(Big(data));
    let o = take(&q);
    q.done(&o);
    drop(o);
    assert!(weak.upgrade().is_none(), "the queue still holds the item after done");
}

// ------------------------------------------------------------------------ delaying_queue_test.go

#[test]
fn test_simple_queue_a_delayed_item_is_added_after_its_delay_and_only_once() {
    let (q, clock) = fake_queue("simple");
    q.add_after(s("foo"), ms(50));
    assert_eq!(q.len(), 0, "should not have added");
    clock.step(ms(60));
    assert_eq!(q.len(), 1, "should have added");
    let item = take(&q);
    q.done(&item);
    clock.step(Duration::from_secs(10));
    assert_eq!(q.len(), 0, "should not have added again");
}

#[test]
fn test_deduping_a_parked_item_keeps_its_earliest_time() {
    let (q, clock) = fake_queue("dedup");
    q.add_after(s("foo"), ms(50));
    q.add_after(s("foo"), ms(70));
    assert_eq!(q.len(), 0);
    clock.step(ms(60));
    assert_eq!(q.len(), 1, "due at the first, earlier time");
    let item = take(&q);
    q.done(&item);
    clock.step(ms(20));
    assert_eq!(q.len(), 0, "the later time was not kept as a second entry");

    // Again, the earlier time arriving second.
    q.add_after(s("foo"), ms(50));
    q.add_after(s("foo"), ms(30));
    assert_eq!(q.len(), 0);
    clock.step(ms(40));
    assert_eq!(q.len(), 1, "the earlier time overrode the later one");
    let item = take(&q);
    q.done(&item);
    clock.step(ms(20));
    assert_eq!(q.len(), 0);
}

#[test]
fn test_add_two_fire_early_items_come_due_in_their_own_time_order() {
    let (q, clock) = fake_queue("two-fire-early");
    q.add_after(s("foo"), Duration::from_secs(1));
    q.add_after(s("bar"), ms(50));
    assert_eq!(q.len(), 0);
    clock.step(ms(60));
    assert_eq!(q.len(), 1);
    assert_eq!(take(&q), "bar");
    q.add_after(s("baz"), Duration::from_secs(2));
    clock.step(Duration::from_secs(1));
    assert_eq!(q.len(), 1);
    assert_eq!(take(&q), "foo");
    clock.step(Duration::from_secs(2));
    assert_eq!(q.len(), 1);
    assert_eq!(take(&q), "baz");
}

#[test]
fn test_copy_shifting_items_due_together_come_out_by_ready_time() {
    let (q, clock) = fake_queue("copy-shifting");
    q.add_after(s("foo"), Duration::from_secs(1));
    q.add_after(s("bar"), ms(500));
    q.add_after(s("baz"), ms(250));
    assert_eq!(q.len(), 0);
    clock.step(Duration::from_secs(2));
    assert_eq!(q.len(), 3);
    assert_eq!([take(&q), take(&q), take(&q)], [s("baz"), s("bar"), s("foo")]);
}

// ------------------------------------------------------------------------ rate_limiting_queue_test.go

#[test]
fn test_rate_limiting_queue_parks_each_item_for_its_own_backoff() {
    let clock = FakeClock::new();
    let q = WorkQueue::new(
        WorkQueueConfig::new("rate-limiting")
            .clock(clock.clone())
            .rate_limiter(ExponentialBackoff::new(ms(1), Duration::from_secs(1))),
    );
    // Upstream reads each parked entry's ready time; here the ready time is found by stepping
    // the clock to just before it and then onto it.
    let due_after = |item: &str, delay: Duration| {
        q.add_rate_limited(s(item));
        clock.step(delay - us(1));
        assert_eq!(q.len(), 0, "{item} due before {delay:?}");
        clock.step(us(1));
        assert_eq!(q.len(), 1, "{item} not due at {delay:?}");
        q.done(&take(&q));
    };
    due_after("one", ms(1));
    due_after("one", ms(2));
    assert_eq!(q.num_requeues(&s("one")), 2);
    due_after("two", ms(1));
    due_after("two", ms(2));
    q.forget(&s("one"));
    assert_eq!(q.num_requeues(&s("one")), 0);
    due_after("one", ms(1));
}

// ------------------------------------------------------------------------ default_rate_limiters_test.go

#[test]
fn test_item_exponential_failure_rate_limiter_doubles_per_item_and_forget_resets() {
    let l = ExponentialBackoff::new(ms(1), Duration::from_secs(1));
    let now = Instant::now();
    let one = s("one");
    let delays: Vec<Duration> = (0..5).map(|_| l.when(&one, now)).collect();
    assert_eq!(delays, [ms(1), ms(2), ms(4), ms(8), ms(16)]);
    assert_eq!(RateLimiter::<String>::retries(&l, &one), 5);
    let two = s("two");
    assert_eq!([l.when(&two, now), l.when(&two, now)], [ms(1), ms(2)]);
    assert_eq!(RateLimiter::<String>::retries(&l, &two), 2);
    RateLimiter::<String>::forget(&l, &one);
    assert_eq!(RateLimiter::<String>::retries(&l, &one), 0);
    assert_eq!(l.when(&one, now), ms(1));
}

#[test]
fn test_item_exponential_failure_rate_limiter_over_flow_saturates_at_the_maximum() {
    let now = Instant::now();
    let l = ExponentialBackoff::new(ms(1), Duration::from_secs(1000));
    for _ in 0..5 {
        l.when(&s("one"), now);
    }
    assert_eq!(l.when(&s("one"), now), ms(32));
    for _ in 0..1000 {
        l.when(&s("overflow1"), now);
    }
    assert_eq!(l.when(&s("overflow1"), now), Duration::from_secs(1000));

    let minute = Duration::from_secs(60);
    let l = ExponentialBackoff::new(minute, minute * 60 * 1000);
    for _ in 0..2 {
        l.when(&s("two"), now);
    }
    assert_eq!(l.when(&s("two"), now), minute * 4);
    for _ in 0..1000 {
        l.when(&s("overflow2"), now);
    }
    assert_eq!(l.when(&s("overflow2"), now), minute * 60 * 1000);
}

#[test]
fn test_item_fast_slow_rate_limiter_is_fast_for_n_attempts_then_slow() {
    let l = FastSlow::new(ms(5), Duration::from_secs(10), 3);
    let now = Instant::now();
    let one = s("one");
    let delays: Vec<Duration> = (0..5).map(|_| l.when(&one, now)).collect();
    let slow = Duration::from_secs(10);
    assert_eq!(delays, [ms(5), ms(5), ms(5), slow, slow]);
    assert_eq!(RateLimiter::<String>::retries(&l, &one), 5);
    let two = s("two");
    assert_eq!([l.when(&two, now), l.when(&two, now)], [ms(5), ms(5)]);
    assert_eq!(RateLimiter::<String>::retries(&l, &two), 2);
    RateLimiter::<String>::forget(&l, &one);
    assert_eq!(RateLimiter::<String>::retries(&l, &one), 0);
    assert_eq!(l.when(&one, now), ms(5));
}

#[test]
fn test_max_of_rate_limiter_takes_the_largest_delay_and_count() {
    let l: MaxOf<String> = MaxOf::new(vec![
        Box::new(FastSlow::new(ms(5), Duration::from_secs(3), 3)),
        Box::new(ExponentialBackoff::new(ms(1), Duration::from_secs(1))),
    ]);
    let now = Instant::now();
    let one = s("one");
    let delays: Vec<Duration> = (0..5).map(|_| l.when(&one, now)).collect();
    let three = Duration::from_secs(3);
    assert_eq!(delays, [ms(5), ms(5), ms(5), three, three]);
    assert_eq!(l.retries(&one), 5);
    let two = s("two");
    assert_eq!([l.when(&two, now), l.when(&two, now)], [ms(5), ms(5)]);
    assert_eq!(l.retries(&two), 2);
    l.forget(&one);
    assert_eq!(l.retries(&one), 0);
    assert_eq!(l.when(&one, now), ms(5));
}

/// Upstream's test limiter: `base` for the first `threshold` calls overall, `max` after.
#[derive(Debug)]
struct Step {
    count: std::sync::atomic::AtomicU32,
    threshold: u32,
    base: Duration,
    max: Duration,
}

impl RateLimiter<u32> for Step {
    fn when(&self, _item: &u32, _now: Instant) -> Duration {
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if n <= self.threshold { self.base } else { self.max }
    }
    fn forget(&self, _item: &u32) {}
    fn retries(&self, _item: &u32) -> u32 {
        0
    }
}

#[test]
fn test_with_max_wait_rate_limiter_caps_the_inner_delay() {
    let step = Step {
        count: Default::default(),
        threshold: 100,
        base: ms(5),
        max: Duration::from_secs(1000),
    };
    let l = WithMaxWait::new(step, Duration::from_secs(500));
    let now = Instant::now();
    for i in 0..100 {
        assert_eq!(l.when(&i, now), ms(5));
    }
    for i in 100..200 {
        assert_eq!(l.when(&i, now), Duration::from_secs(500));
    }
}

// ------------------------------------------------------------------------ metrics_test.go

fn metric_line(registry: &Registry, name: &str) -> String {
    let text = snapinformer_core::metrics::encode_text(registry).unwrap();
    let prefix = format!("snapinformer_workqueue_{name}{{name=\"test\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

#[test]
fn test_metrics_count_adds_depth_latency_work_and_unfinished_work_on_the_queue_clock() {
    let (q, clock) = {
        let clock = FakeClock::new();
        (WorkQueue::new(WorkQueueConfig::new("test").clock(clock.clone())), clock)
    };
    let mut registry = Registry::default();
    q.register_metrics(&mut registry);

    q.add(s("foo"));
    assert_eq!(metric_line(&registry, "adds_total"), "1");
    assert_eq!(metric_line(&registry, "depth"), "1");
    clock.step(us(50));
    let i = take(&q);
    assert_eq!(i, "foo");
    let st = q.stats();
    assert_eq!((st.queue_latency.count, st.queue_latency.max), (1, us(50)));

    // Added back while processing, five times: deduplicated to one add.
    for _ in 0..5 {
        q.add(i.clone());
    }
    assert_eq!(metric_line(&registry, "adds_total"), "2");
    assert_eq!(metric_line(&registry, "depth"), "1", "the item waiting for its done counts");
    clock.step(us(25));
    q.done(&i);
    let st = q.stats();
    assert_eq!((st.work_duration.count, st.work_duration.max), (1, us(25)));
    assert_eq!(metric_line(&registry, "depth"), "1");

    let i = take(&q);
    assert_eq!(i, "foo");
    let st = q.stats();
    assert_eq!(st.queue_latency.count, 2);
    assert_eq!(st.queue_latency.sum, us(75), "50 µs, then 25 µs since the re-add");
    clock.step(ms(1));
    assert_eq!(metric_line(&registry, "unfinished_work_seconds"), "0.001");
    assert_eq!(metric_line(&registry, "longest_running_processor_seconds"), "0.001");
    q.done(&i);
    let st = q.stats();
    assert_eq!(st.work_duration.count, 2);
    assert_eq!(st.work_duration.max, ms(1));
    assert_eq!(metric_line(&registry, "queue_duration_seconds_count"), "2");
    assert_eq!(metric_line(&registry, "work_duration_seconds_count"), "2");
}

/// Deliberate difference. Upstream updates the unfinished-work gauges from a ticker goroutine
/// and stops it at shutdown, so the gauges freeze at shutdown (`TestMetricShutdown` checks that
/// no update happens after it). Here there is no background updater at all: the gauges are
/// computed at scrape time, so after shutdown they keep telling the truth about items still
/// processing, which is when a stuck drain needs to be seen.
#[test]
fn test_metric_shutdown_no_background_updater_and_gauges_stay_true_after_shutdown() {
    let (q, clock) = fake_queue("test");
    q.add(s("foo"));
    let i = take(&q);
    q.shut_down();
    clock.step(Duration::from_secs(3600));
    let st = q.stats();
    assert_eq!(st.unfinished_work, Duration::from_secs(3600));
    assert_eq!(st.longest_running, Duration::from_secs(3600));
    q.done(&i);
    assert_eq!(q.stats().unfinished_work, Duration::ZERO);
}
