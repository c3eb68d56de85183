//! client-go's queue rules as behaviour tests, for `DeltaFifo` and `RealFifo`.

mod common;

use std::{sync::Arc, time::Duration};

use common::{access, key, known_store, obj};
use snapinformer_core::{
    DeltaFifo, DeltaObject, DeltaType, PoppedBatch, Queue, QueueConfig, RealFifo, queue::Error,
};
use tokio::time::timeout;

use crate::common::Obj;

fn delta_fifo(known: &[&str]) -> (DeltaFifo<Obj>, snapinformer_store::Writer<Obj>) {
    let (w, r) = known_store(known);
    (DeltaFifo::new(access(), Arc::new(r), QueueConfig::default()), w)
}

fn real_fifo(known: &[&str]) -> (RealFifo<Obj>, snapinformer_store::Writer<Obj>) {
    let (w, r) = known_store(known);
    (RealFifo::new(access(), Arc::new(r), QueueConfig::default()), w)
}

async fn pop(q: &dyn Queue<Obj>, max: usize) -> PoppedBatch<Obj> {
    let b =
        timeout(Duration::from_secs(5), q.pop_batch(max)).await.expect("pop timed out").unwrap();
    q.done(&b);
    b
}

fn kinds(b: &PoppedBatch<Obj>) -> Vec<(String, DeltaType, bool)> {
    b.deltas.iter().map(|d| (d.key.to_string(), d.kind, d.object.is_tombstone())).collect()
}

fn rv_of(o: &DeltaObject<Obj>) -> Option<String> {
    o.object().map(|o| o.rv.clone())
}

// ---------------------------------------------------------------- DeltaFifo

#[tokio::test]
async fn delta_fifo_keeps_one_entry_per_key_in_first_arrival_order() {
    let (q, _w) = delta_fifo(&[]);
    q.add(obj("a", 1)).unwrap();
    q.add(obj("b", 2)).unwrap();
    q.update(obj("a", 3)).unwrap();
    assert_eq!(q.len(), 3);
    assert_eq!(q.stats().entries, 2);
    let b = pop(&q, 1).await;
    assert_eq!(
        kinds(&b),
        vec![(key("a"), DeltaType::Added, false), (key("a"), DeltaType::Updated, false)],
        "an entry is popped whole, even past `max`"
    );
    let b = pop(&q, 1).await;
    assert_eq!(kinds(&b), vec![(key("b"), DeltaType::Added, false)]);
}

#[tokio::test]
async fn delta_fifo_collapses_only_two_consecutive_deletes() {
    let (q, _w) = delta_fifo(&["a", "b"]);
    q.delete(obj("a", 2)).unwrap();
    q.delete(obj("a", 3)).unwrap();
    q.delete(obj("b", 2)).unwrap();
    q.update(obj("b", 3)).unwrap();
    q.delete(obj("b", 4)).unwrap();
    let b = pop(&q, 100).await;
    let a: Vec<_> = b.deltas.iter().filter(|d| *d.key == key("a")).collect();
    assert_eq!(a.len(), 1, "two consecutive deletes collapse");
    assert_eq!(rv_of(&a[0].object).as_deref(), Some("2"), "the older real delete stays");
    let bs: Vec<_> = b.deltas.iter().filter(|d| *d.key == key("b")).map(|d| d.kind).collect();
    assert_eq!(bs, vec![DeltaType::Deleted, DeltaType::Updated, DeltaType::Deleted]);
}

#[tokio::test]
async fn delta_fifo_real_object_beats_tombstone_in_delete_dedup() {
    // A real delete queued first, then a relist tombstone: the real one stays.
    let (q, _w) = delta_fifo(&["a"]);
    q.delete(obj("a", 5)).unwrap();
    q.replace(vec![], "6").unwrap();
    let b = pop(&q, 100).await;
    assert_eq!(kinds(&b), vec![(key("a"), DeltaType::Deleted, false)]);
    assert_eq!(rv_of(&b.deltas[0].object).as_deref(), Some("5"));

    // A tombstone first, then a real delete: the real one replaces it.
    let (q, _w) = delta_fifo(&["a"]);
    q.replace(vec![], "6").unwrap();
    q.delete(obj("a", 7)).unwrap();
    let b = pop(&q, 100).await;
    assert_eq!(kinds(&b), vec![(key("a"), DeltaType::Deleted, false)]);
    assert_eq!(rv_of(&b.deltas[0].object).as_deref(), Some("7"));
}

#[tokio::test]
async fn delta_fifo_drops_delete_of_a_key_neither_queued_nor_known() {
    let (q, _w) = delta_fifo(&["known"]);
    q.delete(obj("stranger", 1)).unwrap();
    assert_eq!(q.len(), 0, "unknown and not queued: dropped");
    q.delete(obj("known", 2)).unwrap();
    assert_eq!(q.len(), 1, "known: queued");
    q.add(obj("queued", 3)).unwrap();
    q.delete(obj("queued", 4)).unwrap();
    assert_eq!(q.len(), 3, "queued: appended");
}

#[tokio::test]
async fn replace_emits_tombstones_for_missing_keys() {
    let (q, _w) = delta_fifo(&["a", "b"]);
    q.add(obj("c", 5)).unwrap();
    q.replace(vec![obj("a", 10)], "10").unwrap();
    let b = pop(&q, 100).await;
    let find = |k: &str| b.deltas.iter().filter(|d| *d.key == key(k)).collect::<Vec<_>>();
    let a = find("a");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].kind, DeltaType::Replaced);
    let bb = find("b");
    assert_eq!(bb.len(), 1);
    assert_eq!(bb[0].kind, DeltaType::Deleted);
    match &bb[0].object {
        DeltaObject::Tombstone(t) => {
            assert_eq!(&*t.key, key("b"));
            assert_eq!(t.obj.as_ref().unwrap().rv, "1", "carries the known object");
        }
        other => panic!("expected a tombstone, got {other:?}"),
    }
    let c = find("c");
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].kind, DeltaType::Added);
    assert!(c[1].object.is_tombstone());
    assert_eq!(rv_of(&c[1].object).as_deref(), Some("5"), "carries the newest queued state");
    assert_eq!(b.resource_version.as_deref(), Some("10"));
}

#[tokio::test]
async fn resync_emits_sync_only_for_known_keys_with_nothing_queued() {
    let (q, _w) = delta_fifo(&["a", "b"]);
    q.update(obj("a", 2)).unwrap();
    q.resync().unwrap();
    let b = pop(&q, 100).await;
    let mut got = kinds(&b);
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![(key("a"), DeltaType::Updated, false), (key("b"), DeltaType::Sync, false)]
    );
}

#[tokio::test]
async fn has_synced_turns_true_once_the_first_replace_items_are_popped_and_done() {
    let (q, _w) = delta_fifo(&[]);
    assert!(!q.has_synced());
    q.replace(vec![obj("a", 1), obj("b", 1), obj("c", 1)], "1").unwrap();
    q.add(obj("d", 2)).unwrap();
    assert!(!q.has_synced());

    let b = timeout(Duration::from_secs(5), q.pop_batch(2)).await.unwrap().unwrap();
    assert_eq!(b.entries, 2);
    assert!(b.is_in_initial_list);
    q.done(&b);
    assert!(!q.has_synced());

    let b = timeout(Duration::from_secs(5), q.pop_batch(100)).await.unwrap().unwrap();
    assert_eq!(b.entries, 1, "a batch stops at the end of the initial list");
    assert!(b.is_in_initial_list);
    assert!(!q.has_synced(), "not synced before the batch is done");
    q.done(&b);
    assert!(q.has_synced());

    let b = pop(&q, 100).await;
    assert_eq!(kinds(&b), vec![(key("d"), DeltaType::Added, false)]);
    assert!(!b.is_in_initial_list);
}

#[tokio::test]
async fn has_synced_is_true_when_an_add_comes_before_any_replace() {
    let (q, _w) = delta_fifo(&[]);
    q.add(obj("a", 1)).unwrap();
    assert!(q.has_synced());
}

#[tokio::test(start_paused = true)]
async fn pop_blocks_until_an_item_is_queued() {
    let (q, _w) = delta_fifo(&[]);
    let q = Arc::new(q);
    let popper = tokio::spawn({
        let q = q.clone();
        async move { q.pop_batch(10).await.map(|b| b.len()) }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!popper.is_finished(), "pop returned with nothing queued");
    q.add(obj("a", 1)).unwrap();
    let n = timeout(Duration::from_secs(1), popper).await.unwrap().unwrap().unwrap();
    assert_eq!(n, 1);
}

#[tokio::test(start_paused = true)]
async fn pop_fails_with_a_clear_error_after_close_once_drained() {
    let (q, _w) = delta_fifo(&[]);
    let q = Arc::new(q);
    // A pop blocked on an empty queue wakes up on close.
    let popper = tokio::spawn({
        let q = q.clone();
        async move { q.pop_batch(10).await.map(|b| b.len()) }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    q.close();
    let res = timeout(Duration::from_secs(1), popper).await.unwrap().unwrap();
    assert_eq!(res, Err(Error::Closed));
    assert_eq!(Error::Closed.to_string(), "the delta queue is closed");
    assert_eq!(q.add(obj("a", 1)), Err(Error::Closed));
    assert!(q.is_closed());

    // What was queued before close is still delivered, then pop fails.
    let (q, _w) = real_fifo(&[]);
    q.add(obj("a", 1)).unwrap();
    q.close();
    assert_eq!(pop(&q, 10).await.len(), 1);
    let res = timeout(Duration::from_secs(1), q.pop_batch(10)).await.unwrap();
    assert_eq!(res.unwrap_err(), Error::Closed);
}

#[tokio::test]
async fn delta_fifo_batch_pops_whole_entries_up_to_max_deltas() {
    let (q, _w) = delta_fifo(&[]);
    for i in 0..5 {
        q.add(obj(&format!("k{i}"), 1)).unwrap();
        q.update(obj(&format!("k{i}"), 2)).unwrap();
    }
    let b = pop(&q, 5).await;
    assert_eq!((b.entries, b.len()), (2, 4), "a third entry would exceed 5 deltas");
    let b = pop(&q, 100).await;
    assert_eq!((b.entries, b.len()), (3, 6));
}

#[tokio::test]
async fn objects_without_a_name_are_rejected() {
    let (q, _w) = delta_fifo(&[]);
    let err = q.add(obj("", 1)).unwrap_err();
    assert!(matches!(err, Error::Key(_)), "{err}");
    assert!(q.replace(vec![obj("ok", 1), obj("", 1)], "1").is_err());
    assert_eq!(q.len(), 0, "a rejected relist queues nothing");
}

// ---------------------------------------------------------------- RealFifo

#[tokio::test]
async fn real_fifo_keeps_every_delta_in_order_and_batches_stop_at_a_repeated_key() {
    let (q, _w) = real_fifo(&[]);
    q.add(obj("a", 1)).unwrap();
    q.add(obj("b", 2)).unwrap();
    q.update(obj("a", 3)).unwrap();
    q.add(obj("c", 4)).unwrap();
    assert_eq!(q.len(), 4);
    let b = pop(&q, 100).await;
    assert_eq!(
        kinds(&b),
        vec![(key("a"), DeltaType::Added, false), (key("b"), DeltaType::Added, false)]
    );
    let b = pop(&q, 100).await;
    assert_eq!(
        kinds(&b),
        vec![(key("a"), DeltaType::Updated, false), (key("c"), DeltaType::Added, false)]
    );
}

#[tokio::test]
async fn real_fifo_batches_stop_at_max() {
    let (q, _w) = real_fifo(&[]);
    for i in 0..10 {
        q.add(obj(&format!("k{i}"), i)).unwrap();
    }
    assert_eq!(pop(&q, 4).await.len(), 4);
    assert_eq!(pop(&q, 4).await.len(), 4);
    assert_eq!(pop(&q, 4).await.len(), 2);
}

#[tokio::test]
async fn real_fifo_queues_deletes_even_for_unknown_keys() {
    let (q, _w) = real_fifo(&[]);
    q.delete(obj("stranger", 1)).unwrap();
    q.delete(obj("stranger", 2)).unwrap();
    assert_eq!(q.len(), 2, "nothing is merged or dropped");
}

#[tokio::test]
async fn real_fifo_replace_queues_tombstones_before_replaced_items() {
    let (q, _w) = real_fifo(&["k1", "k2"]);
    q.add(obj("q1", 3)).unwrap();
    q.add(obj("q2", 4)).unwrap();
    q.delete(obj("q2", 5)).unwrap();
    q.replace(vec![obj("k1", 10), obj("n1", 10)], "10").unwrap();
    let mut all = Vec::new();
    while !q.is_empty() {
        all.extend(pop(&q, 100).await.deltas);
    }
    let got: Vec<_> =
        all.iter().map(|d| (d.key.to_string(), d.kind, d.object.is_tombstone())).collect();
    assert_eq!(
        got,
        vec![
            (key("q1"), DeltaType::Added, false),
            (key("q2"), DeltaType::Added, false),
            (key("q2"), DeltaType::Deleted, false),
            // q1's newest queued delta is not a delete: tombstone with that state.
            (key("q1"), DeltaType::Deleted, true),
            // q2 is already deleted in the queue: no second delete.
            // k2 is known but not listed: tombstone with the known object.
            (key("k2"), DeltaType::Deleted, true),
            (key("k1"), DeltaType::Replaced, false),
            (key("n1"), DeltaType::Replaced, false),
        ]
    );
    assert_eq!(rv_of(&all[3].object).as_deref(), Some("3"));
    assert_eq!(rv_of(&all[4].object).as_deref(), Some("1"));
}

#[tokio::test]
async fn real_fifo_resync_skips_keys_with_queued_deltas() {
    let (q, _w) = real_fifo(&["a", "b", "c"]);
    q.update(obj("b", 2)).unwrap();
    q.resync().unwrap();
    let mut all = Vec::new();
    while !q.is_empty() {
        all.extend(pop(&q, 100).await.deltas);
    }
    let mut syncs: Vec<_> =
        all.iter().filter(|d| d.kind == DeltaType::Sync).map(|d| d.key.to_string()).collect();
    syncs.sort();
    assert_eq!(syncs, vec![key("a"), key("c")]);
}

#[tokio::test]
async fn real_fifo_initial_population_is_the_whole_queue_at_first_replace() {
    let (q, _w) = real_fifo(&[]);
    q.add(obj("x", 1)).unwrap();
    // An add came first: synced at once, as client-go.
    assert!(q.has_synced());

    let (q, _w) = real_fifo(&["gone"]);
    q.replace(vec![obj("a", 2), obj("b", 2)], "2").unwrap();
    q.add(obj("c", 3)).unwrap();
    let b = pop(&q, 100).await;
    assert_eq!(b.len(), 3, "tombstone for `gone` plus a and b");
    assert!(b.is_in_initial_list);
    assert!(q.has_synced());
    let b = pop(&q, 100).await;
    assert!(!b.is_in_initial_list);
}

// ---------------------------------------------------------------- both

#[tokio::test]
async fn delete_of_a_key_popped_but_not_yet_applied_is_not_dropped() {
    let (q, _w) = delta_fifo(&[]);
    q.add(obj("a", 1)).unwrap();
    let batch = q.pop_batch(10).await.unwrap(); // in flight: not in the store yet
    q.delete(obj("a", 2)).unwrap();
    assert_eq!(q.len(), 1, "the in-flight add makes the key known");
    q.done(&batch);
}

#[tokio::test]
async fn replace_tombstones_keys_popped_but_not_yet_applied() {
    for q in [
        Box::new(real_fifo(&[]).0) as Box<dyn Queue<Obj>>,
        Box::new(delta_fifo(&[]).0) as Box<dyn Queue<Obj>>,
    ] {
        q.add(obj("a", 1)).unwrap();
        let batch = q.pop_batch(10).await.unwrap();
        q.replace(vec![], "2").unwrap();
        q.done(&batch);
        let b = pop(&*q, 10).await;
        assert_eq!(kinds(&b), vec![(key("a"), DeltaType::Deleted, true)], "{}", q.kind());
    }
}

#[tokio::test]
async fn bookmark_on_an_empty_queue_yields_a_batch_with_only_the_version() {
    let (q, _w) = real_fifo(&[]);
    q.bookmark("42").unwrap();
    let b = pop(&q, 10).await;
    assert!(b.is_empty());
    assert_eq!(b.resource_version.as_deref(), Some("42"));
}

#[tokio::test]
async fn relist_version_comes_with_the_batch_that_completes_the_list() {
    let (q, _w) = delta_fifo(&[]);
    q.add(obj("before", 1)).unwrap();
    q.replace(vec![obj("a", 2), obj("b", 3)], "9").unwrap();
    q.add(obj("after", 10)).unwrap();
    let b1 = pop(&q, 2).await;
    assert_eq!(b1.len(), 2);
    assert_eq!(b1.resource_version.as_deref(), Some("1"), "`before` is complete, the list is not");
    let b2 = pop(&q, 2).await;
    assert_eq!(b2.resource_version.as_deref(), Some("9"));
    let b3 = pop(&q, 2).await;
    assert_eq!(b3.resource_version.as_deref(), Some("10"));
    assert!(b3.applied_through > b2.applied_through);
}

#[tokio::test]
async fn delta_fifo_batch_reports_only_versions_whose_predecessors_are_all_applied() {
    let (q, _w) = delta_fifo(&[]);
    q.add(obj("a", 1)).unwrap();
    q.add(obj("b", 2)).unwrap();
    q.update(obj("a", 3)).unwrap(); // joins a's older entry, ahead of b
    let b = pop(&q, 2).await;
    assert_eq!(kinds(&b).len(), 2, "a's entry: rv 1 and rv 3");
    assert_eq!(
        b.resource_version.as_deref(),
        Some("1"),
        "rv 3 is in the batch, but rv 2 (b) is not applied yet"
    );
    let b = pop(&q, 2).await;
    assert_eq!(b.resource_version.as_deref(), Some("3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_queue_blocks_the_producer_until_the_consumer_pops() {
    let (w, r) = known_store(&[]);
    let q = Arc::new(RealFifo::new(access(), Arc::new(r), QueueConfig::new().max_depth(2)));
    let producer = std::thread::spawn({
        let q = q.clone();
        move || {
            for i in 0..3 {
                q.add(obj(&format!("k{i}"), i)).unwrap();
            }
        }
    });
    common::eventually("two queued", || q.len() == 2).await;
    std::thread::sleep(Duration::from_millis(50));
    assert!(!producer.is_finished(), "the producer must wait for room");
    assert_eq!(q.len(), 2);
    let b = pop(&*q, 1).await;
    assert_eq!(b.len(), 1);
    common::eventually("producer done", || producer.is_finished()).await;
    producer.join().unwrap();
    let stats = q.stats();
    assert_eq!(stats.depth, 2);
    assert_eq!(stats.producer_blocked_total, 1);
    assert!(stats.producer_blocked >= Duration::from_millis(50));
    drop(w);
}

#[tokio::test(start_paused = true)]
async fn wait_capacity_resolves_when_room_frees() {
    let q = Arc::new(DeltaFifo::new(
        access(),
        Arc::new(snapinformer_core::NoKnownObjects),
        QueueConfig::new().max_depth(1),
    ));
    q.add(obj("a", 1)).unwrap();
    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.wait_capacity().await }
    });
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!waiter.is_finished());
    let _ = pop(&*q, 1).await;
    timeout(Duration::from_secs(1), waiter).await.unwrap().unwrap();
    assert_eq!(q.stats().producer_blocked_total, 1);
}

#[tokio::test]
async fn stats_report_depth_in_flight_and_oldest_delta() {
    let (q, _w) = real_fifo(&[]);
    assert_eq!(q.stats().oldest_enqueued_at, None);
    q.add(obj("a", 1)).unwrap();
    q.add(obj("b", 1)).unwrap();
    let b = q.pop_batch(1).await.unwrap();
    let s = q.stats();
    assert_eq!((s.depth, s.in_flight, s.lag_deltas()), (1, 1, 2));
    assert_eq!(s.oldest_enqueued_at, Some(b.deltas[0].enqueued_at));
    q.done(&b);
    assert_eq!(q.stats().lag_deltas(), 1);
}

#[tokio::test]
async fn has_synced_counts_relist_tombstones_in_the_initial_population() {
    let (q, _w) = delta_fifo(&["gone"]);
    q.replace(vec![obj("a", 1)], "1").unwrap();
    let b = pop(&q, 1).await;
    assert_eq!(b.entries, 1);
    assert!(!q.has_synced(), "the tombstone for `gone` is part of the first list");
    let b = pop(&q, 1).await;
    assert!(b.is_in_initial_list);
    assert!(q.has_synced());
}
