//! Conformance: client-go v0.37.2 `tools/cache/delta_fifo_test.go`, case by case, on our
//! `DeltaFifo` (the v0.34.0 file has the same cases; it only had `List`, `ListKeys`, `Get` and
//! `GetByKey` public, which are `list`, `list_keys`, `get` and `get_by_key` here).
//!
//! Each test is named `test_delta_fifo_<client-go test>[_<case>]`. Translation rules:
//! client-go's `Pop(f)` is one `pop_batch(1)` followed by `done` (a `DeltaFifo` pops one key's
//! entry whole); a test object is keyed by its name through a custom key function, as client-go's
//! `testFifoObjectKeyFunc`; the queue is built with client-go's `DeltaFIFOOptions` defaults
//! (relisted objects queued as `Sync`) unless the case asks for `EmitDeltaTypeReplaced`; a
//! "nothing more arrives" wait is a single poll of a pop that must be pending.

mod fifo_helpers;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use fifo_helpers::{
    FifoObj, Seen, access, d, delta_fifo, delta_fifo_no_lister, delta_fifo_replaced, drain, mk,
    options, pop, pop_newest, pop_would_wait, seen_all, tomb,
};
use snapinformer_core::{
    DeletedFinalStateUnknown, DeltaFifo, DeltaObject, DeltaType::*, NoKnownObjects, Queue,
    queue::Error,
};
use snapinformer_store::TransformFn;

#[tokio::test]
async fn test_delta_fifo_basic() {
    let f = Arc::new(delta_fifo_no_lister());
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
async fn test_delta_fifo_replace_with_delete_delta_in() {
    // A relist that lists a key whose delete is still queued must queue the listed object too,
    // or the informer misses its creation (kubernetes#83810).
    let (old, new) = (mk("foo", 1), mk("foo", 2));
    let f = delta_fifo(std::slice::from_ref(&old));
    f.delete(old.clone()).unwrap();
    f.replace(vec![new.clone()], "").unwrap();
    assert_eq!(seen_all(&pop(&f).await.deltas), vec![d(Deleted, &old), d(Sync, &new)]);
}

/// Runs one case of `TestDeltaFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue` on a queue with
/// (empty) known objects and on one without: one pop returns `expected` and empties the queue.
async fn only_in_queue(
    emit_replaced: bool,
    ops: impl Fn(&DeltaFifo<FifoObj>),
    expected: Vec<Seen>,
) {
    let with_known = if emit_replaced { delta_fifo_replaced(&[]) } else { delta_fifo(&[]) };
    let without_known = DeltaFifo::with_options(
        access(),
        Arc::new(NoKnownObjects),
        options().emit_replaced(emit_replaced),
    );
    for f in [with_known, without_known] {
        ops(&f);
        assert_eq!(seen_all(&pop(&f).await.deltas), expected);
        assert!(f.list_keys().is_empty(), "no extra deltas: {:?}", f.list_keys());
    }
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_for_objects_only_in_queue_added_object_should_be_deleted_on_replace()
 {
    let obj = mk("foo", 2);
    let ops = |f: &DeltaFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.replace(vec![], "0").unwrap();
    };
    only_in_queue(false, ops, vec![d(Added, &obj), tomb("foo", Some(&obj))]).await;
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_for_objects_only_in_queue_replaced_object_should_have_only_a_single_delete()
 {
    let obj = mk("foo", 2);
    let ops = |f: &DeltaFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.replace(vec![obj.clone()], "0").unwrap();
        f.replace(vec![], "0").unwrap();
    };
    let expected = vec![d(Added, &obj), d(Replaced, &obj), tomb("foo", Some(&obj))];
    only_in_queue(true, ops, expected).await;
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_for_objects_only_in_queue_deleted_object_should_have_only_a_single_delete()
 {
    let obj = mk("foo", 2);
    let ops = |f: &DeltaFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.delete(obj.clone()).unwrap();
        f.replace(vec![], "0").unwrap();
    };
    only_in_queue(false, ops, vec![d(Added, &obj), d(Deleted, &obj)]).await;
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_for_objects_only_in_queue_synced_objects_should_have_a_single_delete()
 {
    let obj = mk("foo", 2);
    let ops = |f: &DeltaFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.replace(vec![obj.clone()], "0").unwrap();
        f.replace(vec![obj.clone()], "0").unwrap();
        f.replace(vec![], "0").unwrap();
    };
    let expected = vec![d(Added, &obj), d(Sync, &obj), d(Sync, &obj), tomb("foo", Some(&obj))];
    only_in_queue(false, ops, expected).await;
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_for_objects_only_in_queue_added_objects_should_have_a_single_delete_on_multiple_replaces()
 {
    let obj = mk("foo", 2);
    let ops = |f: &DeltaFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.replace(vec![], "0").unwrap();
        f.replace(vec![], "1").unwrap();
    };
    only_in_queue(false, ops, vec![d(Added, &obj), tomb("foo", Some(&obj))]).await;
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_for_objects_only_in_queue_added_and_deleted_and_added_object_should_be_deleted()
 {
    let (obj, obj_v2) = (mk("foo", 2), mk("foo", 3));
    let ops = |f: &DeltaFifo<FifoObj>| {
        f.add(obj.clone()).unwrap();
        f.delete(obj.clone()).unwrap();
        f.add(obj_v2.clone()).unwrap();
        f.replace(vec![], "0").unwrap();
    };
    let expected =
        vec![d(Added, &obj), d(Deleted, &obj), d(Added, &obj_v2), tomb("foo", Some(&obj_v2))];
    only_in_queue(false, ops, expected).await;
}

#[tokio::test]
async fn test_delta_fifo_add_update() {
    let f = delta_fifo_no_lister();
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    let newest: Vec<_> = f.list().iter().map(|o| (**o.object().unwrap()).clone()).collect();
    assert_eq!(newest, vec![(*mk("foo", 15)).clone()]);
    assert_eq!(f.list_keys(), vec![Arc::from("foo")]);
    assert_eq!(pop_newest(&f).await.val, 15, "one pop delivers the newest state");
    assert!(pop_would_wait(&f), "no second value");
    assert!(f.get(&mk("foo", 0)).unwrap().is_none(), "the item was removed");
    f.close();
}

#[tokio::test]
async fn test_delta_fifo_transformer() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    // Marks every object it sees; relist tombstones and their objects never reach it.
    let xfrm = TransformFn::new(move |o: Arc<FifoObj>| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(FifoObj { xfrm: o.xfrm + 1, ..(*o).clone() }))
    });
    let f = DeltaFifo::with_options(
        access(),
        Arc::new(NoKnownObjects),
        options().emit_replaced(false).transform(xfrm),
    );
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 11)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    f.replace(vec![], "").unwrap();
    f.add(mk("bar", 16)).unwrap();
    f.replace(vec![], "").unwrap();
    assert_eq!(f.list_keys(), vec![Arc::from("foo"), Arc::from("bar")]);
    assert_eq!(calls.load(Ordering::SeqCst), 5, "each queued object transformed once");

    // foo: its real delete stays (the relist tombstone after it is dropped), transformed once.
    let foo = pop(&f).await;
    let last = foo.deltas.last().unwrap();
    assert!(!last.object.is_tombstone(), "regular deletion of foo");
    let o = last.object.object().unwrap();
    assert_eq!((o.name.as_str(), o.val, o.xfrm), ("foo", 15, 1));
    // bar: the second relist's tombstone, carrying the newest object, transformed once.
    let bar = pop(&f).await;
    let last = bar.deltas.last().unwrap();
    assert!(last.object.is_tombstone(), "tombstone deletion of bar");
    let o = last.object.object().unwrap();
    assert_eq!((o.name.as_str(), o.val, o.xfrm), ("bar", 16, 1));
}

#[tokio::test]
async fn test_delta_fifo_enqueueing_no_lister() {
    let f = delta_fifo_no_lister();
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("bar", 15)).unwrap();
    f.add(mk("qux", 17)).unwrap();
    f.delete(mk("qux", 18)).unwrap();
    // Neither queued nor known: dropped.
    f.delete(mk("baz", 20)).unwrap();
    for want in [10, 15, 18] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
    assert!(f.list_keys().is_empty(), "queue not empty: {:?}", f.list_keys());
}

#[tokio::test]
async fn test_delta_fifo_enqueueing_with_lister() {
    let f = delta_fifo(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("bar", 15)).unwrap();
    // Known, so the delete is queued.
    f.delete(mk("baz", 20)).unwrap();
    for want in [10, 15, 20] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
    assert!(f.list_keys().is_empty());
}

#[tokio::test]
async fn test_delta_fifo_add_replace() {
    let f = delta_fifo_no_lister();
    f.add(mk("foo", 10)).unwrap();
    f.replace(vec![mk("foo", 15)], "0").unwrap();
    assert_eq!(pop_newest(&f).await.val, 15);
    assert!(pop_would_wait(&f), "no second value");
    assert!(f.get(&mk("foo", 0)).unwrap().is_none(), "the item was removed");
    f.close();
}

#[tokio::test]
async fn test_delta_fifo_resync_non_existing() {
    let f = delta_fifo(&[mk("foo", 5)]);
    f.delete(mk("foo", 10)).unwrap();
    f.resync().unwrap();
    let deltas = f.get_by_key("foo").unwrap();
    assert_eq!(seen_all(&deltas), vec![d(Deleted, &mk("foo", 10))], "no Sync after the delete");
}

#[tokio::test]
async fn test_delta_fifo_resync() {
    let f = delta_fifo(&[mk("foo", 5)]);
    f.resync().unwrap();
    assert_eq!(seen_all(&f.get_by_key("foo").unwrap()), vec![d(Sync, &mk("foo", 5))]);
}

#[tokio::test]
async fn test_delta_fifo_delete_existing_non_propagated() {
    let f = delta_fifo(&[]);
    f.add(mk("foo", 5)).unwrap();
    f.delete(mk("foo", 6)).unwrap();
    let deltas = f.get_by_key("foo").unwrap();
    assert_eq!(deltas.len(), 2);
    assert_eq!(deltas[1].kind, Deleted);
}

fn foo_bar_baz() -> [Arc<FifoObj>; 3] {
    [mk("foo", 5), mk("bar", 6), mk("baz", 7)]
}

async fn pops(f: &DeltaFifo<FifoObj>, n: usize) -> Vec<Vec<Seen>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(seen_all(&pop(f).await.deltas));
    }
    out
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_with_a_pre_existing_delete() {
    let f = delta_fifo(&foo_bar_baz());
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        vec![d(Deleted, &mk("baz", 10))],
        vec![d(Sync, &mk("foo", 5))],
        // Not listed and no delete seen: a tombstone with the known object.
        vec![tomb("bar", Some(&mk("bar", 6)))],
    ];
    assert_eq!(pops(&f, 3).await, want);
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_starting_with_an_add() {
    let f = delta_fifo(&foo_bar_baz());
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        vec![d(Added, &mk("baz", 10)), tomb("baz", Some(&mk("baz", 10)))],
        vec![d(Sync, &mk("foo", 5))],
        vec![tomb("bar", Some(&mk("bar", 6)))],
    ];
    assert_eq!(pops(&f, 3).await, want);
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_deleting_and_recreating_in_the_queue() {
    let f = delta_fifo(&foo_bar_baz());
    f.delete(mk("bar", 6)).unwrap();
    f.add(mk("bar", 100)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        vec![
            d(Deleted, &mk("bar", 6)),
            d(Added, &mk("bar", 100)),
            // The queue holds a newer state than the known one: the tombstone carries it.
            tomb("bar", Some(&mk("bar", 100))),
        ],
        vec![d(Sync, &mk("foo", 5))],
        vec![tomb("baz", Some(&mk("baz", 7)))],
    ];
    assert_eq!(pops(&f, 3).await, want);
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_syncing_first_uses_the_latest_version() {
    let f = delta_fifo(&foo_bar_baz());
    f.replace(vec![mk("bar", 100), mk("foo", 5)], "0").unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        vec![d(Sync, &mk("bar", 100)), tomb("bar", Some(&mk("bar", 100)))],
        vec![d(Sync, &mk("foo", 5)), d(Sync, &mk("foo", 5))],
        vec![tomb("baz", Some(&mk("baz", 7)))],
    ];
    assert_eq!(pops(&f, 3).await, want);
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_without_known_objects() {
    let f = delta_fifo_no_lister();
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        vec![d(Added, &mk("baz", 10)), tomb("baz", Some(&mk("baz", 10)))],
        vec![d(Sync, &mk("foo", 5))],
    ];
    assert_eq!(pops(&f, 2).await, want);
}

#[tokio::test]
async fn test_delta_fifo_replace_makes_deletions_replaced() {
    let f = delta_fifo_replaced(&foo_bar_baz());
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 6)], "0").unwrap();
    let want = vec![
        vec![d(Deleted, &mk("baz", 10))],
        vec![d(Replaced, &mk("foo", 6))],
        vec![tomb("bar", Some(&mk("bar", 6)))],
    ];
    assert_eq!(pops(&f, 3).await, want);
}

#[tokio::test]
async fn test_delta_fifo_replace_delta_type() {
    let f = delta_fifo_replaced(&[mk("foo", 5)]);
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    assert_eq!(pops(&f, 1).await, vec![vec![d(Replaced, &mk("foo", 5))]]);
}

#[tokio::test]
async fn test_delta_fifo_update_resync_race() {
    let f = delta_fifo(&[mk("foo", 5)]);
    f.update(mk("foo", 6)).unwrap();
    // foo has a delta queued, so the resync leaves it alone (its known state is older).
    f.resync().unwrap();
    assert_eq!(pops(&f, 1).await, vec![vec![d(Updated, &mk("foo", 6))]]);
    assert!(f.is_empty());
}

#[tokio::test]
async fn test_delta_fifo_has_synced_correct_on_deletion() {
    let f = delta_fifo(&foo_bar_baz());
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let want = vec![
        vec![d(Sync, &mk("foo", 5))],
        vec![tomb("bar", Some(&mk("bar", 6)))],
        vec![tomb("baz", Some(&mk("baz", 7)))],
    ];
    for expected in want {
        assert!(!f.has_synced(), "not synced before the initial list is popped");
        let b = pop(&f).await;
        assert_eq!(seen_all(&b.deltas), expected);
        assert!(b.is_in_initial_list, "part of the initial list");
    }
    assert!(f.has_synced());
}

#[tokio::test]
async fn test_delta_fifo_detect_line_jumpers() {
    let f = delta_fifo_no_lister();
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 1)).unwrap();
    f.add(mk("foo", 11)).unwrap();
    f.add(mk("foo", 13)).unwrap();
    f.add(mk("zab", 30)).unwrap();
    assert_eq!(pop_newest(&f).await.val, 13);
    // foo goes to the back of the line, not back to its old place.
    f.add(mk("foo", 14)).unwrap();
    for want in [1, 30, 14] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
}

#[tokio::test]
async fn test_delta_fifo_key_of() {
    let f = delta_fifo(&[mk("D", 0)]);
    // An object: the key function's key.
    assert_eq!(&*f.key_of(&DeltaObject::Object(mk("A", 0))).unwrap(), "A");
    // A tombstone: its own key, even without an object.
    let b = DeltaObject::Tombstone(DeletedFinalStateUnknown { key: "B".into(), obj: None });
    assert_eq!(&*f.key_of(&b).unwrap(), "B");
    // A popped entry (client-go's `Deltas`): the key of its newest delta.
    f.add(mk("C", 0)).unwrap();
    let c = pop(&f).await;
    assert_eq!(&*f.key_of(&c.deltas.last().unwrap().object).unwrap(), "C");
    // An entry whose newest delta is a tombstone.
    f.replace(vec![], "1").unwrap();
    let dd = pop(&f).await;
    let newest = &dd.deltas.last().unwrap().object;
    assert!(newest.is_tombstone());
    assert_eq!(&*f.key_of(newest).unwrap(), "D");
}

async fn has_synced_after(actions: &[&str]) -> bool {
    let f = delta_fifo_no_lister();
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
async fn test_delta_fifo_has_synced_case_0_nothing_queued() {
    assert!(!has_synced_after(&[]).await);
}

#[tokio::test]
async fn test_delta_fifo_has_synced_case_1_add_first() {
    assert!(has_synced_after(&["add a"]).await);
}

#[tokio::test]
async fn test_delta_fifo_has_synced_case_2_empty_replace() {
    assert!(has_synced_after(&["replace []"]).await);
}

#[tokio::test]
async fn test_delta_fifo_has_synced_case_3_replace_not_popped() {
    assert!(!has_synced_after(&["replace [a b]"]).await);
}

#[tokio::test]
async fn test_delta_fifo_has_synced_case_4_replace_half_popped() {
    assert!(!has_synced_after(&["replace [a b]", "pop"]).await);
}

#[tokio::test]
async fn test_delta_fifo_has_synced_case_5_replace_all_popped() {
    assert!(has_synced_after(&["replace [a b]", "pop", "pop"]).await);
}

#[tokio::test]
async fn test_delta_fifo_has_synced_case_6_duplicate_keys_in_the_list_count_once() {
    assert!(has_synced_after(&["replace [a a]", "pop"]).await);
}

#[tokio::test]
async fn test_delta_fifo_pop_should_unblock_when_closed() {
    let f = Arc::new(delta_fifo(&[mk("foo", 5)]));
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

// ---- Beyond the upstream file: rules the brief names, pinned here.

#[tokio::test]
async fn test_delta_fifo_two_real_deletes_keep_the_older_one() {
    let f = delta_fifo(&[mk("foo", 1)]);
    f.delete(mk("foo", 2)).unwrap();
    f.delete(mk("foo", 3)).unwrap();
    assert_eq!(drain(&f).await, vec![d(Deleted, &mk("foo", 2))]);
}

#[tokio::test]
async fn test_delta_fifo_two_tombstones_keep_the_newer_one() {
    let f = delta_fifo(&[mk("foo", 1)]);
    f.replace(vec![], "1").unwrap();
    f.add(mk("bar", 1)).unwrap();
    f.replace(vec![], "2").unwrap();
    let foo = f.get_by_key("foo").unwrap();
    assert_eq!(seen_all(&foo), vec![tomb("foo", Some(&mk("foo", 1)))], "one tombstone for foo");
}

#[tokio::test]
async fn test_delta_fifo_default_options_queue_relisted_objects_as_replaced() {
    // Our default is what client-go's informers configure (EmitDeltaTypeReplaced: true), not
    // the bare DeltaFIFO's backward-compatible Sync.
    let f = DeltaFifo::with_options(access(), Arc::new(NoKnownObjects), options());
    f.replace(vec![mk("foo", 5)], "1").unwrap();
    assert_eq!(drain(&f).await, vec![d(Replaced, &mk("foo", 5))]);
}

#[tokio::test]
async fn test_delta_fifo_pop_drains_a_closed_queue_then_fails() {
    let f = delta_fifo_no_lister();
    f.add(mk("foo", 1)).unwrap();
    f.close();
    assert!(f.is_closed());
    assert_eq!(pop_newest(&f).await.val, 1, "what was queued is still delivered");
    assert_eq!(f.pop_batch(1).await.map(|_| ()), Err(Error::Closed));
}

#[tokio::test]
async fn test_delta_fifo_refuses_adds_once_closed() {
    let f = delta_fifo_no_lister();
    f.close();
    assert_eq!(f.add(mk("foo", 1)), Err(Error::Closed));
    assert_eq!(f.replace(vec![mk("foo", 1)], "1"), Err(Error::Closed));
    assert!(f.is_empty(), "nothing was queued");
}

#[tokio::test]
async fn test_delta_fifo_key_errors_and_transform_errors_queue_nothing() {
    let failing = snapinformer_store::KeyFn::new(|o: &FifoObj| {
        if o.name == "bad" { Err("no key for bad".into()) } else { Ok(o.name.clone()) }
    });
    let f = DeltaFifo::with_options(
        access(),
        Arc::new(NoKnownObjects),
        options().key_fn(failing).transform(TransformFn::new(|o: Arc<FifoObj>| {
            if o.val < 0 { Err("negative".into()) } else { Ok(o) }
        })),
    );
    assert!(matches!(f.add(mk("bad", 1)), Err(Error::Key(_))));
    assert!(matches!(f.add(mk("foo", -1)), Err(Error::Transform(_))));
    // A relist with one bad object fails whole, before anything is queued.
    assert!(matches!(f.replace(vec![mk("ok", 1), mk("foo", -1)], "1"), Err(Error::Transform(_))));
    assert!(matches!(f.replace(vec![mk("ok", 1), mk("bad", 1)], "1"), Err(Error::Key(_))));
    assert!(f.is_empty(), "nothing queued");
}
