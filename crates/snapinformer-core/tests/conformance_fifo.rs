//! Conformance: client-go v0.37.2 `tools/cache/fifo_test.go` (its helpers are in
//! `fifo_helpers`).
//!
//! client-go's plain `FIFO` keeps only the latest object per key and is used by nothing but
//! client-go's own tests; we have no such queue. Its cases describe what any of client-go's keyed
//! queues promises to the consumer of the newest state, so they run here on our `DeltaFifo`
//! reading the newest delta of each popped entry (what `FIFO` would have held). Named
//! `test_fifo_<client-go test>[_<case>]`.

mod fifo_helpers;

use std::{sync::Arc, time::Duration};

use fifo_helpers::{delta_fifo_no_lister, mk, pop, pop_newest, pop_would_wait};
use snapinformer_core::{Queue, queue::Error};

#[tokio::test]
async fn test_fifo_basic() {
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
    for p in producers {
        p.join().unwrap();
    }
}

#[tokio::test]
async fn test_fifo_add_update() {
    let f = delta_fifo_no_lister();
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("foo", 15)).unwrap();
    let newest: Vec<i64> = f.list().iter().map(|o| o.object().unwrap().val).collect();
    assert_eq!(newest, [15]);
    assert_eq!(f.list_keys(), vec![Arc::from("foo")]);
    assert_eq!(pop_newest(&f).await.val, 15);
    assert!(pop_would_wait(&f), "no second value");
    assert!(f.get(&mk("foo", 0)).unwrap().is_none(), "the item was removed");
}

#[tokio::test]
async fn test_fifo_add_replace() {
    let f = delta_fifo_no_lister();
    f.add(mk("foo", 10)).unwrap();
    f.replace(vec![mk("foo", 15)], "15").unwrap();
    assert_eq!(pop_newest(&f).await.val, 15);
    assert!(pop_would_wait(&f), "no second value");
    assert!(f.get(&mk("foo", 0)).unwrap().is_none(), "the item was removed");
}

#[tokio::test]
async fn test_fifo_detect_line_jumpers() {
    let f = delta_fifo_no_lister();
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 1)).unwrap();
    f.add(mk("foo", 11)).unwrap();
    f.add(mk("foo", 13)).unwrap();
    f.add(mk("zab", 30)).unwrap();
    assert_eq!(pop_newest(&f).await.val, 13);
    f.add(mk("foo", 14)).unwrap();
    for want in [1, 30, 14] {
        assert_eq!(pop_newest(&f).await.val, want);
    }
}

#[tokio::test]
async fn test_fifo_has_synced() {
    // The six cases of client-go's table, in order.
    let f = delta_fifo_no_lister();
    assert!(!f.has_synced(), "case 0: nothing queued");
    let f = delta_fifo_no_lister();
    f.add(mk("a", 1)).unwrap();
    assert!(f.has_synced(), "case 1: an add first");
    let f = delta_fifo_no_lister();
    f.replace(vec![], "0").unwrap();
    assert!(f.has_synced(), "case 2: an empty replace");
    let f = delta_fifo_no_lister();
    f.replace(vec![mk("a", 1), mk("b", 2)], "0").unwrap();
    assert!(!f.has_synced(), "case 3: replace, nothing popped");
    pop(&f).await;
    assert!(!f.has_synced(), "case 4: replace, one of two popped");
    pop(&f).await;
    assert!(f.has_synced(), "case 5: replace, both popped");
}

#[tokio::test]
async fn test_fifo_pop_should_unblock_when_closed() {
    let f = Arc::new(delta_fifo_no_lister());
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
