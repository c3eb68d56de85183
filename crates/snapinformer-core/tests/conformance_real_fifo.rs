//! Conformance: client-go v0.37.2 `tools/cache/the_real_fifo_test.go`, case by case, on our
//! `RealFifo` (v0.34.0 has a subset of these cases and none that v0.37.2 dropped).
//!
//! Each test is named `test_real_fifo_<client-go test>[_<case>]`. Translation rules: client-go's
//! `Pop(f)` is one `pop_batch(1)` followed by `done`; its `PopBatch` with a batch size is
//! `pop_batch(size)`; `getItems()` is `items()`; objects are keyed by name through a custom key
//! function. client-go's atomic mode (`AtomicEvents`, on by default since 1.36) queues a relist
//! as one `ReplacedAll` delta, a resync as one `SyncAll` and a bookmark as a `Bookmark` delta;
//! we have no such deltas (a relist is its tombstones and `Replaced` deltas, a bookmark a
//! resource-version marker), so those cases check what the atomic deltas are for: order, and
//! the resource version each relist or bookmark makes the store report.

mod fifo_helpers;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use fifo_helpers::{
    FifoObj, Seen, access, d, drain, known, mk, options, pop, pop_max, pop_newest, pop_would_wait,
    real_fifo, seen_all, tomb, try_pop_now,
};
use snapinformer_core::{
    DeletedFinalStateUnknown, DeltaObject, DeltaType::*, PoppedBatch, Queue, RealFifo, queue::Error,
};
use snapinformer_store::{KeyFn, TransformFn};

#[tokio::test]
async fn test_real_fifo_basic() {
    let f = Arc::new(real_fifo(&[]));
    const AMOUNT: i64 = 500;
    let producers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|prefix| {
            let f = f.clone();
            std::thread::spawn(move || {
                for i in 0..AMOUNT {
                    f.add(mk(&format!("{prefix}{i}"), i + 1)).unwrap();
                }
            })
        })
        .collect();
    let (mut last_a, mut last_b) = (0, 0);
    for _ in 0..AMOUNT * 2 {
        let o = pop_newest(&*f).await;
        let last = if o.name.starts_with('a') { &mut last_a } else { &mut last_b };
        assert!(o.val > *last, "{} popped out of order after {}", o.val, *last);
        *last = o.val;
    }
    assert_eq!((last_a, last_b), (AMOUNT, AMOUNT));
    for p in producers {
        p.join().unwrap();
    }
}

#[tokio::test]
async fn test_real_fifo_replace_with_delete_delta_in() {
    let (old, new) = (mk("foo", 1), mk("foo", 2));
    let f = real_fifo(std::slice::from_ref(&old));
    f.delete(old.clone()).unwrap();
    f.replace(vec![new.clone()], "").unwrap();
    assert_eq!(seen_all(&f.items()), vec![d(Deleted, &old), d(Replaced, &new)]);
}

/// One case of `TestRealFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue` (client-go runs it
/// with empty known objects only): popping everything yields `expected`.
async fn only_in_queue(ops: impl Fn(&RealFifo<FifoObj>), expected: Vec<Seen>) {
    let f = real_fifo(&[]);
    ops(&f);
    assert_eq!(drain(&f).await, expected);
    assert!(f.items().is_empty());
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_for_objects_only_in_queue_added_object_should_be_deleted_on_replace()
 {
    let obj = mk("foo", 2);
    let ops = |f: &RealFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.replace(vec![], "0").unwrap();
    };
    only_in_queue(ops, vec![d(Added, &obj), tomb("foo", Some(&obj))]).await;
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_for_objects_only_in_queue_deleted_object_should_have_only_a_single_delete()
 {
    let obj = mk("foo", 2);
    let ops = |f: &RealFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.delete(obj.clone()).unwrap();
        f.replace(vec![], "0").unwrap();
    };
    only_in_queue(ops, vec![d(Added, &obj), d(Deleted, &obj)]).await;
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_for_objects_only_in_queue_synced_objects_should_have_a_single_delete()
 {
    let obj = mk("foo", 2);
    let ops = |f: &RealFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.replace(vec![obj.clone()], "0").unwrap();
        f.replace(vec![obj.clone()], "0").unwrap();
        f.replace(vec![], "0").unwrap();
    };
    let expected =
        vec![d(Added, &obj), d(Replaced, &obj), d(Replaced, &obj), tomb("foo", Some(&obj))];
    only_in_queue(ops, expected).await;
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_for_objects_only_in_queue_added_objects_should_have_a_single_delete_on_multiple_replaces()
 {
    let obj = mk("foo", 2);
    let ops = |f: &RealFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.replace(vec![], "0").unwrap();
        f.replace(vec![], "1").unwrap();
    };
    only_in_queue(ops, vec![d(Added, &obj), tomb("foo", Some(&obj))]).await;
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_for_objects_only_in_queue_added_and_deleted_and_added_object_should_be_deleted()
 {
    let (obj, obj_v2) = (mk("foo", 2), mk("foo", 3));
    let ops = |f: &RealFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.delete(obj.clone()).unwrap();
        f.add(obj_v2.clone()).unwrap();
        f.replace(vec![], "0").unwrap();
    };
    let expected =
        vec![d(Added, &obj), d(Deleted, &obj), d(Added, &obj_v2), tomb("foo", Some(&obj_v2))];
    only_in_queue(ops, expected).await;
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_for_objects_only_in_queue_bookmark_object_should_not_be_added_without_atomic()
 {
    let ops = |f: &RealFifo<FifoObj>| {
        f.bookmark("123").unwrap();
        f.replace(vec![], "0").unwrap();
        f.replace(vec![], "1").unwrap();
    };
    only_in_queue(ops, vec![]).await;
}

#[tokio::test]
async fn test_real_fifo_add_update() {
    let f = real_fifo(&[]);
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    // Unlike a DeltaFifo's newest-per-key view, every delta is there.
    let want =
        vec![d(Added, &mk("foo", 10)), d(Updated, &mk("foo", 12)), d(Deleted, &mk("foo", 15))];
    assert_eq!(seen_all(&f.items()), want);
    for want in [10, 12, 15] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
    assert!(pop_would_wait(&f), "no fourth value");
    assert!(f.items().is_empty());
    f.close();
}

#[tokio::test]
async fn test_real_fifo_transformer() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let xfrm = TransformFn::new(move |o: Arc<FifoObj>| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(FifoObj { xfrm: o.xfrm + 1, ..(*o).clone() }))
    });
    let f = RealFifo::with_options(access(), known(&[]), options().transform(xfrm));
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 11)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    f.replace(vec![], "").unwrap();
    f.add(mk("bar", 16)).unwrap();
    f.replace(vec![], "").unwrap();
    let x = |name: &str, val: i64| Arc::new(FifoObj { name: name.into(), val, xfrm: 1 });
    // Nothing is merged: bar is tombstoned by both relists, each time with its newest state.
    let want = vec![
        d(Added, &x("foo", 10)),
        d(Added, &x("bar", 11)),
        d(Updated, &x("foo", 12)),
        d(Deleted, &x("foo", 15)),
        tomb("bar", Some(&x("bar", 11))),
        d(Added, &x("bar", 16)),
        tomb("bar", Some(&x("bar", 16))),
    ];
    assert_eq!(seen_all(&f.items()), want);
    assert_eq!(calls.load(Ordering::SeqCst), 5, "each queued object transformed once");
    let mut popped = Vec::new();
    for _ in 0..want.len() {
        popped.extend(seen_all(&pop(&f).await.deltas));
    }
    assert_eq!(popped, want);
}

#[tokio::test]
async fn test_real_fifo_enqueueing_no_lister() {
    let f = real_fifo(&[]);
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("bar", 15)).unwrap();
    f.add(mk("qux", 17)).unwrap();
    f.delete(mk("qux", 18)).unwrap();
    // A RealFifo queues every delete, known or not.
    f.delete(mk("baz", 20)).unwrap();
    for want in [10, 15, 17, 18, 20] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
    assert!(f.items().is_empty());
}

#[tokio::test]
async fn test_real_fifo_enqueueing_with_lister() {
    let f = real_fifo(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("bar", 15)).unwrap();
    f.delete(mk("baz", 20)).unwrap();
    for want in [10, 15, 20] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
    assert!(f.items().is_empty());
}

#[tokio::test]
async fn test_real_fifo_add_replace() {
    let f = real_fifo(&[]);
    f.add(mk("foo", 10)).unwrap();
    f.replace(vec![mk("foo", 15)], "0").unwrap();
    for want in [10, 15] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
    assert!(pop_would_wait(&f), "no third value");
    assert!(f.items().is_empty());
    f.close();
}

#[tokio::test]
async fn test_real_fifo_resync_non_existing() {
    let f = real_fifo(&[mk("foo", 5)]);
    f.delete(mk("foo", 10)).unwrap();
    f.resync().unwrap();
    assert_eq!(seen_all(&f.items()), vec![d(Deleted, &mk("foo", 10))]);
}

#[tokio::test]
async fn test_real_fifo_resync() {
    let f = real_fifo(&[mk("foo", 5)]);
    f.resync().unwrap();
    assert_eq!(seen_all(&f.items()), vec![d(Sync, &mk("foo", 5))]);
}

#[tokio::test]
async fn test_real_fifo_delete_existing_non_propagated() {
    let f = real_fifo(&[]);
    f.add(mk("foo", 5)).unwrap();
    f.delete(mk("foo", 6)).unwrap();
    let items = f.items();
    assert_eq!(items.len(), 2);
    assert_eq!(items[1].kind, Deleted);
}

fn foo_bar_baz() -> [Arc<FifoObj>; 3] {
    [mk("foo", 5), mk("bar", 6), mk("baz", 7)]
}

async fn pops(f: &RealFifo<FifoObj>, n: usize) -> Vec<Seen> {
    let mut out = Vec::new();
    for _ in 0..n {
        let b = pop(f).await;
        assert_eq!(b.deltas.len(), 1, "a RealFifo pops one delta");
        out.extend(seen_all(&b.deltas));
    }
    out
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_with_a_pre_existing_delete() {
    let f = real_fifo(&foo_bar_baz());
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    // The tombstones come before the listed objects.
    let want = vec![
        d(Deleted, &mk("baz", 10)),
        tomb("bar", Some(&mk("bar", 6))),
        d(Replaced, &mk("foo", 5)),
    ];
    assert_eq!(pops(&f, 3).await, want);
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_starting_with_an_add() {
    let f = real_fifo(&foo_bar_baz());
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        d(Added, &mk("baz", 10)),
        tomb("baz", Some(&mk("baz", 10))),
        tomb("bar", Some(&mk("bar", 6))),
        d(Replaced, &mk("foo", 5)),
    ];
    assert_eq!(pops(&f, 4).await, want);
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_deleting_and_recreating_in_the_queue() {
    let f = real_fifo(&foo_bar_baz());
    f.delete(mk("bar", 6)).unwrap();
    f.add(mk("bar", 100)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        d(Deleted, &mk("bar", 6)),
        d(Added, &mk("bar", 100)),
        tomb("bar", Some(&mk("bar", 100))),
        tomb("baz", Some(&mk("baz", 7))),
        d(Replaced, &mk("foo", 5)),
    ];
    assert_eq!(pops(&f, 5).await, want);
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_syncing_first_uses_the_latest_version() {
    let f = real_fifo(&foo_bar_baz());
    f.replace(vec![mk("bar", 100), mk("foo", 5)], "0").unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        tomb("baz", Some(&mk("baz", 7))),
        d(Replaced, &mk("bar", 100)),
        d(Replaced, &mk("foo", 5)),
        tomb("bar", Some(&mk("bar", 100))),
        d(Replaced, &mk("foo", 5)),
    ];
    assert_eq!(pops(&f, 5).await, want);
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_with_empty_known_objects() {
    let f = real_fifo(&[]);
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        d(Added, &mk("baz", 10)),
        tomb("baz", Some(&mk("baz", 10))),
        d(Replaced, &mk("foo", 5)),
    ];
    assert_eq!(pops(&f, 3).await, want);
}

#[tokio::test]
async fn test_real_fifo_replace_makes_deletions_replaced() {
    let f = real_fifo(&foo_bar_baz());
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 6)], "0").unwrap();
    let want = vec![
        d(Deleted, &mk("baz", 10)),
        tomb("bar", Some(&mk("bar", 6))),
        d(Replaced, &mk("foo", 6)),
    ];
    assert_eq!(pops(&f, 3).await, want);
}

#[tokio::test]
async fn test_real_fifo_update_resync_race() {
    let f = real_fifo(&[mk("foo", 5)]);
    f.update(mk("foo", 6)).unwrap();
    f.resync().unwrap();
    assert_eq!(pops(&f, 1).await, vec![d(Updated, &mk("foo", 6))]);
    assert!(f.is_empty(), "the resync skipped the key with a queued delta");
}

#[tokio::test]
async fn test_real_fifo_has_synced_correct_on_deletion() {
    let f = real_fifo(&foo_bar_baz());
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        tomb("bar", Some(&mk("bar", 6))),
        tomb("baz", Some(&mk("baz", 7))),
        d(Replaced, &mk("foo", 5)),
    ];
    for expected in want {
        assert!(!f.has_synced());
        let b = pop(&f).await;
        assert_eq!(seen_all(&b.deltas), vec![expected]);
        assert!(b.is_in_initial_list);
    }
    assert!(f.has_synced());
}

#[tokio::test]
async fn test_real_fifo_detect_line_jumpers() {
    let f = real_fifo(&[]);
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 1)).unwrap();
    f.add(mk("foo", 11)).unwrap();
    f.add(mk("foo", 13)).unwrap();
    f.add(mk("zab", 30)).unwrap();
    assert_eq!(pop_newest(&f).await.val, 10, "every delta in arrival order");
    f.add(mk("foo", 14)).unwrap();
    for want in [1, 11, 13, 30, 14] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
}

#[tokio::test]
async fn test_real_fifo_key_of() {
    let f = real_fifo(&[mk("D", 0)]);
    assert_eq!(&*f.key_of(&DeltaObject::Object(mk("A", 0))).unwrap(), "A");
    let b = DeltaObject::Tombstone(DeletedFinalStateUnknown { key: "B".into(), obj: None });
    assert_eq!(&*f.key_of(&b).unwrap(), "B");
    f.add(mk("C", 0)).unwrap();
    let c = pop(&f).await;
    assert_eq!(&*f.key_of(&c.deltas[0].object).unwrap(), "C");
    f.replace(vec![], "1").unwrap();
    let dd = pop(&f).await;
    assert!(dd.deltas[0].object.is_tombstone());
    assert_eq!(&*f.key_of(&dd.deltas[0].object).unwrap(), "D");
}

async fn has_synced_after(actions: &[&str]) -> bool {
    let f = real_fifo(&[]);
    for a in actions {
        match *a {
            "add a" => f.add(mk("a", 1)).unwrap(),
            "replace []" => f.replace(vec![], "0").unwrap(),
            "replace [a b]" => f.replace(vec![mk("a", 1), mk("b", 2)], "0").unwrap(),
            "replace [a a]" => f.replace(vec![mk("a", 1), mk("a", 2)], "0").unwrap(),
            "pop" => drop(pop(&f).await),
            other => panic!("unknown action {other}"),
        }
    }
    f.has_synced()
}

#[tokio::test]
async fn test_real_fifo_has_synced_case_0_nothing_queued() {
    assert!(!has_synced_after(&[]).await);
}

#[tokio::test]
async fn test_real_fifo_has_synced_case_1_add_first() {
    assert!(has_synced_after(&["add a"]).await);
}

#[tokio::test]
async fn test_real_fifo_has_synced_case_2_empty_replace() {
    assert!(has_synced_after(&["replace []"]).await);
}

#[tokio::test]
async fn test_real_fifo_has_synced_case_3_replace_not_popped() {
    assert!(!has_synced_after(&["replace [a b]"]).await);
}

#[tokio::test]
async fn test_real_fifo_has_synced_case_4_replace_half_popped() {
    assert!(!has_synced_after(&["replace [a b]", "pop"]).await);
}

#[tokio::test]
async fn test_real_fifo_has_synced_case_5_replace_all_popped() {
    assert!(has_synced_after(&["replace [a b]", "pop", "pop"]).await);
}

#[tokio::test]
async fn test_real_fifo_has_synced_case_6_duplicate_keys_in_the_list_are_popped_twice() {
    assert!(!has_synced_after(&["replace [a a]", "pop"]).await);
    assert!(has_synced_after(&["replace [a a]", "pop", "pop"]).await);
}

#[tokio::test]
async fn test_real_fifo_pop_should_unblock_when_closed() {
    let f = Arc::new(real_fifo(&[mk("foo", 5)]));
    let pops: Vec<_> = (0..10)
        .map(|_| {
            let f = f.clone();
            tokio::spawn(async move { f.pop_batch(1).await.map(|_| ()) })
        })
        .collect();
    tokio::task::yield_now().await;
    f.close();
    for p in pops {
        let res = tokio::time::timeout(Duration::from_millis(500), p)
            .await
            .expect("pop returned after close")
            .unwrap();
        assert_eq!(res, Err(Error::Closed));
    }
}

// ---- TestRealFIFO_PopMultipleDeltaInBatch: a batch holds no key twice, never crosses the end
// of the initial list and holds at most the batch size.

const UNLIMITED: usize = 999_999;

/// Relists `initial` (also the known objects), runs `actions`, then pops batches of at most
/// `size` until the queue is empty. Checks that the initial-list batches hold exactly `initial`.
async fn batches(
    initial: &[Arc<FifoObj>],
    actions: impl Fn(&RealFifo<FifoObj>),
    size: usize,
) -> Vec<Vec<Seen>> {
    let f = real_fifo(initial);
    f.replace(initial.to_vec(), "123").unwrap();
    actions(&f);
    let mut out = Vec::new();
    let mut in_initial = Vec::new();
    while !f.is_empty() {
        let b: PoppedBatch<FifoObj> = pop_max(&f, size).await.unwrap();
        if b.is_in_initial_list {
            in_initial.extend(b.deltas.iter().map(|d| (**d.object.object().unwrap()).clone()));
        }
        out.push(seen_all(&b.deltas));
    }
    let want: Vec<FifoObj> = initial.iter().map(|o| (**o).clone()).collect();
    assert_eq!(in_initial, want, "the initial-list batches hold the initial list");
    out
}

fn objs() -> [Arc<FifoObj>; 4] {
    [mk("foo1", 5), mk("foo2", 5), mk("foo3", 5), mk("foo4", 5)]
}

#[tokio::test]
async fn test_real_fifo_pop_multiple_delta_in_batch_non_split_pop_unique_items_should_work() {
    let [o1, o2, o3, _] = objs();
    let got = batches(&[o1.clone(), o2.clone(), o3.clone()], |_| {}, UNLIMITED).await;
    assert_eq!(got, vec![vec![d(Replaced, &o1), d(Replaced, &o2), d(Replaced, &o3)]]);
}

#[tokio::test]
async fn test_real_fifo_pop_multiple_delta_in_batch_split_due_to_initial_list() {
    let [o1, o2, o3, o4] = objs();
    let actions = |f: &RealFifo<FifoObj>| {
        f.update(o3.clone()).unwrap();
        f.update(o4.clone()).unwrap();
    };
    let got = batches(&[o1.clone(), o2.clone()], actions, 2).await;
    let want =
        vec![vec![d(Replaced, &o1), d(Replaced, &o2)], vec![d(Updated, &o3), d(Updated, &o4)]];
    assert_eq!(got, want);
}

#[tokio::test]
async fn test_real_fifo_pop_multiple_delta_in_batch_split_due_to_non_unique_1_same_item_updated_twice()
 {
    let [o1, ..] = objs();
    let actions = |f: &RealFifo<FifoObj>| {
        f.update(o1.clone()).unwrap();
        f.update(o1.clone()).unwrap();
    };
    let got = batches(std::slice::from_ref(&o1), actions, UNLIMITED).await;
    let want = vec![vec![d(Replaced, &o1)], vec![d(Updated, &o1)], vec![d(Updated, &o1)]];
    assert_eq!(got, want);
}

#[tokio::test]
async fn test_real_fifo_pop_multiple_delta_in_batch_split_due_to_non_unique_2_repeated_item_first()
{
    let [o1, o2, o3, _] = objs();
    let actions = |f: &RealFifo<FifoObj>| {
        f.update(o2.clone()).unwrap();
        f.update(o3.clone()).unwrap();
    };
    let got = batches(&[o1.clone(), o2.clone()], actions, UNLIMITED).await;
    let want =
        vec![vec![d(Replaced, &o1), d(Replaced, &o2)], vec![d(Updated, &o2), d(Updated, &o3)]];
    assert_eq!(got, want);
}

#[tokio::test]
async fn test_real_fifo_pop_multiple_delta_in_batch_split_due_to_non_unique_3_repeated_item_in_the_middle()
 {
    let [o1, o2, o3, _] = objs();
    let actions = |f: &RealFifo<FifoObj>| f.update(o2.clone()).unwrap();
    let got = batches(&[o1.clone(), o2.clone(), o3.clone()], actions, UNLIMITED).await;
    let want =
        vec![vec![d(Replaced, &o1), d(Replaced, &o2), d(Replaced, &o3)], vec![d(Updated, &o2)]];
    assert_eq!(got, want);
}

#[tokio::test]
async fn test_real_fifo_pop_multiple_delta_in_batch_split_due_to_batch_size_1_initial_list() {
    let [o1, o2, o3, _] = objs();
    let got = batches(&[o1.clone(), o2.clone(), o3.clone()], |_| {}, 2).await;
    let want = vec![vec![d(Replaced, &o1), d(Replaced, &o2)], vec![d(Replaced, &o3)]];
    assert_eq!(got, want);
}

#[tokio::test]
async fn test_real_fifo_pop_multiple_delta_in_batch_split_due_to_batch_size_2_non_initial_deltas() {
    let [o1, o2, o3, _] = objs();
    let actions = |f: &RealFifo<FifoObj>| {
        f.update(o1.clone()).unwrap();
        f.update(o2.clone()).unwrap();
        f.update(o3.clone()).unwrap();
    };
    let got = batches(&[], actions, 2).await;
    let want = vec![vec![d(Updated, &o1), d(Updated, &o2)], vec![d(Updated, &o3)]];
    assert_eq!(got, want);
}

#[tokio::test]
async fn test_real_fifo_pop_multiple_delta_in_batch_split_due_to_batch_size_3_mixed_initial_and_non_initial()
 {
    let [o1, o2, o3, o4] = objs();
    let actions = |f: &RealFifo<FifoObj>| f.update(o4.clone()).unwrap();
    let got = batches(&[o1.clone(), o2.clone(), o3.clone()], actions, 2).await;
    let want = vec![
        vec![d(Replaced, &o1), d(Replaced, &o2)],
        vec![d(Replaced, &o3)],
        vec![d(Updated, &o4)],
    ];
    assert_eq!(got, want);
}

// ---- TestRealFIFO_PopBrokenItemsInBatch. client-go plants objects whose key function fails
// straight into the queue's internals and checks how batches close around them. Through the
// public API (client-go's too) such an object is refused by `Add` with a key error and never
// queued, so here the broken objects are refused and the rest batch as usual.

async fn broken_items_batches(incoming: &[Arc<FifoObj>]) -> Vec<Vec<Seen>> {
    let broken = KeyFn::new(|o: &FifoObj| {
        if o.name == "foo3" || o.name == "foo4" {
            Err("test key func error".into())
        } else {
            Ok(o.name.clone())
        }
    });
    let f = RealFifo::with_options(access(), known(&[]), options().key_fn(broken));
    for o in incoming {
        let res = f.add(o.clone());
        if o.name == "foo3" || o.name == "foo4" {
            let Err(Error::Key(e)) = res else { panic!("{} must be refused", o.name) };
            let inner = std::error::Error::source(&e).and_then(|u| u.source());
            assert_eq!(inner.map(|e| e.to_string()).as_deref(), Some("test key func error"));
        } else {
            res.unwrap();
        }
    }
    let mut out = Vec::new();
    while !f.is_empty() {
        out.push(seen_all(&pop_max(&f, UNLIMITED).await.unwrap().deltas));
    }
    out
}

#[tokio::test]
async fn test_real_fifo_pop_broken_items_in_batch_1st_item_is_broken() {
    let [_, _, f3, _] = objs();
    assert_eq!(broken_items_batches(&[f3]).await, Vec::<Vec<Seen>>::new());
}

#[tokio::test]
async fn test_real_fifo_pop_broken_items_in_batch_nth_item_is_broken() {
    let [s1, s2, f3, _] = objs();
    let got = broken_items_batches(&[s1.clone(), s2.clone(), f3]).await;
    assert_eq!(got, vec![vec![d(Added, &s1), d(Added, &s2)]]);
}

#[tokio::test]
async fn test_real_fifo_pop_broken_items_in_batch_multiple_nth_items_are_broken() {
    let [s1, s2, f3, f4] = objs();
    let got = broken_items_batches(&[s1.clone(), s2.clone(), f3, f4]).await;
    assert_eq!(got, vec![vec![d(Added, &s1), d(Added, &s2)]]);
}

#[tokio::test]
async fn test_real_fifo_pop_broken_items_in_batch_mixed_1st_and_nth_items_are_broken() {
    let [s1, _, f3, f4] = objs();
    let got = broken_items_batches(&[f3, s1.clone(), f4]).await;
    assert_eq!(got, vec![vec![d(Added, &s1)]]);
}

// ---- TestRealFIFO_ReplaceAtomic, TestRealFIFO_ReplaceAtomicPop, TestRealFIFO_ResyncAtomic.

/// Pops everything one delta at a time and returns, per pop, what it delivered and the
/// resource version the store reports once it is applied.
async fn pops_with_versions(f: &RealFifo<FifoObj>) -> Vec<(Vec<Seen>, Option<String>)> {
    let mut out = Vec::new();
    while let Some(b) = try_pop_now(f, 1) {
        out.push((seen_all(&b.deltas), b.resource_version.as_deref().map(str::to_owned)));
    }
    out
}

fn rv(v: &str) -> Option<String> {
    Some(v.to_owned())
}

#[tokio::test]
async fn test_real_fifo_replace_atomic_base_replace() {
    let f = real_fifo(&[]);
    f.replace(vec![], "123").unwrap();
    // client-go: one ReplacedAll{rv 123, no objects}. Here: no delta, and the store reports 123.
    let b = pop(&f).await;
    assert!(b.deltas.is_empty());
    assert_eq!(b.resource_version.as_deref(), Some("123"));
    assert!(f.has_synced());
}

#[tokio::test]
async fn test_real_fifo_replace_atomic_added_object_exists_in_deltas_on_atomic_replace() {
    let obj = mk("foo", 2);
    let f = real_fifo(&[]);
    f.add(obj.clone()).unwrap();
    f.replace(vec![], "123").unwrap();
    let got = pops_with_versions(&f).await;
    assert_eq!(got, vec![(vec![d(Added, &obj)], None), (vec![tomb("foo", Some(&obj))], rv("123"))]);
}

#[tokio::test]
async fn test_real_fifo_replace_atomic_multiple_replaces_run_in_order() {
    let obj = mk("foo", 2);
    let f = real_fifo(&[]);
    f.add(obj.clone()).unwrap();
    f.replace(vec![obj.clone()], "10").unwrap();
    f.replace(vec![obj.clone()], "20").unwrap();
    f.replace(vec![], "56").unwrap();
    let got = pops_with_versions(&f).await;
    let want = vec![
        (vec![d(Added, &obj)], None),
        (vec![d(Replaced, &obj)], rv("10")),
        (vec![d(Replaced, &obj)], rv("20")),
        (vec![tomb("foo", Some(&obj))], rv("56")),
    ];
    assert_eq!(got, want);
}

#[tokio::test]
async fn test_real_fifo_replace_atomic_bookmark_object_should_not_be_included_in_replace() {
    let f = real_fifo(&[]);
    f.bookmark("123").unwrap();
    f.replace(vec![], "1234").unwrap();
    // Both are due at the same point of the queue: the store reports the newer, 1234, and no
    // delta carries the bookmark.
    let got = pops_with_versions(&f).await;
    assert_eq!(got, vec![(vec![], rv("1234"))]);
}

#[tokio::test]
async fn test_real_fifo_replace_atomic_pop() {
    let f = real_fifo(&[]);
    f.add(mk("foo", 10)).unwrap();
    f.replace(vec![mk("foo", 15)], "20").unwrap();
    let got = pops_with_versions(&f).await;
    let want =
        vec![(vec![d(Added, &mk("foo", 10))], None), (vec![d(Replaced, &mk("foo", 15))], rv("20"))];
    assert_eq!(got, want);
    assert!(f.items().is_empty());
    f.close();
}

#[tokio::test]
async fn test_real_fifo_resync_atomic_base_resync() {
    // client-go queues one SyncAll that re-delivers the store's objects when processed; with
    // nothing known there is nothing to re-deliver, and here nothing is queued.
    let f = real_fifo(&[]);
    f.resync().unwrap();
    assert!(f.items().is_empty());
    assert!(pop_would_wait(&f));
}

#[tokio::test]
async fn test_real_fifo_resync_atomic_added_object_exists_in_deltas_on_atomic_resync() {
    // The resync comes after the queued add and does not jump ahead of it. client-go's atomic
    // SyncAll would then re-deliver foo (by then in the store); our resync follows client-go's
    // non-atomic rule and skips a key with a delta queued, so foo is delivered once.
    let obj = mk("foo", 2);
    let f = real_fifo(std::slice::from_ref(&obj));
    f.add(obj.clone()).unwrap();
    f.resync().unwrap();
    assert_eq!(drain(&f).await, vec![d(Added, &obj)]);
}

// ---- Beyond the upstream file.

#[tokio::test]
async fn test_real_fifo_refuses_adds_once_closed_and_drains_what_is_queued() {
    let f = real_fifo(&[]);
    f.add(mk("foo", 1)).unwrap();
    f.close();
    assert!(f.is_closed());
    assert_eq!(f.add(mk("bar", 1)), Err(Error::Closed));
    assert_eq!(pop_newest(&f).await.val, 1);
    assert_eq!(f.pop_batch(1).await.map(|_| ()), Err(Error::Closed));
}

#[tokio::test]
async fn test_real_fifo_relist_with_a_refused_object_queues_nothing() {
    let f = RealFifo::with_options(
        access(),
        known(&[mk("gone", 1)]),
        options().transform(TransformFn::new(|o: Arc<FifoObj>| {
            if o.val < 0 { Err("negative".into()) } else { Ok(o) }
        })),
    );
    // client-go queues the tombstones first and fails on the bad object midway; here the whole
    // relist is refused before anything is queued.
    assert!(matches!(f.replace(vec![mk("ok", 1), mk("bad", -1)], "1"), Err(Error::Transform(_))));
    assert!(f.items().is_empty());
}

#[tokio::test]
async fn test_informer_with_a_custom_key_function_keys_queue_and_store_alike() {
    use snapinformer_core::InformerBuilder;
    use snapinformer_store::StoreBuilder;
    let prefixed = KeyFn::new(|o: &FifoObj| Ok(format!("key/{}", o.name)));
    let store = StoreBuilder::new(access()).key_fn(prefixed);
    let informer = InformerBuilder::with_store(store).build().unwrap();
    informer.start().unwrap();
    informer.queue().add(mk("foo", 1)).unwrap();
    informer.queue().add(mk("bar", 1)).unwrap();
    informer.queue().delete(mk("foo", 2)).unwrap();
    let settled = async {
        loop {
            let s = informer.snapshot();
            if s.len() == 1 && s.get_by_key("key/bar").is_some() && informer.queue().is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), settled).await.expect("the store settles");
    informer.shutdown().await;
}
