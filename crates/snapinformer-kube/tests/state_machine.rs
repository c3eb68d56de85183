//! The reflector's state machine, stepped one transition at a time against a scripted
//! list/watch, on a paused clock.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::WatchEvent;
use snapinformer_core::Informer;
use snapinformer_kube::{
    BackoffConfig, Error, EventKind, NextAction, Phase, Reflector, ReflectorConfig, Step, access,
};

fn informer() -> Informer<Pod> {
    let inf = Informer::builder(access::<Pod>()).name("test").build().unwrap();
    inf.start().unwrap();
    inf
}

/// Plain lists unless a test asks for streaming lists: client-go's fake list-watchers opt out
/// of watch-list semantics the same way (`DoesClientNotSupportWatchListSemantics`).
fn config() -> ReflectorConfig {
    ReflectorConfig::new()
        .name("test")
        .watch_list(false)
        .backoff(BackoffConfig::new().initial(Duration::from_millis(100)).jitter(0.0))
}

fn reflector(lw: &FakeLw, inf: &Informer<Pod>, config: ReflectorConfig) -> Reflector<Pod, FakeLw> {
    Reflector::new(lw.clone(), inf.queue().clone(), config)
}

async fn step(r: &mut Reflector<Pod, FakeLw>) -> Step {
    within(3600, "a reflector step", r.step()).await.expect("the queue is open")
}

fn list_call(rv: Option<&str>, limit: Option<u32>, token: Option<&str>) -> Call {
    Call::List { rv: rv.map(str::to_owned), limit, continue_token: token.map(str::to_owned) }
}

async fn published(inf: &Informer<Pod>, rv: &str) -> std::collections::BTreeMap<String, u64> {
    let snap = within(10, "publication", inf.wait_for(rv, Duration::from_secs(10))).await.unwrap();
    snapshot_state(&snap)
}

#[tokio::test(start_paused = true)]
async fn first_list_asks_for_version_zero_then_watches_from_the_list_version() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 3), pod("b", 5)], 7, None)))
        .watch(WatchScript::Events(vec![Ok(WatchEvent::Added(pod("c", 8)))], End::Hang));
    let mut r = reflector(&lw, &inf, config());
    assert_eq!(r.relist_resource_version(), "0");
    let listed = step(&mut r).await;
    assert!(
        matches!(listed, Step::Listed { objects: 2, ref resource_version, streaming: false } if resource_version == "7")
    );
    assert_eq!(lw.calls()[0], list_call(Some("0"), Some(500), None));
    assert_eq!(r.phase(), Phase::Watch);
    assert!(
        matches!(step(&mut r).await, Step::WatchOpened { ref resource_version } if resource_version == "7")
    );
    match lw.last_call() {
        Call::Watch { rv, initial_events, timeout, bookmarks } => {
            assert_eq!((rv.as_str(), initial_events, bookmarks), ("7", false, true));
            let t = timeout.unwrap();
            assert!((145..=290).contains(&t), "server-side watch timeout {t}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(step(&mut r).await, Step::Event { kind: EventKind::Added, .. }));
    assert_eq!(r.last_sync_resource_version(), Some("8"));
    let state = published(&inf, "8").await;
    assert_eq!(state.len(), 3);
    assert_eq!(r.status().stats.lists, 1);
    assert!(r.status().listed);
}

#[tokio::test(start_paused = true)]
async fn watch_that_ends_normally_is_reopened_from_the_last_version_without_a_relist() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 3)], 3, None)))
        .watch(WatchScript::Events(
            vec![Ok(WatchEvent::Modified(pod("a", 4))), Ok(WatchEvent::Added(pod("b", 6)))],
            End::Close,
        ))
        .watch(WatchScript::Events(vec![], End::Hang));
    let mut r = reflector(&lw, &inf, config());
    for _ in 0..4 {
        step(&mut r).await;
    }
    assert!(matches!(step(&mut r).await, Step::WatchEnded { events: 2 }));
    assert_eq!(r.phase(), Phase::Watch);
    assert!(
        matches!(step(&mut r).await, Step::WatchOpened { ref resource_version } if resource_version == "6")
    );
    let lists = lw.calls().iter().filter(|c| matches!(c, Call::List { .. })).count();
    assert_eq!(lists, 1, "no relist: {:?}", lw.calls());
    assert_eq!(published(&inf, "6").await.get("default/a"), Some(&4));
}

#[tokio::test(start_paused = true)]
async fn watch_410_relists_from_the_last_synced_version_and_turns_vanished_objects_into_tombstones()
{
    let (lw, inf) = (FakeLw::new(), informer());
    let (model, handler) = recorder();
    inf.add_event_handler(handler).unwrap();
    lw.list(Ok(list(vec![pod("a", 3), pod("b", 4)], 4, None)))
        .watch(WatchScript::Events(
            vec![
                Ok(WatchEvent::Modified(pod("a", 5))),
                Ok(WatchEvent::Error(status(410, "Expired", "too old resource version: 5 (9)"))),
            ],
            End::Hang,
        ))
        .list(Ok(list(vec![pod("a", 5), pod("c", 9)], 10, None)))
        .watch(WatchScript::Events(vec![], End::Hang));
    let mut r = reflector(&lw, &inf, config());
    for _ in 0..3 {
        step(&mut r).await;
    }
    // The watch delivered an event and stayed open a second: the relist comes at once.
    tokio::time::advance(Duration::from_secs(1)).await;
    match step(&mut r).await {
        Step::Failed { error, next: NextAction::Relist, retry_in } => {
            assert!(error.is_expired(), "{error}");
            assert_eq!(retry_in, Duration::ZERO);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.relist_resource_version(), "5", "relist from the last synced version");
    assert!(matches!(step(&mut r).await, Step::Listed { .. }));
    assert_eq!(
        lw.last_call(),
        list_call(Some("5"), None, None),
        "no paging for a versioned relist"
    );
    let state = published(&inf, "10").await;
    assert_eq!(state.keys().collect::<Vec<_>>(), ["default/a", "default/c"]);
    eventually_real("tombstone for b", || model.lock().unwrap().tombstones == 1).await;
    let m = model.lock().unwrap();
    assert!(m.violations.is_empty(), "{:?}", m.violations);
    assert!(!m.objects.contains_key("default/b"));
    assert_eq!(r.status().stats.expired, 1);
}

#[tokio::test(start_paused = true)]
async fn list_410_or_too_large_version_is_retried_at_once_as_a_consistent_list() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 3)], 3, None)))
        .watch(WatchScript::Events(
            vec![Ok(WatchEvent::Error(status(410, "Expired", "gone")))],
            End::Hang,
        ))
        .list(Err(api_error(410, "Expired")))
        .list(Ok(list(vec![pod("a", 3)], 12, None)))
        .watch(WatchScript::Events(
            vec![Ok(WatchEvent::Error(status(410, "Expired", "gone")))],
            End::Hang,
        ))
        .list(Err(too_large()))
        .list(Ok(list(vec![pod("a", 3)], 14, None)));
    let mut r = reflector(&lw, &inf, config());
    for _ in 0..3 {
        step(&mut r).await;
    }
    // A 410 on a watch that delivered nothing relists after a backoff.
    assert!(matches!(step(&mut r).await, Step::Waited { .. }));
    let failed = step(&mut r).await;
    assert!(
        matches!(failed, Step::Failed { next: NextAction::Relist, retry_in: Duration::ZERO, .. }),
        "{failed:?}"
    );
    assert_eq!(lw.last_call(), list_call(Some("3"), None, None));
    assert_eq!(r.relist_resource_version(), "", "a consistent list next");
    assert!(matches!(step(&mut r).await, Step::Listed { .. }));
    assert_eq!(lw.last_call(), list_call(None, Some(500), None), "unset version, paged");
    assert_eq!(r.relist_resource_version(), "12");
    for _ in 0..3 {
        step(&mut r).await;
    }
    let failed = step(&mut r).await;
    assert!(
        matches!(&failed, Step::Failed { error, retry_in: Duration::ZERO, .. } if error.is_too_large_resource_version()),
        "{failed:?}"
    );
    assert!(matches!(step(&mut r).await, Step::Listed { .. }));
    assert_eq!(lw.last_call(), list_call(None, Some(500), None));
    let stats = r.status().stats;
    // Only the two unproductive watches answered 410 backed off; the lists were retried at once.
    assert_eq!((stats.expired, stats.too_large, stats.backoffs), (3, 1, 2));
}

#[tokio::test(start_paused = true)]
async fn expired_continue_token_falls_back_to_a_full_list_at_the_requested_version() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 2), pod("b", 3)], 5, Some("t1"))))
        .list(Err(api_error(410, "Expired")))
        .list(Ok(list(vec![pod("a", 2), pod("b", 3), pod("c", 6)], 7, None)));
    let mut r = reflector(&lw, &inf, config().page_size(Some(2)));
    assert!(matches!(step(&mut r).await, Step::ListPage { objects: 2 }));
    assert_eq!(r.phase(), Phase::Listing);
    assert!(matches!(step(&mut r).await, Step::Failed { next: NextAction::Relist, .. }));
    assert_eq!(
        lw.last_call(),
        list_call(None, Some(2), Some("t1")),
        "a continue page carries no version"
    );
    assert!(matches!(step(&mut r).await, Step::Listed { objects: 3, .. }));
    assert_eq!(
        lw.last_call(),
        list_call(Some("0"), None, None),
        "full list at the requested version"
    );
    assert_eq!(published(&inf, "7").await.len(), 3);
    assert_eq!(r.status().stats.full_list_fallbacks, 1);
}

#[tokio::test(start_paused = true)]
async fn relists_keep_paging_once_a_list_at_version_zero_came_back_paginated() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 2)], 5, Some("t1"))))
        .list(Ok(list(vec![pod("b", 3)], 5, None)))
        .watch(WatchScript::Events(
            vec![Ok(WatchEvent::Error(status(410, "Expired", "gone")))],
            End::Hang,
        ))
        .list(Ok(list(vec![pod("a", 2)], 8, None)));
    let mut r = reflector(&lw, &inf, config());
    for _ in 0..5 {
        step(&mut r).await;
    }
    assert!(matches!(step(&mut r).await, Step::Listed { objects: 1, .. }));
    assert_eq!(lw.last_call(), list_call(Some("5"), Some(500), None));
}

#[tokio::test(start_paused = true)]
async fn bookmarks_advance_the_version_without_touching_the_store() {
    let (lw, inf) = (FakeLw::new(), informer());
    let (model, handler) = recorder();
    inf.add_event_handler(handler).unwrap();
    lw.list(Ok(list(vec![pod("a", 3)], 3, None)))
        .watch(WatchScript::Events(vec![Ok(bookmark(40, false))], End::Hang));
    let mut r = reflector(&lw, &inf, config());
    for _ in 0..2 {
        step(&mut r).await;
    }
    assert!(
        matches!(step(&mut r).await, Step::Bookmark { ref resource_version } if resource_version == "40")
    );
    assert_eq!(r.last_sync_resource_version(), Some("40"));
    let snap = within(10, "bookmark", inf.wait_for("40", Duration::from_secs(10))).await.unwrap();
    assert_eq!(snapshot_state(&snap), [("default/a".to_owned(), 3)].into());
    eventually_real("initial add", || model.lock().unwrap().notifications == 1).await;
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(model.lock().unwrap().notifications, 1, "a bookmark notifies nobody");
    assert_eq!(r.status().stats.bookmarks, 1);
}

#[tokio::test(start_paused = true)]
async fn throttled_watch_waits_at_least_retry_after_then_rewatches_without_relisting() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 3)], 3, None)))
        .watch(WatchScript::Fail(api_error(429, "TooManyRequests")))
        .watch(WatchScript::Fail(api_error(500, "InternalError")))
        .watch(WatchScript::Events(vec![], End::Hang));
    let mut r = reflector(&lw, &inf, config());
    step(&mut r).await;
    match step(&mut r).await {
        Step::Failed { error, next: NextAction::Rewatch, retry_in } => {
            assert!(error.is_throttled());
            assert_eq!(retry_in, Duration::from_secs(3), "Retry-After beats the 100 ms backoff");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.phase(), Phase::BackingOff);
    let start = tokio::time::Instant::now();
    assert!(matches!(step(&mut r).await, Step::Waited { .. }));
    assert!(start.elapsed() >= Duration::from_secs(3));
    match step(&mut r).await {
        Step::Failed { next: NextAction::Rewatch, retry_in, .. } => {
            assert_eq!(retry_in, Duration::from_millis(200), "the backoff doubled");
        }
        other => panic!("{other:?}"),
    }
    step(&mut r).await;
    assert!(
        matches!(step(&mut r).await, Step::WatchOpened { ref resource_version } if resource_version == "3")
    );
    let stats = r.status().stats;
    assert_eq!((stats.lists, stats.throttled, stats.errors, stats.backoffs), (1, 1, 1, 2));
}

#[tokio::test(start_paused = true)]
async fn failing_lists_back_off_exponentially_and_then_succeed() {
    let (lw, inf) = (FakeLw::new(), informer());
    for _ in 0..4 {
        lw.list(Err(api_error(500, "InternalError")));
    }
    lw.list(Ok(list(vec![pod("a", 3)], 3, None)));
    let mut r = reflector(&lw, &inf, config());
    let mut waits = Vec::new();
    loop {
        match step(&mut r).await {
            Step::Failed { retry_in, next: NextAction::Relist, .. } => {
                waits.push(retry_in.as_millis())
            }
            Step::Waited { .. } => {}
            Step::Listed { .. } => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(waits, [100, 200, 400, 800]);
}

#[tokio::test(start_paused = true)]
async fn watch_kept_open_past_its_timeout_is_abandoned_and_reopened() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![], 3, None)))
        .watch(WatchScript::Events(vec![], End::Hang))
        .watch(WatchScript::Events(vec![], End::Hang));
    let cfg =
        config().min_watch_timeout(Duration::from_secs(10)).watch_grace(Duration::from_secs(5));
    let mut r = reflector(&lw, &inf, cfg);
    step(&mut r).await;
    step(&mut r).await;
    let start = tokio::time::Instant::now();
    match step(&mut r).await {
        Step::Failed { error: Error::WatchTimeout(_), next: NextAction::Rewatch, .. } => {}
        other => panic!("{other:?}"),
    }
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(15) && waited <= Duration::from_secs(26), "{waited:?}");
    assert!(matches!(step(&mut r).await, Step::WatchOpened { .. }));
    assert_eq!(r.status().stats.watch_timeouts, 1);
}

#[tokio::test(start_paused = true)]
async fn undecodable_watch_event_is_counted_and_answered_with_a_relist() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 3)], 3, None)))
        .watch(WatchScript::Events(
            vec![Ok(WatchEvent::Added(pod("b", 4))), Err(serde_error())],
            End::Hang,
        ))
        .list(Ok(list(vec![pod("a", 3), pod("b", 4), pod("c", 5)], 5, None)));
    let mut r = reflector(&lw, &inf, config());
    for _ in 0..3 {
        step(&mut r).await;
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    match step(&mut r).await {
        Step::Failed { error: Error::Malformed(_), next: NextAction::Relist, retry_in } => {
            assert_eq!(retry_in, Duration::ZERO, "after a productive watch: at once");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(step(&mut r).await, Step::Listed { objects: 3, .. }));
    assert_eq!(lw.last_call(), list_call(Some("4"), None, None));
    assert_eq!(published(&inf, "5").await.len(), 3);
    assert_eq!(r.status().stats.malformed, 1);
}

#[tokio::test(start_paused = true)]
async fn watch_event_object_without_a_name_is_counted_and_skipped() {
    let (lw, inf) = (FakeLw::new(), informer());
    let mut nameless = pod("x", 4);
    nameless.metadata.name = None;
    lw.list(Ok(list(vec![pod("a", 3)], 3, None))).watch(WatchScript::Events(
        vec![Ok(WatchEvent::Added(nameless)), Ok(WatchEvent::Added(pod("b", 5)))],
        End::Hang,
    ));
    let mut r = reflector(&lw, &inf, config());
    for _ in 0..2 {
        step(&mut r).await;
    }
    match step(&mut r).await {
        Step::Failed { error: Error::Malformed(_), next: NextAction::Continue, .. } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(r.phase(), Phase::Watching, "the watch goes on");
    assert!(matches!(step(&mut r).await, Step::Event { .. }));
    assert_eq!(published(&inf, "5").await.len(), 2);
    assert_eq!(r.status().stats.malformed, 1);
}

#[tokio::test(start_paused = true)]
async fn listed_objects_without_a_name_are_skipped_and_the_rest_is_stored() {
    let (lw, inf) = (FakeLw::new(), informer());
    let mut nameless = pod("x", 2);
    nameless.metadata.name = Some(String::new());
    lw.list(Ok(list(vec![pod("a", 3), nameless], 3, None)));
    let mut r = reflector(&lw, &inf, config());
    assert!(matches!(step(&mut r).await, Step::Listed { objects: 1, .. }));
    assert_eq!(published(&inf, "3").await.len(), 1);
    assert_eq!(r.status().stats.malformed, 1);
}

#[tokio::test(start_paused = true)]
async fn streaming_list_collects_initial_events_until_the_end_bookmark_then_keeps_watching() {
    let (lw, inf) = (FakeLw::new(), informer());
    let (model, handler) = recorder();
    inf.add_event_handler(handler).unwrap();
    lw.watch(WatchScript::Events(
        vec![
            Ok(WatchEvent::Added(pod("a", 2))),
            Ok(WatchEvent::Added(pod("b", 3))),
            Ok(bookmark(9, true)),
            Ok(WatchEvent::Deleted(pod("a", 10))),
        ],
        End::Hang,
    ));
    let mut r = reflector(&lw, &inf, config().watch_list(true));
    assert!(
        matches!(step(&mut r).await, Step::StreamingListOpened { ref resource_version } if resource_version.is_empty())
    );
    match lw.last_call() {
        Call::Watch { initial_events: true, bookmarks: true, .. } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(r.phase(), Phase::StreamingList);
    step(&mut r).await;
    step(&mut r).await;
    assert!(inf.snapshot().is_empty(), "nothing is queued before the end bookmark");
    assert!(matches!(step(&mut r).await, Step::Listed { objects: 2, streaming: true, .. }));
    assert_eq!(r.phase(), Phase::Watching);
    assert!(matches!(step(&mut r).await, Step::Event { kind: EventKind::Deleted, .. }));
    assert_eq!(published(&inf, "10").await.keys().collect::<Vec<_>>(), ["default/b"]);
    eventually_real("delete", || model.lock().unwrap().deletes == 1).await;
    assert_eq!(lw.calls().len(), 1, "no list request at all");
    assert!(inf.has_synced());
}

#[tokio::test]
async fn a_server_older_than_1_27_gets_plain_lists_without_a_streaming_attempt() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.server_minor(26).list(Ok(list(vec![pod("a", 3)], 3, None)));
    // Streaming lists are the default, as in client-go since 1.35.
    let mut r = reflector(&lw, &inf, ReflectorConfig::new().name("old-server"));
    assert!(matches!(step(&mut r).await, Step::Listed { streaming: false, .. }));
    assert!(matches!(lw.calls()[0], Call::List { .. }), "{:?}", lw.calls());
    assert_eq!(r.status().stats.watch_list_fallbacks, 0);
}

#[tokio::test]
async fn a_server_of_1_27_or_later_gets_a_streaming_list_by_default() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.server_minor(37).watch(WatchScript::Events(
        vec![Ok(WatchEvent::Added(pod("a", 3))), Ok(bookmark(3, true))],
        End::Hang,
    ));
    let mut r = reflector(&lw, &inf, ReflectorConfig::new().name("new-server"));
    assert!(matches!(step(&mut r).await, Step::StreamingListOpened { .. }));
    assert!(matches!(lw.calls()[0], Call::Watch { initial_events: true, .. }), "{:?}", lw.calls());
    step(&mut r).await; // the object
    assert!(matches!(step(&mut r).await, Step::Listed { objects: 1, streaming: true, .. }));
}

#[tokio::test(start_paused = true)]
async fn refused_streaming_list_falls_back_to_a_list_and_is_not_asked_again() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.watch(WatchScript::Fail(api_error(422, "Invalid")))
        .list(Ok(list(vec![pod("a", 3)], 3, None)))
        .watch(WatchScript::Events(
            vec![Ok(WatchEvent::Error(status(410, "Expired", "gone")))],
            End::Hang,
        ))
        .list(Ok(list(vec![pod("a", 3)], 5, None)));
    let mut r = reflector(&lw, &inf, config().watch_list(true));
    assert!(matches!(step(&mut r).await, Step::Failed { next: NextAction::Relist, .. }));
    assert!(matches!(step(&mut r).await, Step::Listed { streaming: false, .. }));
    step(&mut r).await; // the watch
    step(&mut r).await; // its 410
    step(&mut r).await; // the backoff (the watch delivered nothing)
    assert!(matches!(step(&mut r).await, Step::Listed { streaming: false, .. }));
    assert_eq!(r.status().stats.watch_list_fallbacks, 1);
}

#[tokio::test(start_paused = true)]
async fn streaming_list_cut_before_its_end_bookmark_falls_back_to_a_list() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.watch(WatchScript::Events(vec![Ok(WatchEvent::Added(pod("a", 2)))], End::Close))
        .list(Ok(list(vec![pod("a", 2)], 4, None)))
        .watch(WatchScript::Events(vec![], End::Hang))
        .watch(WatchScript::Events(vec![Ok(bookmark(6, true))], End::Hang));
    let mut r = reflector(&lw, &inf, config().watch_list(true));
    step(&mut r).await;
    step(&mut r).await;
    match step(&mut r).await {
        Step::Failed { error: Error::WatchListIncomplete, next: NextAction::Relist, .. } => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(step(&mut r).await, Step::Listed { streaming: false, .. }));
    assert_eq!(published(&inf, "4").await.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn very_short_empty_watch_backs_off_before_reopening() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![], 3, None)))
        .watch(WatchScript::Events(vec![], End::Close))
        .watch(WatchScript::Events(vec![], End::Hang));
    let mut r = reflector(&lw, &inf, config());
    step(&mut r).await;
    step(&mut r).await;
    match step(&mut r).await {
        Step::Failed { error: Error::ShortWatch(_), next: NextAction::Rewatch, retry_in } => {
            assert_eq!(retry_in, Duration::from_millis(100));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn transform_runs_before_objects_enter_the_queue() {
    let (lw, inf) = (FakeLw::new(), informer());
    let mut p = pod("a", 3);
    p.metadata.managed_fields = Some(vec![Default::default()]);
    let mut q = pod("b", 4);
    q.metadata.managed_fields = Some(vec![Default::default()]);
    lw.list(Ok(list(vec![p], 3, None)))
        .watch(WatchScript::Events(vec![Ok(WatchEvent::Added(q))], End::Hang));
    let mut r = reflector(&lw, &inf, config())
        .with_transform(snapinformer_kube::transform::strip_managed_fields::<Pod>);
    for _ in 0..3 {
        step(&mut r).await;
    }
    let snap = within(10, "publication", inf.wait_for("4", Duration::from_secs(10))).await.unwrap();
    assert_eq!(snap.len(), 2);
    assert!(snap.iter().all(|p| p.metadata.managed_fields.is_none()));
}

#[tokio::test(start_paused = true)]
async fn a_closed_queue_stops_the_reflector() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 3)], 3, None)));
    let mut r = reflector(&lw, &inf, config());
    inf.shutdown().await;
    assert!(matches!(r.step().await, Err(Error::QueueClosed)));
    let lw2 = FakeLw::new();
    lw2.list(Ok(list(vec![], 1, None)));
    let inf2 = informer();
    let r2 = reflector(&lw2, &inf2, config());
    inf2.queue().close();
    within(10, "run ends", r2.run()).await;
}

#[tokio::test(start_paused = true)]
async fn spawned_reflector_exposes_its_status_and_stops_on_request() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![pod("a", 3)], 3, None)))
        .watch(WatchScript::Events(vec![Ok(bookmark(11, false))], End::Hang));
    let handle = reflector(&lw, &inf, config()).spawn();
    eventually(10, "bookmark received", || {
        handle.last_sync_resource_version().as_deref() == Some("11")
    })
    .await;
    assert_eq!(handle.status().phase, Phase::Watching);
    within(10, "stop", handle.stop()).await;
    assert!(handle.is_finished());
}

#[tokio::test(start_paused = true)]
async fn a_full_bounded_queue_makes_the_reflector_wait_for_room_without_losing_events() {
    let inf = Informer::builder(access::<Pod>())
        .queue_config(snapinformer_core::QueueConfig::new().max_depth(2))
        .build()
        .unwrap();
    let lw = FakeLw::new();
    lw.list(Ok(list(vec![], 1, None))).watch(WatchScript::Events(
        vec![
            Ok(WatchEvent::Added(pod("a", 2))),
            Ok(WatchEvent::Added(pod("b", 3))),
            Ok(WatchEvent::Added(pod("c", 4))),
        ],
        End::Hang,
    ));
    let handle = reflector(&lw, &inf, config()).spawn();
    eventually(10, "two events queued", || {
        handle.last_sync_resource_version().as_deref() == Some("3")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(handle.last_sync_resource_version().as_deref(), Some("3"), "waiting for room");
    assert_eq!(inf.queue().len(), 2);
    inf.start().unwrap();
    let snap = within(10, "drained", inf.wait_for("4", Duration::from_secs(10))).await.unwrap();
    assert_eq!(snap.len(), 3);
    handle.stop().await;
}

#[tokio::test(start_paused = true)]
async fn throttled_streaming_list_is_retried_after_the_backoff_not_replaced_by_a_list() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.watch(WatchScript::Fail(api_error(429, "TooManyRequests")))
        .watch(WatchScript::Events(vec![Ok(bookmark(5, true))], End::Hang));
    let mut r = reflector(&lw, &inf, config().watch_list(true));
    match step(&mut r).await {
        Step::Failed { next: NextAction::Relist, retry_in, .. } => {
            assert_eq!(retry_in, Duration::from_secs(3), "Retry-After");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(step(&mut r).await, Step::Waited { .. }));
    assert!(matches!(step(&mut r).await, Step::StreamingListOpened { .. }));
    assert!(matches!(step(&mut r).await, Step::Listed { objects: 0, streaming: true, .. }));
    assert!(lw.calls().iter().all(|c| matches!(c, Call::Watch { initial_events: true, .. })));
    assert_eq!(r.status().stats.watch_list_fallbacks, 0);
}

/// What a refused TCP connection looks like to the reflector.
fn refused() -> kube::Error {
    kube::Error::Service(Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)))
}

/// Steps until the next backoff wait is announced; returns it.
async fn next_wait(r: &mut Reflector<Pod, FakeLw>) -> Duration {
    for _ in 0..10 {
        if let Step::Failed { retry_in, .. } = step(r).await
            && !retry_in.is_zero()
        {
            return retry_in;
        }
    }
    panic!("no backoff within 10 steps");
}

/// Three refused watches, then a watch that delivers an event and stays open for two to three
/// seconds before it is abandoned at its deadline, then refused watches again: the waits.
async fn waits_around_a_healthy_watch(healthy: Option<Duration>) -> Vec<u128> {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![], 1, None)));
    for _ in 0..3 {
        lw.watch(WatchScript::Fail(refused()));
    }
    lw.watch(WatchScript::Events(vec![Ok(WatchEvent::Added(pod("a", 2)))], End::Hang));
    for _ in 0..2 {
        lw.watch(WatchScript::Fail(refused()));
    }
    let cfg = config()
        .min_watch_timeout(Duration::from_secs(1))
        .watch_grace(Duration::from_secs(1))
        .backoff(
            BackoffConfig::new()
                .initial(Duration::from_millis(100))
                .jitter(0.0)
                .healthy_watch(healthy),
        );
    let mut r = reflector(&lw, &inf, cfg);
    let mut waits = Vec::new();
    for _ in 0..3 {
        waits.push(next_wait(&mut r).await.as_millis());
    }
    // The healthy watch: opened, one event, then abandoned at its deadline (2 to 3 s later).
    assert!(matches!(step(&mut r).await, Step::Waited { .. }));
    assert!(matches!(step(&mut r).await, Step::WatchOpened { .. }));
    assert!(matches!(step(&mut r).await, Step::Event { .. }));
    assert!(matches!(step(&mut r).await, Step::Failed { error: Error::WatchTimeout(_), .. }));
    for _ in 0..2 {
        waits.push(next_wait(&mut r).await.as_millis());
    }
    waits
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_delivered_events_resets_the_backoff() {
    let waits = waits_around_a_healthy_watch(BackoffConfig::default().healthy_watch).await;
    assert_eq!(waits, [100, 200, 400, 100, 200]);
}

#[tokio::test(start_paused = true)]
async fn a_watch_shorter_than_the_healthy_watch_setting_does_not_reset_the_backoff() {
    let waits = waits_around_a_healthy_watch(Some(Duration::from_secs(10))).await;
    assert_eq!(waits, [100, 200, 400, 800, 1600]);
}

#[tokio::test(start_paused = true)]
async fn without_the_healthy_watch_rule_the_backoff_keeps_growing_as_in_client_go() {
    let waits = waits_around_a_healthy_watch(None).await;
    assert_eq!(waits, [100, 200, 400, 800, 1600]);
}

/// Waits before each re-watch when every watch is accepted and then fails with `events`.
async fn waits_of_failing_watches(
    events: impl Fn(u64) -> Vec<Result<WatchEvent<Pod>, kube::Error>>,
) -> Vec<u128> {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![], 1, None)));
    for i in 0..4 {
        lw.watch(WatchScript::Events(events(i), End::Hang));
    }
    let mut r = reflector(&lw, &inf, config());
    let mut waits = Vec::new();
    for _ in 0..4 {
        waits.push(next_wait(&mut r).await.as_millis());
    }
    // A successful list before does not reset it either.
    assert_eq!(r.status().stats.lists, 1);
    waits
}

#[tokio::test(start_paused = true)]
async fn a_server_that_accepts_watches_and_fails_them_before_any_event_meets_a_growing_backoff() {
    let waits = waits_of_failing_watches(|_| {
        vec![Ok(WatchEvent::Error(status(503, "ServiceUnavailable", "going away")))]
    })
    .await;
    assert_eq!(waits, [100, 200, 400, 800]);
}

#[tokio::test(start_paused = true)]
async fn a_server_that_fails_each_watch_after_one_event_is_retried_at_the_first_wait_never_sooner()
{
    let waits = waits_of_failing_watches(|i| {
        vec![
            Ok(WatchEvent::Added(pod(&format!("p{i}"), 2 + i))),
            Ok(WatchEvent::Error(status(503, "ServiceUnavailable", "going away"))),
        ]
    })
    .await;
    assert_eq!(waits, [100, 100, 100, 100]);
}

#[tokio::test(start_paused = true)]
async fn a_server_answering_410_to_every_watch_is_relisted_with_a_growing_backoff() {
    let (lw, inf) = (FakeLw::new(), informer());
    for i in 0..4 {
        lw.list(Ok(list(vec![pod("a", 3)], 3 + i, None)))
            .watch(WatchScript::Fail(api_error(410, "Expired")));
    }
    let mut r = reflector(&lw, &inf, config());
    let mut waits = Vec::new();
    for _ in 0..4 {
        match step_until_failed(&mut r).await {
            Step::Failed { next: NextAction::Relist, retry_in, .. } => {
                waits.push(retry_in.as_millis())
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(waits, [100, 200, 400, 800], "no tight list/watch loop");
}

async fn step_until_failed(r: &mut Reflector<Pod, FakeLw>) -> Step {
    for _ in 0..10 {
        let s = step(r).await;
        if matches!(s, Step::Failed { .. }) {
            return s;
        }
    }
    panic!("no failure within 10 steps");
}

#[tokio::test(start_paused = true)]
async fn refused_connections_are_retried_at_the_refused_cap_and_a_later_failure_waits_longer() {
    let (lw, inf) = (FakeLw::new(), informer());
    lw.list(Ok(list(vec![], 1, None)));
    for _ in 0..5 {
        lw.watch(WatchScript::Fail(refused()));
    }
    lw.watch(WatchScript::Fail(api_error(500, "InternalError")));
    let backoff = BackoffConfig::new()
        .initial(Duration::from_millis(100))
        .jitter(0.0)
        .refused_max(Some(Duration::from_millis(300)));
    let mut r = reflector(&lw, &inf, config().backoff(backoff));
    let mut waits = Vec::new();
    for _ in 0..6 {
        waits.push(next_wait(&mut r).await.as_millis());
    }
    // The server answers again, with a failure: the waits go on from where they grew to.
    assert_eq!(waits, [100, 200, 300, 300, 300, 3200]);
}
