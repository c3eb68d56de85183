//! The reclaimer on its own (the store's writer uses it; so does the benchmarks' `locked-bg`):
//! where garbage is dropped, the bound, and that nothing handed over is lost.

mod common;

use std::{
    sync::{Arc, Mutex},
    thread::{self, ThreadId},
    time::Duration,
};

use common::wait_until;
use snapinformer_store::{ReclaimPriority, Reclaimer};

/// Garbage that records the thread it was dropped on.
struct Tracked {
    id: usize,
    dropped: Arc<Mutex<Vec<(usize, ThreadId)>>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.lock().unwrap().push((self.id, thread::current().id()));
    }
}

#[test]
fn garbage_is_dropped_on_the_reclaimer_thread_and_within_the_bound_only() {
    let dropped = Arc::new(Mutex::new(Vec::new()));
    // A NUL byte in the name is dropped, not a panic.
    let mut r = Reclaimer::<Tracked>::start("test\0reclaim", ReclaimPriority::Normal).unwrap();
    assert_eq!(r.priority(), ReclaimPriority::Normal);
    let me = thread::current().id();
    r.hand_over(Tracked { id: 1, dropped: dropped.clone() }, 10, 100);
    wait_until("the first hand-over is dropped", || dropped.lock().unwrap().len() == 1);
    assert_ne!(dropped.lock().unwrap()[0].1, me, "dropped on the reclaimer's thread");
    assert_eq!(r.backlog(), 0);
    // Over the limit: dropped at once, here.
    r.hand_over(Tracked { id: 2, dropped: dropped.clone() }, 101, 100);
    assert_eq!(dropped.lock().unwrap()[1], (2, me), "beyond the bound the caller drops it");
}

#[test]
fn every_hand_over_is_dropped_without_further_ones_whatever_the_pace() {
    let dropped = Arc::new(Mutex::new(Vec::new()));
    let mut r = Reclaimer::<Tracked>::start("test-reclaim", ReclaimPriority::Normal).unwrap();
    let mut id = 0;
    // Bursts of hand-overs, light and heavy, separated by pauses short and long (the thread
    // meets them busy, or asleep): after each burst, everything goes without another hand-over.
    for (i, pause_us) in
        [0u64, 3, 40, 900, 4_900, 5_100, 12_000].iter().cycle().take(70).enumerate()
    {
        let burst = 1 + i % 5;
        let weight = if i % 7 == 3 { 1000 } else { 1 };
        for _ in 0..burst {
            id += 1;
            r.hand_over(Tracked { id, dropped: dropped.clone() }, weight, usize::MAX);
        }
        let want = id;
        wait_until(&format!("burst {i} dropped"), || dropped.lock().unwrap().len() == want);
        thread::sleep(Duration::from_micros(*pause_us));
    }
    assert_eq!(r.backlog(), 0);
}

#[test]
fn dropping_the_reclaimer_waits_until_everything_handed_over_is_dropped() {
    let dropped = Arc::new(Mutex::new(Vec::new()));
    let mut r = Reclaimer::<Tracked>::start("test-reclaim", ReclaimPriority::Normal).unwrap();
    for id in 0..500 {
        r.hand_over(Tracked { id, dropped: dropped.clone() }, 1, usize::MAX);
    }
    drop(r);
    let got = dropped.lock().unwrap();
    assert_eq!(got.len(), 500);
    let mut ids: Vec<usize> = got.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..500).collect::<Vec<_>>());
}
