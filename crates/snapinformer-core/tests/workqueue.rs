//! The work queue's rules as behaviour tests: deduplication, requeue after `done`, delays,
//! shutdown, rate limiters, concurrency and metrics.
//!
//! Anything that could deadlock runs on a thread joined with a bound ([`within`]). Rate limiters
//! are tested as pure functions of explicit `Instant`s; real sleeps are a few milliseconds and
//! only lower bounds on timing are asserted.

use std::{
    collections::HashSet,
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use prometheus_client::registry::Registry;
use snapinformer_core::workqueue::{
    Error, ExponentialBackoff, MaxOf, RateLimiter, TokenBucket, WorkQueue, WorkQueueConfig,
    default_controller_rate_limiter, register_metrics,
};

/// Runs `f` on its own thread and returns its result, failing the test if it takes longer than
/// 20 s (a deadlock) or panics.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no result within 20 s (deadlock?)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

fn queue(name: &str) -> WorkQueue<String> {
    WorkQueue::new(WorkQueueConfig::new(name))
}

fn s(v: &str) -> String {
    v.to_owned()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Takes an item that must already be ready (no waiting).
fn take(q: &WorkQueue<String>) -> String {
    q.get_timeout(Duration::ZERO).expect("queue shut down").expect("no ready item")
}

// ---------------------------------------------------------------- add, get, done

#[test]
fn an_item_added_many_times_before_a_get_is_queued_once() {
    let q = queue("dedup");
    q.add(s("a"));
    q.add(s("b"));
    q.add(s("a"));
    q.add(s("a"));
    assert_eq!(q.len(), 2);
    let st = q.stats();
    assert_eq!((st.adds, st.deduplicated), (2, 2));
    assert_eq!(take(&q), "a");
    assert_eq!(take(&q), "b");
    assert_eq!(q.get_timeout(Duration::ZERO), Ok(None));
    assert!(q.is_empty());
}

#[test]
fn items_are_handed_out_first_in_first_out() {
    let q = queue("fifo");
    for k in ["c", "a", "b"] {
        q.add(s(k));
    }
    let got: Vec<String> = (0..3).map(|_| take(&q)).collect();
    assert_eq!(got, ["c", "a", "b"]);
}

#[test]
fn an_item_re_added_while_processing_is_requeued_once_after_done() {
    let q = queue("requeue");
    q.add(s("a"));
    let a = take(&q);
    q.add(s("a"));
    q.add(s("a"));
    assert_eq!(q.len(), 0, "not handed out to a second worker while processing");
    assert_eq!(q.get_timeout(Duration::ZERO), Ok(None));
    let st = q.stats();
    assert_eq!((st.processing, st.requeue_pending), (1, 1));
    q.done(&a);
    assert_eq!(q.len(), 1, "requeued once after done");
    assert_eq!(take(&q), "a");
    q.done(&a);
    assert!(q.is_empty());
    assert_eq!(q.stats().processing, 0);
}

#[test]
fn an_item_not_re_added_while_processing_is_gone_after_done() {
    let q = queue("gone");
    q.add(s("a"));
    let a = take(&q);
    q.done(&a);
    assert!(q.is_empty());
    assert_eq!(q.stats().handed_out, 1);
}

#[test]
fn done_for_an_item_not_being_processed_does_nothing() {
    let q = queue("stray-done");
    q.add(s("a"));
    q.done(&s("a"));
    q.done(&s("zzz"));
    assert_eq!(q.len(), 1);
    assert_eq!(q.stats().work_duration.count, 0);
}

#[test]
fn get_blocks_until_an_item_is_added() {
    let q = queue("block-add");
    let q2 = q.clone();
    let getter = thread::spawn(move || q2.get());
    thread::sleep(ms(20));
    q.add(s("x"));
    let got = within("blocked get", move || getter.join().unwrap());
    assert_eq!(got.as_deref(), Some("x"));
}

#[test]
fn stats_report_items_being_processed_and_their_durations() {
    let q = queue("stats");
    q.add(s("a"));
    q.add(s("b"));
    let a = take(&q);
    thread::sleep(ms(5));
    let st = q.stats();
    assert_eq!((st.depth, st.processing), (1, 1));
    assert!(st.longest_running >= ms(5));
    assert!(st.unfinished_work >= st.longest_running);
    assert_eq!(st.queue_latency.count, 1);
    q.done(&a);
    let st = q.stats();
    assert_eq!(st.processing, 0);
    assert_eq!(st.longest_running, Duration::ZERO);
    assert_eq!(st.work_duration.count, 1);
    assert!(st.work_duration.max >= ms(5));
    assert!(st.work_duration.mean() >= ms(5));
}

// ---------------------------------------------------------------- delays

#[test]
fn add_after_with_zero_delay_adds_at_once() {
    let q = queue("zero-delay");
    q.add_after(s("a"), Duration::ZERO);
    assert_eq!(take(&q), "a");
}

#[test]
fn delayed_items_come_out_in_ready_time_order() {
    let q = queue("delay-order");
    q.add_after(s("late"), ms(30));
    q.add_after(s("early"), ms(10));
    q.add_after(s("middle"), ms(20));
    assert_eq!(q.stats().waiting, 3);
    let got = within("three delayed gets", move || {
        (0..3).map(|_| q.get().expect("item")).collect::<Vec<_>>()
    });
    assert_eq!(got, ["early", "middle", "late"]);
}

#[test]
fn adding_a_parked_item_again_keeps_the_earlier_time() {
    let q = queue("earlier-wins");
    // Later time second: the earlier one stays.
    q.add_after(s("a"), ms(5));
    q.add_after(s("a"), Duration::from_secs(3600));
    // Earlier time second: the item moves earlier.
    q.add_after(s("b"), Duration::from_secs(3600));
    q.add_after(s("b"), ms(5));
    assert_eq!(q.stats().waiting, 2, "one parked entry per item");
    let q2 = q.clone();
    let mut got = within("gets of parked items", move || vec![q2.get(), q2.get()]);
    got.sort();
    assert_eq!(got, [Some(s("a")), Some(s("b"))]);
    let st = q.stats();
    assert_eq!((st.waiting, st.depth), (0, 0), "no stale copy is left behind");
}

#[test]
fn get_blocks_until_a_delayed_item_is_due() {
    let q = queue("delay-block");
    let start = Instant::now();
    q.add_after(s("a"), ms(50));
    assert_eq!(q.get_timeout(Duration::ZERO), Ok(None), "not ready yet");
    assert_eq!(q.len(), 0);
    let got = within("blocked get", move || q.get());
    assert_eq!(got.as_deref(), Some("a"));
    assert!(start.elapsed() >= ms(50), "handed out no earlier than its time");
}

#[test]
fn a_getter_already_waiting_picks_up_a_delayed_item_added_later() {
    let q = queue("delay-rewake");
    let q2 = q.clone();
    let getter = thread::spawn(move || q2.get());
    thread::sleep(ms(10));
    q.add_after(s("a"), Duration::from_secs(3600));
    q.add_after(s("b"), ms(10));
    let got = within("waiting getter", move || getter.join().unwrap());
    assert_eq!(got.as_deref(), Some("b"));
}

#[test]
fn get_timeout_returns_none_when_nothing_becomes_ready_in_time() {
    let q = queue("poll");
    let start = Instant::now();
    assert_eq!(q.get_timeout(ms(20)), Ok(None));
    assert!(start.elapsed() >= ms(20));
    q.add_after(s("a"), ms(5));
    let got = within("poll for a delayed item", move || q.get_timeout(Duration::from_secs(10)));
    assert_eq!(got, Ok(Some(s("a"))));
}

#[test]
fn a_parked_item_due_while_the_same_item_is_queued_is_deduplicated() {
    let q = queue("parked-and-queued");
    q.add_after(s("a"), ms(5));
    q.add(s("a"));
    thread::sleep(ms(10));
    assert_eq!(q.len(), 1);
    assert_eq!(q.stats().deduplicated, 1);
}

#[test]
fn add_rate_limited_delays_by_the_limiter_and_forget_resets_requeues() {
    let q = WorkQueue::new(
        WorkQueueConfig::new("rate-limited")
            .rate_limiter(ExponentialBackoff::new(ms(10), Duration::from_secs(1))),
    );
    let start = Instant::now();
    q.add_rate_limited(s("a"));
    assert_eq!(q.num_requeues(&s("a")), 1);
    assert_eq!(q.stats().retries, 1);
    let q2 = q.clone();
    assert_eq!(within("rate-limited get", move || q2.get()), Some(s("a")));
    assert!(start.elapsed() >= ms(10));
    q.add_rate_limited(s("a"));
    assert_eq!(q.num_requeues(&s("a")), 2);
    q.forget(&s("a"));
    assert_eq!(q.num_requeues(&s("a")), 0);
}

// ---------------------------------------------------------------- shutdown

#[test]
fn shut_down_wakes_every_blocked_getter() {
    let q = queue("shutdown-wakes");
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            thread::spawn(move || q.get())
        })
        .collect();
    thread::sleep(ms(20));
    q.shut_down();
    let got = within("getters after shutdown", move || {
        getters.into_iter().map(|g| g.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(got, [None, None, None]);
    assert!(q.is_shutting_down());
}

#[test]
fn shut_down_wakes_a_getter_waiting_for_a_parked_item() {
    let q = queue("shutdown-parked");
    q.add_after(s("a"), Duration::from_secs(3600));
    let q2 = q.clone();
    let getter = thread::spawn(move || q2.get());
    thread::sleep(ms(10));
    q.shut_down();
    assert_eq!(within("getter", move || getter.join().unwrap()), None);
    assert_eq!(q.stats().discarded_delayed, 1, "parked items are discarded");
}

#[test]
fn after_shut_down_queued_items_are_still_handed_out_then_none() {
    let q = queue("shutdown-drains");
    q.add(s("a"));
    q.add(s("b"));
    q.shut_down();
    assert_eq!(q.get().as_deref(), Some("a"));
    assert_eq!(q.get().as_deref(), Some("b"));
    assert_eq!(q.get(), None);
    assert_eq!(q.get_timeout(Duration::from_secs(10)), Err(Error::ShutDown));
}

#[test]
fn adds_after_shut_down_are_ignored_and_counted() {
    let q = queue("shutdown-ignores");
    q.shut_down();
    q.add(s("a"));
    q.add_after(s("b"), ms(1));
    q.add_rate_limited(s("c"));
    let st = q.stats();
    assert_eq!((st.depth, st.waiting, st.adds), (0, 0, 0));
    assert_eq!(st.ignored_after_shutdown, 3);
    assert_eq!(q.num_requeues(&s("c")), 0, "the limiter is not consulted");
    assert_eq!(q.get(), None);
}

#[test]
fn shut_down_with_drain_waits_for_items_being_processed() {
    let q = queue("drain");
    q.add(s("a"));
    q.add(s("b"));
    let a = take(&q);
    let drained = Arc::new(AtomicBool::new(false));
    let drainer = {
        let (q, drained) = (q.clone(), drained.clone());
        thread::spawn(move || {
            q.shut_down_with_drain();
            drained.store(true, Ordering::SeqCst);
        })
    };
    thread::sleep(ms(30));
    assert!(!drained.load(Ordering::SeqCst), "returned while `a` was still processing");
    assert!(q.is_shutting_down());
    q.add(s("c"));
    assert_eq!(q.stats().ignored_after_shutdown, 1);
    // A queued item is still handed out during the drain, and waited for too.
    let b = take(&q);
    q.done(&a);
    thread::sleep(ms(10));
    assert!(!drained.load(Ordering::SeqCst), "returned while `b` was still processing");
    q.done(&b);
    within("drain", move || drainer.join().unwrap());
    assert!(drained.load(Ordering::SeqCst));
    assert_eq!(q.get(), None);
}

#[test]
fn shut_down_with_drain_returns_at_once_when_nothing_is_processing() {
    let q = queue("drain-idle");
    q.add(s("a"));
    let q2 = q.clone();
    within("drain", move || q2.shut_down_with_drain());
    assert_eq!(q.get().as_deref(), Some("a"));
}

#[test]
fn shut_down_with_drain_timeout_reports_items_still_processing() {
    let q = queue("drain-timeout");
    q.add(s("a"));
    let a = take(&q);
    assert!(!q.shut_down_with_drain_timeout(ms(10)));
    q.done(&a);
    assert!(q.shut_down_with_drain_timeout(ms(10)));
}

#[test]
fn shut_down_ends_a_drain_waiting_in_another_thread() {
    let q = queue("drain-abort");
    q.add(s("a"));
    let _a = take(&q);
    let q2 = q.clone();
    let drainer = thread::spawn(move || q2.shut_down_with_drain());
    thread::sleep(ms(10));
    q.shut_down();
    within("drain", move || drainer.join().unwrap());
}

// ---------------------------------------------------------------- rate limiters (pure)

#[test]
fn exponential_backoff_doubles_from_base_caps_at_max_and_forget_resets() {
    let b = ExponentialBackoff::new(ms(5), ms(100));
    let now = Instant::now();
    let item = s("a");
    let delays: Vec<Duration> = (0..8).map(|_| b.when(&item, now)).collect();
    assert_eq!(delays, [ms(5), ms(10), ms(20), ms(40), ms(80), ms(100), ms(100), ms(100)]);
    assert_eq!(RateLimiter::<String>::retries(&b, &item), 8);
    RateLimiter::<String>::forget(&b, &item);
    assert_eq!(RateLimiter::<String>::retries(&b, &item), 0);
    assert_eq!(b.when(&item, now), ms(5), "starts over after forget");
    assert_eq!(b.tracked_items(), 1);
}

#[test]
fn exponential_backoff_counts_each_item_separately() {
    let b = ExponentialBackoff::new(ms(1), Duration::from_secs(1));
    let now = Instant::now();
    assert_eq!(b.when(&s("a"), now), ms(1));
    assert_eq!(b.when(&s("a"), now), ms(2));
    assert_eq!(b.when(&s("b"), now), ms(1));
    assert_eq!(b.when(&7u32, now), ms(1), "items of another type have their own counts");
    RateLimiter::<String>::forget(&b, &s("a"));
    assert_eq!(b.when(&s("b"), now), ms(2), "forgetting one item leaves the others");
}

#[test]
fn exponential_backoff_saturates_at_max_after_very_many_failures() {
    let b = ExponentialBackoff::new(Duration::from_secs(1), Duration::from_secs(1000));
    assert_eq!(b.delay_for(9), Duration::from_secs(512));
    assert_eq!(b.delay_for(10), Duration::from_secs(1000));
    assert_eq!(b.delay_for(63), Duration::from_secs(1000));
    assert_eq!(b.delay_for(u32::MAX), Duration::from_secs(1000));
}

fn close(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= Duration::from_micros(1)
}

#[test]
fn token_bucket_allows_the_burst_then_spaces_retries_one_per_1_over_qps() {
    let t = TokenBucket::new(10.0, 3);
    let t0 = Instant::now();
    let item = s("any");
    let first: Vec<Duration> = (0..3).map(|_| t.when(&item, t0)).collect();
    assert_eq!(first, [Duration::ZERO; 3], "the burst");
    let spaced: Vec<Duration> = (0..3).map(|_| t.when(&item, t0)).collect();
    for (got, want) in spaced.iter().zip([ms(100), ms(200), ms(300)]) {
        assert!(close(*got, want), "{got:?} != {want:?}");
    }
    // 300 ms later the three reserved tokens exist and are spent: the next waits 100 ms.
    assert!(close(t.when(&item, t0 + ms(300)), ms(100)));
    // After a long pause the bucket is full again, but never above the burst.
    let later = t0 + Duration::from_secs(10);
    let refilled: Vec<Duration> = (0..4).map(|_| t.when(&item, later)).collect();
    assert_eq!(&refilled[..3], &[Duration::ZERO; 3]);
    assert!(close(refilled[3], ms(100)));
    assert_eq!(RateLimiter::<String>::retries(&t, &item), 0);
}

#[test]
fn token_bucket_is_shared_over_all_items() {
    let t = TokenBucket::new(1.0, 1);
    let t0 = Instant::now();
    assert_eq!(t.when(&s("a"), t0), Duration::ZERO);
    assert!(close(t.when(&s("b"), t0), Duration::from_secs(1)));
}

#[test]
fn token_bucket_ignores_a_now_earlier_than_one_seen() {
    let t = TokenBucket::new(10.0, 1);
    let t0 = Instant::now();
    assert_eq!(t.when(&0u8, t0 + ms(500)), Duration::ZERO);
    assert!(close(t.when(&0u8, t0), ms(100)), "no refill from a time in the past");
}

#[test]
fn token_bucket_edge_rates() {
    let unlimited = TokenBucket::new(f64::INFINITY, 1);
    let t0 = Instant::now();
    assert!((0..1000).all(|_| unlimited.when(&0u8, t0).is_zero()));
    let never = TokenBucket::new(0.0, 2);
    assert!(never.when(&0u8, t0).is_zero());
    assert!(never.when(&0u8, t0).is_zero());
    assert_eq!(never.when(&0u8, t0 + Duration::from_secs(100)), Duration::MAX);
}

#[test]
fn max_of_takes_the_largest_delay_and_reaches_every_limiter() {
    let m: MaxOf<String> = MaxOf::new(vec![
        Box::new(ExponentialBackoff::new(ms(1), Duration::from_secs(60))),
        Box::new(ExponentialBackoff::new(ms(3), ms(5))),
    ]);
    let now = Instant::now();
    let a = s("a");
    let delays: Vec<Duration> = (0..5).map(|_| m.when(&a, now)).collect();
    assert_eq!(delays, [ms(3), ms(5), ms(5), ms(8), ms(16)]);
    assert_eq!(m.retries(&a), 5);
    m.forget(&a);
    assert_eq!(m.retries(&a), 0);
    assert_eq!(m.when(&a, now), ms(3), "both limiters were reset");
    let empty: MaxOf<String> = MaxOf::new(Vec::new());
    assert!(empty.is_empty());
    assert_eq!(empty.when(&a, now), Duration::ZERO);
}

#[test]
fn max_of_combines_a_token_bucket_with_a_backoff() {
    let m = MaxOf::new(vec![Box::new(ExponentialBackoff::new(ms(1), ms(1)))])
        .with(TokenBucket::new(1.0, 1));
    let now = Instant::now();
    assert_eq!(m.len(), 2);
    assert_eq!(m.when(&s("a"), now), ms(1), "burst token free, backoff wins");
    assert!(close(m.when(&s("b"), now), Duration::from_secs(1)), "bucket empty, bucket wins");
}

#[test]
fn the_default_controller_rate_limiter_is_5ms_to_1000s_and_10_qps_burst_100() {
    let d = default_controller_rate_limiter::<String>();
    let now = Instant::now();
    let a = s("a");
    assert_eq!(d.when(&a, now), ms(5));
    assert_eq!(d.when(&a, now), ms(10));
    for _ in 2..30 {
        d.when(&a, now);
    }
    // 30 tokens used; the backoff of `a` is capped.
    assert_eq!(d.when(&a, now), Duration::from_secs(1000));
    // 69 tokens left at `now`, then 100 ms apart.
    let b = s("b");
    for _ in 0..69 {
        assert_eq!(d.when(&b, now), ms(5));
        d.forget(&b);
    }
    assert!(close(d.when(&b, now), ms(100)));
    assert!(close(d.when(&s("c"), now), ms(200)));
}

// ---------------------------------------------------------------- concurrency

/// Tiny deterministic generator for the stress test.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn many_producers_and_workers_never_process_one_item_concurrently_and_miss_no_add() {
    const KEYS: usize = 40;
    const PRODUCERS: usize = 4;
    const WORKERS: usize = 4;
    const ADDS: usize = 3000;

    struct Shared {
        q: WorkQueue<usize>,
        in_flight: Vec<AtomicBool>,
        /// Per key: bumped by a producer just before each add.
        added: Vec<AtomicU64>,
        /// Per key: the newest `added` value a worker saw when it started processing the key.
        seen: Vec<AtomicU64>,
        overlaps: AtomicUsize,
        processed: AtomicUsize,
    }
    let sh = Arc::new(Shared {
        q: WorkQueue::new(
            WorkQueueConfig::new("stress")
                .rate_limiter(ExponentialBackoff::new(Duration::from_micros(200), ms(2))),
        ),
        in_flight: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
        added: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        seen: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        overlaps: AtomicUsize::new(0),
        processed: AtomicUsize::new(0),
    });

    let sh2 = sh.clone();
    let stats = within("stress test", move || {
        let sh = sh2;
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let sh = sh.clone();
                thread::spawn(move || {
                    let mut rng = 0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1);
                    while let Some(k) = sh.q.get() {
                        if sh.in_flight[k].swap(true, Ordering::SeqCst) {
                            sh.overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        sh.seen[k].fetch_max(sh.added[k].load(Ordering::SeqCst), Ordering::SeqCst);
                        if xorshift(&mut rng).is_multiple_of(4) {
                            thread::yield_now();
                        }
                        // Some reconciles fail and are retried a few times with backoff.
                        if xorshift(&mut rng).is_multiple_of(8) && sh.q.num_requeues(&k) < 3 {
                            sh.q.add_rate_limited(k);
                        } else {
                            sh.q.forget(&k);
                        }
                        sh.processed.fetch_add(1, Ordering::SeqCst);
                        sh.in_flight[k].store(false, Ordering::SeqCst);
                        sh.q.done(&k);
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let sh = sh.clone();
                thread::spawn(move || {
                    let mut rng = 0xD1B5_4A32_D192_ED03 ^ (p as u64 + 1);
                    for i in 0..ADDS {
                        let k = (xorshift(&mut rng) % KEYS as u64) as usize;
                        sh.added[k].fetch_add(1, Ordering::SeqCst);
                        if i.is_multiple_of(10) {
                            sh.q.add_after(k, Duration::from_micros(xorshift(&mut rng) % 500));
                        } else {
                            sh.q.add(k);
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        // Wait until everything queued, parked or processing is finished.
        loop {
            let st = sh.q.stats();
            if st.depth == 0 && st.waiting == 0 && st.processing == 0 {
                break;
            }
            thread::sleep(ms(1));
        }
        sh.q.shut_down_with_drain();
        for w in workers {
            w.join().unwrap();
        }
        sh.q.stats()
    });

    assert_eq!(sh.overlaps.load(Ordering::SeqCst), 0, "an item was processed by two workers");
    let missed: Vec<usize> = (0..KEYS)
        .filter(|&k| sh.seen[k].load(Ordering::SeqCst) != sh.added[k].load(Ordering::SeqCst))
        .collect();
    assert!(missed.is_empty(), "keys not processed after their last add: {missed:?}");
    let processed = sh.processed.load(Ordering::SeqCst) as u64;
    assert_eq!(stats.handed_out, processed);
    assert_eq!(stats.work_duration.count, processed);
    assert!(processed <= (PRODUCERS * ADDS) as u64 + stats.retries, "deduplication");
    assert!(processed >= KEYS as u64 / 2);
}

#[test]
fn workers_of_distinct_items_run_in_parallel() {
    let q = queue("parallel");
    q.add(s("a"));
    q.add(s("b"));
    let (tx, rx) = mpsc::channel();
    let both_hold_one = Arc::new(Barrier::new(2));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (q, tx, both) = (q.clone(), tx.clone(), both_hold_one.clone());
            thread::spawn(move || {
                let k = q.get().unwrap();
                // Holds its item until the other worker holds one too: no queue lock is held
                // meanwhile, so the other `get` goes through.
                both.wait();
                assert_eq!(q.stats().processing, 2);
                tx.send(k.clone()).unwrap();
                both.wait();
                q.done(&k);
            })
        })
        .collect();
    let got: HashSet<String> =
        within("two workers", move || (0..2).map(|_| rx.recv().unwrap()).collect());
    assert_eq!(got, HashSet::from([s("a"), s("b")]));
    within("workers", move || workers.into_iter().for_each(|w| w.join().unwrap()));
}

// ---------------------------------------------------------------- metrics

#[test]
fn metrics_render_in_the_text_exposition_format() {
    let q = queue("statefulset");
    let mut registry = Registry::default();
    register_metrics(&q, &mut registry);
    q.add(s("a"));
    q.add(s("b"));
    q.add(s("b"));
    let a = take(&q);
    q.done(&a);
    let _b = take(&q);
    q.add_after(s("c"), Duration::from_secs(3600));
    q.add(s("d"));

    let text = snapinformer_core::metrics::encode_text(&registry).unwrap();
    for line in [
        "snapinformer_workqueue_depth{name=\"statefulset\"} 1",
        "snapinformer_workqueue_adds_total{name=\"statefulset\"} 3",
        "snapinformer_workqueue_retries_total{name=\"statefulset\"} 1",
        "snapinformer_workqueue_queue_duration_seconds_count{name=\"statefulset\"} 2",
        "snapinformer_workqueue_work_duration_seconds_count{name=\"statefulset\"} 1",
        "snapinformer_workqueue_waiting{name=\"statefulset\"} 1",
        "snapinformer_workqueue_processing{name=\"statefulset\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    for family in [
        "# TYPE snapinformer_workqueue_depth gauge",
        "# TYPE snapinformer_workqueue_adds counter",
        "# TYPE snapinformer_workqueue_retries counter",
        "# TYPE snapinformer_workqueue_queue_duration_seconds histogram",
        "# TYPE snapinformer_workqueue_work_duration_seconds histogram",
        "# TYPE snapinformer_workqueue_unfinished_work_seconds gauge",
        "# TYPE snapinformer_workqueue_longest_running_processor_seconds gauge",
    ] {
        assert!(text.contains(family), "missing {family:?} in:\n{text}");
    }
    assert!(text.contains("snapinformer_workqueue_unfinished_work_seconds{name=\"statefulset\"}"));
    assert!(text.contains(
        "snapinformer_workqueue_longest_running_processor_seconds{name=\"statefulset\"}"
    ));
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn two_queues_register_side_by_side_under_their_names() {
    let sts = queue("statefulset");
    let ds = queue("daemonset");
    let mut registry = Registry::default();
    sts.register_metrics(&mut registry);
    ds.register_metrics(&mut registry);
    ds.add(s("x"));
    let text = snapinformer_core::metrics::encode_text(&registry).unwrap();
    assert!(text.lines().any(|l| l == "snapinformer_workqueue_depth{name=\"daemonset\"} 1"));
    assert!(text.lines().any(|l| l == "snapinformer_workqueue_depth{name=\"statefulset\"} 0"));
}

#[test]
fn a_dropped_queue_renders_no_gauges() {
    let mut registry = Registry::default();
    {
        let q = queue("gone");
        register_metrics(&q, &mut registry);
    }
    let text = snapinformer_core::metrics::encode_text(&registry).unwrap();
    assert!(!text.contains("snapinformer_workqueue_depth{"));
}
