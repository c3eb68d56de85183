//! A relist is applied and published at once: no reader sees a store that is half the old list
//! and half the new (client-go's informers have the same atomicity since 1.36).

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Obj, access, obj};
use snapinformer_core::{
    DeltaType, Informer, NoKnownObjects, Queue, QueueKind, QueueOptions, RealFifo,
};
use tokio::time::timeout;

fn atomic() -> RealFifo<Obj> {
    RealFifo::with_options(
        access(),
        Arc::new(NoKnownObjects),
        QueueOptions::new().atomic_relist(true),
    )
}

#[tokio::test]
async fn a_relist_larger_than_the_batch_limit_pops_as_one_batch() {
    let q = atomic();
    let listed: Vec<_> = (0..2500).map(|i| obj(&format!("p{i}"), i + 1)).collect();
    q.replace(listed, "2500").unwrap();
    let batch = timeout(Duration::from_secs(5), q.pop_batch(1000)).await.unwrap().unwrap();
    assert_eq!(batch.deltas.len(), 2500);
    assert!(batch.deltas.iter().all(|d| d.kind == DeltaType::Replaced));
    assert_eq!(batch.resource_version.as_deref(), Some("2500"));
    q.done(&batch);
    assert!(q.is_empty());
}

#[tokio::test]
async fn deltas_queued_before_a_relist_pop_first_and_stop_at_it() {
    let q = atomic();
    q.add(obj("early-1", 1)).unwrap();
    q.add(obj("early-2", 2)).unwrap();
    q.replace(vec![obj("a", 3), obj("b", 4), obj("c", 5)], "5").unwrap();
    q.add(obj("late", 6)).unwrap();
    let sizes = {
        let mut sizes = Vec::new();
        while !q.is_empty() {
            let b = timeout(Duration::from_secs(5), q.pop_batch(2)).await.unwrap().unwrap();
            sizes.push(
                b.deltas.iter().map(|d| format!("{:?} {}", d.kind, d.key)).collect::<Vec<_>>(),
            );
            q.done(&b);
        }
        sizes
    };
    // The adds before the relist fill one batch of two; the relist (tombstones for the two
    // queued objects it does not list, then its three objects) ignores the limit of two; the
    // add after it comes alone.
    let want: Vec<Vec<&str>> = vec![
        vec!["Added default/early-1", "Added default/early-2"],
        vec![
            "Deleted default/early-1",
            "Deleted default/early-2",
            "Replaced default/a",
            "Replaced default/b",
            "Replaced default/c",
        ],
        vec!["Added default/late"],
    ];
    assert_eq!(sizes, want);
}

#[tokio::test]
async fn a_relist_with_tombstones_pops_them_with_the_listed_objects() {
    let q = atomic();
    q.add(obj("gone", 1)).unwrap();
    let first = timeout(Duration::from_secs(5), q.pop_batch(10)).await.unwrap().unwrap();
    q.done(&first);
    q.add(obj("queued-then-gone", 2)).unwrap();
    q.replace((0..5).map(|i| obj(&format!("p{i}"), 10 + i)).collect(), "20").unwrap();
    let adds = timeout(Duration::from_secs(5), q.pop_batch(1)).await.unwrap().unwrap();
    assert_eq!(adds.deltas.len(), 1);
    q.done(&adds);
    let relist = timeout(Duration::from_secs(5), q.pop_batch(1)).await.unwrap().unwrap();
    let kinds: Vec<_> = relist.deltas.iter().map(|d| d.kind).collect();
    assert_eq!(kinds.iter().filter(|k| **k == DeltaType::Deleted).count(), 1, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == DeltaType::Replaced).count(), 5, "{kinds:?}");
}

#[tokio::test]
async fn the_informer_publishes_a_relist_once_even_beyond_max_batch() {
    let publications: Arc<Mutex<Vec<usize>>> = Arc::default();
    let seen = publications.clone();
    let informer = Informer::<Obj>::builder(access())
        .name("atomic")
        .queue(QueueKind::Real)
        .max_batch(100)
        .on_publish(move |p| seen.lock().unwrap().push(p.deltas.len()))
        .build()
        .unwrap();
    informer.start().unwrap();
    informer
        .queue()
        .replace((0..1000).map(|i| obj(&format!("p{i}"), i + 1)).collect(), "1000")
        .unwrap();
    timeout(Duration::from_secs(10), informer.wait_for("1000", Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();
    // A second relist that drops half the objects: published in one go as well.
    informer
        .queue()
        .replace((0..500).map(|i| obj(&format!("p{i}"), 2000 + i)).collect(), "2500")
        .unwrap();
    let snap = timeout(Duration::from_secs(10), informer.wait_for("2500", Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snap.len(), 500);
    assert_eq!(*publications.lock().unwrap(), vec![1000, 1000]);
    informer.shutdown().await;
}

#[tokio::test]
async fn a_list_that_repeats_a_key_splits_before_the_repeat() {
    let q = atomic();
    q.replace(vec![obj("a", 1), obj("b", 2), obj("a", 3), obj("c", 4)], "4").unwrap();
    let first = timeout(Duration::from_secs(5), q.pop_batch(1000)).await.unwrap().unwrap();
    assert_eq!(first.deltas.len(), 2);
    q.done(&first);
    let rest = timeout(Duration::from_secs(5), q.pop_batch(1)).await.unwrap().unwrap();
    assert_eq!(rest.deltas.len(), 2, "the rest of the relist still pops whole");
    assert_eq!(rest.resource_version.as_deref(), Some("4"));
}

#[tokio::test]
async fn without_atomic_relists_a_relist_pops_in_batches_of_max() {
    let q = RealFifo::without_known_objects(access());
    q.replace((0..25).map(|i| obj(&format!("p{i}"), i + 1)).collect(), "25").unwrap();
    let b = timeout(Duration::from_secs(5), q.pop_batch(10)).await.unwrap().unwrap();
    assert_eq!(b.deltas.len(), 10);
}
