//! `wait_for` and the freshness policy, with Tokio's paused clock.

mod common;

use std::{sync::Arc, time::Duration};

use common::{Obj, access, obj};
use snapinformer_core::{Freshness, FreshnessPolicy, Informer, QueueConfig, freshness::Error};
use tokio::time::{Instant, timeout};

fn informer(policy: FreshnessPolicy) -> Informer<Obj> {
    Informer::<Obj>::builder(access()).name("fresh").freshness_policy(policy).build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn wait_for_resolves_when_the_published_snapshot_includes_the_version() {
    let inf = informer(FreshnessPolicy::new());
    let waiter = tokio::spawn({
        let inf = inf.clone();
        async move { inf.wait_for("5", Duration::from_secs(60)).await }
    });
    for rv in 1..=5 {
        inf.queue().add(obj(&format!("p{rv}"), rv)).unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiter.is_finished(), "nothing is published before the informer starts");
    inf.start().unwrap();
    let snap = timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap().unwrap();
    assert_eq!(snap.resource_version(), Some("5"));
    assert_eq!(snap.len(), 5);
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn wait_for_times_out_when_the_version_never_arrives() {
    let inf = informer(FreshnessPolicy::new());
    inf.start().unwrap();
    inf.queue().add(obj("a", 7)).unwrap();
    let start = Instant::now();
    let err = inf.wait_for("100", Duration::from_secs(3)).await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    match &err {
        Error::Timeout { target, published, .. } => {
            assert_eq!(target, "100");
            assert_eq!(published.as_deref(), Some("7"));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(err.to_string().contains("100"));
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn wait_for_compares_versions_numerically_and_rejects_opaque_ones() {
    let inf = informer(FreshnessPolicy::new());
    inf.start().unwrap();
    inf.queue().add(obj("a", 10)).unwrap();
    inf.wait_for("10", Duration::from_secs(5)).await.unwrap();
    // "9" > "10" as strings, but 9 < 10 as versions: already included.
    let snap = timeout(Duration::from_millis(1), inf.wait_for("9", Duration::from_secs(5)))
        .await
        .expect("an older version must resolve at once")
        .unwrap();
    assert_eq!(snap.resource_version(), Some("10"));
    assert_eq!(
        inf.wait_for("abc", Duration::from_secs(5)).await.unwrap_err(),
        Error::Unordered("abc".into())
    );
    // A resync re-applies old objects: the published version never goes backwards.
    inf.queue().update(obj("b", 4)).unwrap();
    inf.queue().bookmark("12").unwrap();
    inf.wait_for("12", Duration::from_secs(5)).await.unwrap();
    assert_eq!(inf.progress().resource_version_num, Some(12));
    assert_eq!(inf.snapshot().resource_version(), Some("12"));
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn waits_fail_once_the_informer_is_shut_down() {
    let inf = informer(FreshnessPolicy::new().max_lag_deltas(0));
    inf.start().unwrap();
    let waiter = tokio::spawn({
        let inf = inf.clone();
        async move { inf.wait_for("100", Duration::from_secs(60)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    inf.shutdown().await;
    let res = timeout(Duration::from_secs(1), waiter).await.unwrap().unwrap();
    assert_eq!(res.unwrap_err(), Error::Stopped);
    assert_eq!(inf.wait_for("1", Duration::from_secs(60)).await.unwrap_err(), Error::Stopped);
    assert!(inf.progress().stopped);
}

#[tokio::test(start_paused = true)]
async fn stale_reads_never_wait_while_fresh_reads_wait_for_the_writer_to_catch_up() {
    let inf = informer(FreshnessPolicy::new().max_lag_deltas(10).max_wait(Duration::from_secs(30)));
    for rv in 1..=50 {
        inf.queue().add(obj(&format!("p{rv}"), rv)).unwrap();
    }
    // The writer is 50 deltas behind (not started).
    let stale = timeout(Duration::from_millis(1), inf.read(Freshness::AcceptStale))
        .await
        .expect("a stale read never waits")
        .unwrap();
    assert!(stale.is_empty());
    let fresh = tokio::spawn({
        let inf = inf.clone();
        async move { inf.fresh_snapshot().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!fresh.is_finished(), "past the bound, a fresh read waits");
    inf.start().unwrap();
    let snap = timeout(Duration::from_secs(5), fresh).await.unwrap().unwrap().unwrap();
    assert_eq!(snap.len(), 50, "it returns a snapshot with everything queued before the read");
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn fresh_read_within_the_bound_does_not_wait() {
    let inf = informer(FreshnessPolicy::new().max_lag_deltas(10));
    for rv in 1..=5 {
        inf.queue().add(obj(&format!("p{rv}"), rv)).unwrap();
    }
    let snap = timeout(Duration::from_millis(1), inf.read(Freshness::Fresh))
        .await
        .expect("within the bound a fresh read does not wait")
        .unwrap();
    assert!(snap.is_empty());
}

#[tokio::test(start_paused = true)]
async fn fresh_read_gives_up_after_max_wait() {
    let inf = informer(FreshnessPolicy::new().max_lag_deltas(0).max_wait(Duration::from_secs(2)));
    inf.queue().add(obj("a", 1)).unwrap();
    let start = Instant::now();
    let err = inf.read(Freshness::Fresh).await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert!(matches!(err, Error::StillStale { lag_deltas: 1, .. }), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn fresh_read_waits_when_the_oldest_delta_is_older_than_the_time_bound() {
    let inf = informer(FreshnessPolicy::new().max_lag_time(Duration::from_millis(20)));
    inf.queue().add(obj("a", 1)).unwrap();
    // Fresh enough at first.
    assert!(timeout(Duration::from_millis(1), inf.read(Freshness::Fresh)).await.is_ok());
    // Delta ages are measured on the real clock (they are what the simulator reports).
    std::thread::sleep(Duration::from_millis(30));
    let fresh = tokio::spawn({
        let inf = inf.clone();
        async move { inf.read(Freshness::Fresh).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!fresh.is_finished());
    inf.start().unwrap();
    let snap = timeout(Duration::from_secs(5), fresh).await.unwrap().unwrap().unwrap();
    assert_eq!(snap.len(), 1);
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn progress_reports_publication_sync_and_applied_position() {
    let inf = Informer::<Obj>::builder(access())
        .queue_config(QueueConfig::new().max_depth(1000))
        .build()
        .unwrap();
    let mut rx = inf.subscribe();
    inf.start().unwrap();
    inf.queue().replace(vec![obj("a", 3), obj("b", 4)], "9").unwrap();
    timeout(Duration::from_secs(5), rx.wait_for(|p| p.synced)).await.unwrap().unwrap();
    let p = inf.progress();
    assert_eq!(
        p.resource_version.as_deref(),
        Some("9"),
        "the list's version, not its last object's"
    );
    assert_eq!(p.publication, 1);
    assert_eq!(p.deltas_applied, 2);
    assert_eq!(p.applied_through, inf.queue().stats().last_id);
    assert!(inf.has_synced());
    let stats = Arc::new(inf.queue().stats());
    assert_eq!(stats.lag_deltas(), 0);
    inf.shutdown().await;
}
