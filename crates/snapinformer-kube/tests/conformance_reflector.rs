//! Conformance with client-go's reflector, case by case.
//!
//! Ported (in our words, on our API) from client-go v0.37.2, `tools/cache`:
//! - `reflector_test.go`: every case, as the module of the same name (snake case) below; the
//!   cases that only test Go mechanics are translated to what they protect or listed as not
//!   applicable at the end of this header.
//! - `reflector_watchlist_test.go`: every case likewise.
//! - From `shared_informer_test.go` and `controller_test.go`, the cases about the hooks that
//!   live on the reflector here: `TestSharedInformerErrorHandling` (the watch error handler),
//!   `TestSharedInformerTransformer`, `TestTransformingInformer` and
//!   `TestTransformingInformerRace` (the transform). The rest of those files is in
//!   `crates/snapinformer-core/tests/conformance_informer.rs`.
//!
//! No case of these files was removed between v0.34.0 and v0.37.2 (the files were diffed), so
//! none comes from v0.34.
//!
//! client-go drives `ListAndWatch` against a fake list/watch and a fake clock. Here the
//! reflector is a state machine stepped one transition at a time ([`Reflector::step`]) against
//! a scripted list/watch ([`FakeLw`], `tests/common`) or one whose watch streams the test feeds
//! ([`ChanLw`], below), on a paused clock. client-go's `ListAndWatch` returns on a failure and
//! its caller backs off and calls it again; here the reflector handles the failure itself and
//! says what comes next ([`Step::Failed`]). A test that stops the reflector uses
//! [`Reflector::spawn`] and its handle.
//!
//! Not applicable (Go mechanics with nothing to translate):
//! - `TestGetTypeDescriptionFromObject` and `TestGetExpectedGVKFromObject`: they derive a
//!   description and an expected GroupVersionKind from an example object by reflection. A
//!   reflector here is typed by its object, and names itself by its configured name.
//! - `TestIsUnsupportedTableObject`: a `Table` in place of a typed object does not decode as
//!   that object (k8s-openapi checks `kind`), which relists like any undecodable event (see
//!   `reflector_watch_handler`); a `DynamicObject` table has no `metadata.name` and is skipped
//!   as malformed (`tests/state_machine.rs`).
//! - `TestNewReflectorWithDisablementWatchList`, the case of a client that declares it does not
//!   support watch-list semantics: a [`ListWatch`] has no such declaration here; streaming
//!   lists are on or off in [`ReflectorConfig::watch_list`] (the other cases are ported).

mod common;

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::*;
use futures::{StreamExt, future::BoxFuture};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
    core::{Status, response::StatusDetails},
};
use snapinformer_core::{Informer, Notification, QueueKind};
use snapinformer_kube::{
    BackoffConfig, Error, KubeInformerBuilder, ListWatch, NextAction, Phase, Reflector,
    ReflectorConfig, STREAMING_LIST_STALL, Step, WatchStream, access,
};
use tokio::sync::mpsc;

// ----- helpers ------------------------------------------------------------------------------

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

async fn step<L: ListWatch<Pod>>(r: &mut Reflector<Pod, L>) -> Step {
    within(3600, "a reflector step", r.step()).await.expect("the queue is open")
}

/// Steps until `done` accepts a step (which is returned); fails after `max` steps.
async fn step_until<L: ListWatch<Pod>>(
    r: &mut Reflector<Pod, L>,
    max: usize,
    mut done: impl FnMut(&Step) -> bool,
) -> Step {
    for _ in 0..max {
        let s = step(r).await;
        if done(&s) {
            return s;
        }
    }
    panic!("no matching step within {max} steps");
}

fn list_call(rv: Option<&str>, limit: Option<u32>, token: Option<&str>) -> Call {
    Call::List { rv: rv.map(str::to_owned), limit, continue_token: token.map(str::to_owned) }
}

/// The versions the list calls asked for (`""` for none: a consistent read or a continue page).
fn list_rvs(lw: &FakeLw) -> Vec<String> {
    lw.calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::List { rv, .. } => Some(rv.unwrap_or_default()),
            Call::Watch { .. } => None,
        })
        .collect()
}

fn watch_calls(lw: &FakeLw) -> Vec<Call> {
    lw.calls().into_iter().filter(|c| matches!(c, Call::Watch { .. })).collect()
}

fn list_count(lw: &FakeLw) -> usize {
    lw.calls().iter().filter(|c| matches!(c, Call::List { .. })).count()
}

async fn published(inf: &Informer<Pod>, rv: &str) -> BTreeMap<String, u64> {
    let snap = within(10, "publication", inf.wait_for(rv, Duration::from_secs(10))).await.unwrap();
    snapshot_state(&snap)
}

fn pods(names: &[(&str, u64)]) -> Vec<Pod> {
    names.iter().map(|(n, rv)| pod(n, *rv)).collect()
}

fn state(names: &[(&str, u64)]) -> BTreeMap<String, u64> {
    names.iter().map(|(n, rv)| (format!("default/{n}"), *rv)).collect()
}

fn added(name: &str, rv: u64) -> Result<WatchEvent<Pod>, kube::Error> {
    Ok(WatchEvent::Added(pod(name, rv)))
}

fn modified(name: &str, rv: u64) -> Result<WatchEvent<Pod>, kube::Error> {
    Ok(WatchEvent::Modified(pod(name, rv)))
}

fn deleted(name: &str, rv: u64) -> Result<WatchEvent<Pod>, kube::Error> {
    Ok(WatchEvent::Deleted(pod(name, rv)))
}

fn error_event(code: u16, reason: &str, message: &str) -> Result<WatchEvent<Pod>, kube::Error> {
    Ok(WatchEvent::Error(status(code, reason, message)))
}

/// What a refused TCP connection looks like to the reflector.
fn connection_refused() -> kube::Error {
    kube::Error::Service(Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)))
}

/// An error that is neither an API answer nor a refused connection (client-go's "dummy error").
fn other_error() -> kube::Error {
    kube::Error::Service(Box::new(std::io::Error::other("dummy error")))
}

// ----- a list/watch whose watch streams the test feeds ---------------------------------------

type Event = Result<WatchEvent<Pod>, kube::Error>;

/// client-go's `watch.FakeWatcher` behind a `ListWatch`: every watch call gets a new stream that
/// the test feeds with [`ChanLw::send`] and ends with [`ChanLw::close`]; lists answer from a
/// script (an exhausted script never answers). It records whether each stream was dropped.
#[derive(Clone, Default)]
struct ChanLw(Arc<Mutex<ChanState>>);

#[derive(Default)]
struct ChanState {
    lists: VecDeque<Result<ObjectList<Pod>, kube::Error>>,
    watchers: Vec<(Option<mpsc::UnboundedSender<Event>>, Arc<AtomicBool>)>,
    calls: Vec<Call>,
}

/// Sets its flag when the stream holding it is dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl ChanLw {
    fn list(&self, answer: Result<ObjectList<Pod>, kube::Error>) -> &Self {
        self.0.lock().unwrap().lists.push_back(answer);
        self
    }
    fn watches(&self) -> usize {
        self.0.lock().unwrap().watchers.len()
    }
    fn calls(&self) -> Vec<Call> {
        self.0.lock().unwrap().calls.clone()
    }
    /// Sends an event on the newest watch stream.
    fn send(&self, event: Event) {
        let st = self.0.lock().unwrap();
        let (tx, _) = st.watchers.last().expect("a watch is open");
        tx.as_ref().expect("the stream is open").send(event).expect("the reflector reads it");
    }
    /// Ends the newest watch stream (the server closes it).
    fn close(&self) {
        self.0.lock().unwrap().watchers.last_mut().expect("a watch is open").0 = None;
    }
    /// Whether the reflector dropped watch stream `i` (client-go's `IsStopped`).
    fn dropped(&self, i: usize) -> bool {
        self.0.lock().unwrap().watchers[i].1.load(Ordering::SeqCst)
    }
}

impl ListWatch<Pod> for ChanLw {
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<Pod>, kube::Error>> {
        let mut s = self.0.lock().unwrap();
        s.calls.push(Call::List {
            rv: params.resource_version.clone(),
            limit: params.limit,
            continue_token: params.continue_token.clone(),
        });
        match s.lists.pop_front() {
            Some(answer) => Box::pin(async move { answer }),
            None => Box::pin(futures::future::pending()),
        }
    }

    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<Pod>, kube::Error>> {
        let mut s = self.0.lock().unwrap();
        s.calls.push(Call::Watch {
            rv: resource_version.to_owned(),
            initial_events: params.send_initial_events,
            timeout: params.timeout,
            bookmarks: params.bookmarks,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let flag = Arc::new(AtomicBool::new(false));
        s.watchers.push((Some(tx), flag.clone()));
        let stream = futures::stream::unfold((rx, DropFlag(flag)), |(mut rx, flag)| async move {
            rx.recv().await.map(|e| (e, (rx, flag)))
        })
        .boxed();
        Box::pin(async move { Ok(stream) })
    }
}

async fn eventually_paused(what: &str, cond: impl FnMut() -> bool) {
    eventually_real(what, cond).await
}

// ===== reflector_test.go ===================================================================

/// client-go's `TestCloseWatchChannelOnError`: an ERROR event ends the watch (the stream is
/// dropped) and the reflector goes on after a backoff.
mod close_watch_channel_on_error {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_error_event_drops_the_watch_stream() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step(&mut r).await;
        assert!(matches!(step(&mut r).await, Step::WatchOpened { .. }));
        // client-go sends a pod as the error's object; it decodes as a Status without a code.
        lw.send(Ok(WatchEvent::Error(Box::<Status>::default())));
        match step(&mut r).await {
            Step::Failed { next: NextAction::Rewatch, retry_in, .. } => {
                assert!(!retry_in.is_zero())
            }
            other => panic!("{other:?}"),
        }
        assert!(lw.dropped(0), "the watch was stopped");
    }
}

/// client-go's `TestRunUntil`: stopping a running reflector stops its watch and its task.
mod run_until {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn stopping_a_running_reflector_drops_its_watch_and_ends_its_task() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let handle = Reflector::new(lw.clone(), inf.queue().clone(), config()).spawn();
        eventually_paused("watching", || lw.watches() == 1).await;
        lw.send(added("bar", 2));
        within(10, "the event", inf.wait_for("2", Duration::from_secs(10))).await.unwrap();
        within(10, "stop", handle.stop()).await;
        assert!(handle.is_finished());
        assert!(lw.dropped(0), "the watch was stopped");
    }
}

/// client-go's `TestReflectorResyncChan`: the resync timer fires after its period.
mod reflector_resync_chan {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_resync_period_elapses_into_a_resync() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let cfg = config().resync_period(Some(Duration::from_millis(1)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), cfg);
        step(&mut r).await;
        step(&mut r).await;
        let start = tokio::time::Instant::now();
        assert!(matches!(step(&mut r).await, Step::Resync { performed: true }));
        assert_eq!(start.elapsed(), Duration::from_millis(1));
        assert_eq!(r.phase(), Phase::Watching, "the watch stays open");
    }
}

/// client-go's `TestReflectorWatchStoppedBefore`: a reflector stopped before it runs makes no
/// request.
mod reflector_watch_stopped_before {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_reflector_stopped_before_it_runs_lists_and_watches_nothing() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let handle = Reflector::new(lw.clone(), inf.queue().clone(), config()).spawn();
        within(10, "stop", handle.stop()).await;
        assert!(lw.calls().is_empty(), "{:?}", lw.calls());
    }
}

/// client-go's `TestReflectorWatchStoppedAfter`: a stop after the watch opened stops it.
mod reflector_watch_stopped_after {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stop_after_the_watch_opened_drops_it() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let handle = Reflector::new(lw.clone(), inf.queue().clone(), config()).spawn();
        eventually_paused("watching", || lw.watches() == 1).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        within(10, "stop", handle.stop()).await;
        assert_eq!(lw.watches(), 1);
        assert!(lw.dropped(0));
    }
}

/// client-go's `TestReflectorHandleWatchStoppedBefore` and `...StoppedAfter`: a stop while the
/// reflector reads a watch ends the reading and drops the stream, before or after events came;
/// a stop that wins against pending events queues none of them.
mod reflector_handle_watch_stopped {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn before_a_stop_that_is_already_requested_wins_over_pending_events() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let handle = Reflector::new(lw.clone(), inf.queue().clone(), config()).spawn();
        eventually_paused("watching", || lw.watches() == 1).await;
        // The events and the stop arrive together: the stop is seen first.
        lw.send(added("a", 2));
        within(10, "stop", handle.stop()).await;
        assert!(lw.dropped(0));
        assert_eq!(inf.queue().stats().last_id, 0, "nothing but the list was queued");
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_stop_while_reading_drops_the_stream() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let handle = Reflector::new(lw.clone(), inf.queue().clone(), config()).spawn();
        eventually_paused("watching", || lw.watches() == 1).await;
        lw.send(added("a", 2));
        within(10, "event", inf.wait_for("2", Duration::from_secs(10))).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        within(10, "stop", handle.stop()).await;
        assert!(lw.dropped(0));
    }
}

/// client-go's `TestReflectorHandleWatchResultChanClosedBefore` and `...ClosedAfter`: a watch
/// that ends within a second without an event is a "very short watch", re-opened only after a
/// backoff.
mod reflector_handle_watch_result_chan_closed {
    use super::*;

    async fn case(after: Duration) {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step(&mut r).await;
        step(&mut r).await;
        tokio::time::sleep(after).await;
        lw.close();
        match step(&mut r).await {
            Step::Failed { error: Error::ShortWatch(_), next: NextAction::Rewatch, retry_in } => {
                assert_eq!(retry_in, Duration::from_millis(100));
            }
            other => panic!("{other:?}"),
        }
        assert!(lw.dropped(0));
    }

    #[tokio::test(start_paused = true)]
    async fn closed_before_reading_is_a_very_short_watch() {
        case(Duration::ZERO).await;
    }

    #[tokio::test(start_paused = true)]
    async fn closed_after_ten_milliseconds_is_a_very_short_watch() {
        case(Duration::from_millis(10)).await;
    }
}

/// client-go's `TestReflectorWatchHandler`: watch events update the store, and the last synced
/// version is the last event's (not the highest). client-go's first event, an object of
/// another type, is skipped by type; a typed watch here cannot decode it, and an event that
/// does not decode relists (`undecodable_watch_event_is_counted_and_answered_with_a_relist`
/// in `tests/state_machine.rs`), as client-go does for an undecodable event.
mod reflector_watch_handler {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn events_update_the_store_and_the_last_event_sets_the_version() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![pod("foo", 1), pod("bar", 2)], 10, None))).watch(WatchScript::Events(
            vec![deleted("foo", 11), modified("bar", 55), added("baz", 32)],
            End::Hang,
        ));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        for _ in 0..5 {
            step(&mut r).await;
        }
        assert_eq!(r.last_sync_resource_version(), Some("32"));
        eventually_paused("published", || {
            snapshot_state(&inf.snapshot()) == state(&[("bar", 55), ("baz", 32)])
        })
        .await;
    }
}

/// client-go's `TestReflectorStopWatch`: a stop requested while the watch is open returns at
/// once (see `reflector_handle_watch_stopped` for the stream).
mod reflector_stop_watch {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stop_while_watching_returns_at_once() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let handle = Reflector::new(lw.clone(), inf.queue().clone(), config()).spawn();
        eventually_paused("watching", || lw.watches() == 1).await;
        let start = tokio::time::Instant::now();
        within(10, "stop", handle.stop()).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(handle.is_finished());
    }
}

/// client-go's `TestReflectorListAndWatch`, with and without streaming lists: the requests
/// made and the objects stored (an object seen twice keeps its newest version).
mod reflector_list_and_watch {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn use_watch_list_enabled() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Events(
            vec![
                added("foo", 1),
                Ok(bookmark(1, true)),
                modified("foo", 2),
                added("bar", 3),
                added("baz", 4),
                added("qux", 5),
                added("zoo", 6),
            ],
            End::Hang,
        ));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config().watch_list(true));
        for _ in 0..8 {
            step(&mut r).await;
        }
        let expected = state(&[("foo", 2), ("bar", 3), ("baz", 4), ("qux", 5), ("zoo", 6)]);
        assert_eq!(published(&inf, "6").await, expected);
        assert_eq!(list_count(&lw), 0, "no list in streaming mode");
        match &watch_calls(&lw)[..] {
            [Call::Watch { rv, initial_events: true, bookmarks: true, timeout: Some(_) }] => {
                assert_eq!(rv, "", "a consistent streaming list");
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn use_watch_list_disabled() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![pod("foo", 1)], 1, None))).watch(WatchScript::Events(
            vec![
                modified("foo", 2),
                added("bar", 3),
                added("baz", 4),
                added("qux", 5),
                added("zoo", 6),
            ],
            End::Hang,
        ));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        for _ in 0..7 {
            step(&mut r).await;
        }
        let expected = state(&[("foo", 2), ("bar", 3), ("baz", 4), ("qux", 5), ("zoo", 6)]);
        assert_eq!(published(&inf, "6").await, expected);
        assert_eq!(lw.calls()[0], list_call(Some("0"), Some(500), None));
        match &watch_calls(&lw)[..] {
            [Call::Watch { rv, initial_events: false, bookmarks: true, timeout: Some(_) }] => {
                assert_eq!(rv, "1");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// client-go's `TestReflectorListAndWatchWithErrors`: successive reflectors over one store,
/// with lists and watches that fail in between; every list finds the store as the previous
/// run left it.
mod reflector_list_and_watch_with_errors {
    use super::*;

    struct Row {
        list: Result<(Vec<Pod>, u64), &'static str>,
        events: Vec<Event>,
        watch_error: Option<&'static str>,
    }

    #[tokio::test(start_paused = true)]
    async fn each_list_finds_the_store_the_previous_run_left() {
        let inf = informer();
        let rows = vec![
            Row {
                list: Ok((vec![], 1)),
                events: vec![added("foo", 2), added("bar", 3)],
                watch_error: None,
            },
            Row {
                list: Ok((pods(&[("foo", 2), ("bar", 3)]), 3)),
                events: vec![deleted("foo", 4), added("qux", 5)],
                watch_error: None,
            },
            Row { list: Err("a list error"), events: vec![], watch_error: None },
            Row {
                list: Ok((pods(&[("bar", 3), ("qux", 5)]), 5)),
                events: vec![],
                watch_error: Some("a watch error"),
            },
            Row {
                list: Ok((pods(&[("bar", 3), ("qux", 5)]), 5)),
                events: vec![added("baz", 6)],
                watch_error: None,
            },
            Row {
                list: Ok((pods(&[("bar", 3), ("qux", 5), ("baz", 6)]), 6)),
                events: vec![],
                watch_error: None,
            },
        ];
        for (i, row) in rows.into_iter().enumerate() {
            let lw = FakeLw::new();
            if let Ok((items, _)) = &row.list {
                // The list is what the store holds now.
                let expected: BTreeMap<String, u64> = items
                    .iter()
                    .map(|p| {
                        let m = &p.metadata;
                        (
                            format!("default/{}", m.name.as_deref().unwrap()),
                            m.resource_version.as_deref().unwrap().parse().unwrap(),
                        )
                    })
                    .collect();
                eventually_paused("store as left", || snapshot_state(&inf.snapshot()) == expected)
                    .await;
            }
            match row.list {
                Ok((items, rv)) => lw.list(Ok(list(items, rv, None))),
                Err(msg) => lw.list(Err(kube::Error::Api(status(500, "InternalError", msg)))),
            };
            match row.watch_error {
                Some(msg) => {
                    lw.watch(WatchScript::Fail(kube::Error::Api(status(403, "Forbidden", msg))))
                }
                None => lw.watch(WatchScript::Events(row.events, End::Close)),
            };
            let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
            match step(&mut r).await {
                Step::Failed { error, .. } => {
                    assert!(error.to_string().contains("a list error"), "row {i}: {error}");
                    continue;
                }
                Step::Listed { .. } => {}
                other => panic!("row {i}: {other:?}"),
            }
            loop {
                match step(&mut r).await {
                    Step::WatchOpened { .. } | Step::Event { .. } => {}
                    Step::WatchEnded { .. } | Step::Failed { error: Error::ShortWatch(_), .. } => {
                        break;
                    }
                    Step::Failed { error, .. } => {
                        assert!(error.to_string().contains("a watch error"), "row {i}: {error}");
                        break;
                    }
                    other => panic!("row {i}: {other:?}"),
                }
            }
        }
    }
}

/// client-go's `TestReflectorListAndWatchInitConnBackoff`: refused connections back off
/// exponentially up to the cap. client-go's bounds also count its fake clock's stepping; these
/// are the backoff's own: the sum of `min(1 ms * 2^n, 50 ms)` stretched by at most 2.
mod reflector_list_and_watch_init_conn_backoff {
    use super::*;

    async fn case(failures: usize, base_ms: u64) {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        for _ in 0..failures {
            lw.watch(WatchScript::Fail(connection_refused()));
        }
        lw.watch(WatchScript::Events(vec![], End::Hang));
        let backoff = BackoffConfig::new()
            .initial(Duration::from_millis(1))
            .max(Duration::from_millis(50))
            .jitter(1.0);
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config().backoff(backoff));
        step(&mut r).await;
        let start = tokio::time::Instant::now();
        step_until(&mut r, 3 * failures + 2, |s| matches!(s, Step::WatchOpened { .. })).await;
        let elapsed = start.elapsed();
        let base = Duration::from_millis(base_ms);
        assert!(elapsed >= base && elapsed <= base * 2, "{failures} failures: {elapsed:?}");
        assert_eq!(list_count(&lw), 1, "refused watches are re-opened, not relisted");
    }

    #[tokio::test(start_paused = true)]
    async fn five_failures_grow_exponentially_below_the_cap() {
        case(5, 1 + 2 + 4 + 8 + 16).await;
    }

    #[tokio::test(start_paused = true)]
    async fn forty_failures_flatten_at_the_cap() {
        case(40, 1 + 2 + 4 + 8 + 16 + 32 + 34 * 50).await;
    }
}

/// client-go's `TestNewReflectorWithCustomBackoff`.
mod new_reflector_with_custom_backoff {
    use super::*;

    async fn elapsed_until_watching(backoff: BackoffConfig, failures: usize) -> Duration {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        for _ in 0..failures {
            lw.watch(WatchScript::Fail(connection_refused()));
        }
        lw.watch(WatchScript::Events(vec![], End::Hang));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config().backoff(backoff));
        let start = tokio::time::Instant::now();
        step_until(&mut r, 3 * failures + 3, |s| matches!(s, Step::WatchOpened { .. })).await;
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn default_backoff() {
        let elapsed = elapsed_until_watching(BackoffConfig::default(), 2).await;
        assert!(elapsed <= Duration::from_secs(10), "{elapsed:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn custom_backoff() {
        let backoff = BackoffConfig::new()
            .initial(Duration::from_millis(10))
            .factor(2.0)
            .jitter(0.0)
            .max(Duration::from_millis(100));
        let elapsed = elapsed_until_watching(backoff, 5).await;
        assert_eq!(elapsed, Duration::from_millis(10 + 20 + 40 + 80 + 100));
    }
}

/// client-go's `TestBackoffOnTooManyRequests`: a 429 when opening the watch and a 429 ERROR
/// event each back off, and neither relists.
mod backoff_on_too_many_requests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn throttled_watches_back_off_twice_without_relisting() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![], 1, None)))
            .watch(WatchScript::Fail(api_error(429, "TooManyRequests")))
            .watch(WatchScript::Events(
                vec![error_event(429, "TooManyRequests", "too many requests")],
                End::Hang,
            ))
            .watch(WatchScript::Events(vec![], End::Hang));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step_until(&mut r, 10, |s| matches!(s, Step::WatchOpened { .. })).await;
        step_until(&mut r, 10, |s| matches!(s, Step::WatchOpened { .. })).await;
        let stats = r.status().stats;
        assert_eq!((stats.backoffs, stats.throttled, stats.lists), (2, 2, 1));
        assert_eq!(watch_calls(&lw).len(), 3);
    }
}

/// client-go's `TestNoRelistOnTooManyRequests`.
mod no_relist_on_too_many_requests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn four_throttled_watch_opens_then_a_watch_and_one_list() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        for _ in 0..4 {
            lw.watch(WatchScript::Fail(api_error(429, "TooManyRequests")));
        }
        lw.watch(WatchScript::Events(vec![], End::Hang));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step_until(&mut r, 20, |s| matches!(s, Step::WatchOpened { .. })).await;
        assert_eq!((list_count(&lw), watch_calls(&lw).len()), (1, 5));
    }
}

/// client-go's `TestRetryInternalError` (`MaxInternalErrorRetryDuration`): every watch fails
/// with an internal error one second after the previous one; count the immediate re-watches
/// before the reflector gives up and relists.
mod retry_internal_error {
    use super::*;

    async fn retries(max: Duration, rewind_at: Option<usize>) -> usize {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        for _ in 0..60 {
            lw.watch(WatchScript::Events(
                vec![error_event(500, "InternalError", "etcdserver: no leader")],
                End::Hang,
            ));
        }
        lw.list(Ok(list(vec![], 1, None)));
        let cfg = config().max_internal_error_retry(Some(max));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), cfg);
        step(&mut r).await;
        let mut watches = 0;
        let mut retries = 0;
        loop {
            assert!(matches!(step(&mut r).await, Step::WatchOpened { .. }));
            watches += 1;
            if Some(watches) == rewind_at {
                tokio::time::advance(Duration::from_secs(60)).await;
            }
            tokio::time::advance(Duration::from_secs(1)).await;
            match step(&mut r).await {
                Step::Failed { error, next: NextAction::Rewatch, retry_in } => {
                    assert!(error.is_internal_error());
                    assert_eq!(retry_in, Duration::ZERO, "retried at once");
                    retries += 1;
                }
                Step::Failed { next: NextAction::Relist, retry_in, .. } => {
                    assert!(!retry_in.is_zero(), "the relist backs off");
                    return retries;
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_off() {
        assert_eq!(retries(Duration::ZERO, None).await, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_on_all_calls_fail() {
        assert_eq!(retries(Duration::from_secs(30), None).await, 31);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_on_one_call_successful() {
        // A minute without an internal error (the rewind) starts a new run.
        assert_eq!(retries(Duration::from_secs(30), Some(10)).await, 40);
    }

    #[tokio::test(start_paused = true)]
    async fn unset_internal_errors_rewatch_after_a_backoff_forever() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        for _ in 0..5 {
            lw.watch(WatchScript::Fail(api_error(500, "InternalError")));
        }
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step(&mut r).await;
        for _ in 0..5 {
            match step(&mut r).await {
                Step::Failed { next: NextAction::Rewatch, retry_in, .. } => {
                    assert!(!retry_in.is_zero())
                }
                other => panic!("{other:?}"),
            }
            step(&mut r).await;
        }
        assert_eq!(list_count(&lw), 1);
    }
}

/// client-go's `TestReflectorResync`: the reflector's own resync asks the queue to resync each
/// period while it watches; `should_resync` can veto one; a queue that cannot resync (closed)
/// ends the reflector.
mod reflector_resync {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_period_resyncs_the_queue_unless_vetoed() {
        let (lw, inf) =
            (ChanLw::default(), Informer::builder(access::<Pod>()).name("t").build().unwrap());
        lw.list(Ok(list(vec![pod("a", 1)], 1, None)));
        let asked = Arc::new(AtomicUsize::new(0));
        let a = asked.clone();
        let cfg = config().resync_period(Some(Duration::from_millis(1)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), cfg)
            .with_should_resync(move || a.fetch_add(1, Ordering::SeqCst) != 1);
        step(&mut r).await;
        step(&mut r).await;
        assert!(matches!(step(&mut r).await, Step::Resync { performed: true }));
        assert!(matches!(step(&mut r).await, Step::Resync { performed: false }));
        assert!(matches!(step(&mut r).await, Step::Resync { performed: true }));
        assert_eq!(r.status().stats.resyncs, 2);
        assert_eq!(asked.load(Ordering::SeqCst), 3);
        // The informer never started: its queue holds the list and the two resyncs' deltas.
        assert_eq!(inf.queue().len(), 1, "the relist's entry; resyncs skip queued keys");
        inf.queue().close();
        assert!(matches!(r.step().await, Err(Error::QueueClosed)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_resync_queues_a_sync_delta_per_stored_object() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![pod("a", 1), pod("b", 1)], 1, None)));
        let cfg = config().resync_period(Some(Duration::from_millis(1)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), cfg);
        step(&mut r).await;
        step(&mut r).await;
        published(&inf, "1").await;
        eventually_paused("list applied", || inf.queue().stats().in_flight == 0).await;
        let before = inf.queue().stats().last_id;
        assert!(matches!(step(&mut r).await, Step::Resync { performed: true }));
        assert_eq!(inf.queue().stats().last_id, before + 2, "one Sync delta per stored object");
    }
}

/// client-go's `TestReflectorWatchListPageSize`: an explicit page size pages every list, even
/// a relist from a specific version.
mod reflector_watch_list_page_size {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_explicit_page_size_pages_every_list() {
        let (lw, inf) = (FakeLw::new(), informer());
        let ten: Vec<(String, u64)> = (0..10).map(|i| (format!("pod-{i}"), i)).collect();
        let page = |r: std::ops::Range<usize>| -> Vec<Pod> {
            ten[r].iter().map(|(n, rv)| pod(n, *rv)).collect()
        };
        lw.list(Ok(list(page(0..4), 10, Some("C1"))))
            .list(Ok(list(page(4..8), 10, Some("C2"))))
            .list(Ok(list(page(8..10), 10, None)))
            .watch(WatchScript::Events(vec![error_event(410, "Expired", "gone")], End::Hang))
            .list(Ok(list(page(0..4), 10, Some("C1"))))
            .list(Ok(list(page(4..8), 10, Some("C2"))))
            .list(Ok(list(page(8..10), 10, None)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config().page_size(Some(4)));
        step_until(&mut r, 5, |s| matches!(s, Step::Listed { .. })).await;
        assert_eq!(published(&inf, "10").await.len(), 10);
        step_until(&mut r, 8, |s| matches!(s, Step::Listed { .. })).await;
        let lists: Vec<Call> =
            lw.calls().into_iter().filter(|c| matches!(c, Call::List { .. })).collect();
        assert_eq!(
            lists,
            [
                list_call(Some("0"), Some(4), None),
                list_call(None, Some(4), Some("C1")),
                list_call(None, Some(4), Some("C2")),
                list_call(Some("10"), Some(4), None),
                list_call(None, Some(4), Some("C1")),
                list_call(None, Some(4), Some("C2")),
            ]
        );
        assert_eq!(published(&inf, "10").await.len(), 10);
    }
}

/// client-go's `TestReflectorNotPaginatingNotConsistentReads`.
mod reflector_not_paginating_not_consistent_reads {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_relist_from_a_version_asks_for_everything_at_once() {
        let (lw, inf) = (FakeLw::new(), informer());
        let ten: Vec<Pod> = (0..10).map(|i| pod(&format!("pod-{i}"), i)).collect();
        lw.list(Ok(list(vec![], 10, None)))
            .watch(WatchScript::Events(vec![error_event(410, "Expired", "gone")], End::Hang))
            .list(Ok(list(ten, 10, None)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step_until(&mut r, 5, |s| matches!(s, Step::Listed { objects: 10, .. })).await;
        assert_eq!(lw.last_call(), list_call(Some("10"), None, None));
    }
}

/// client-go's `TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled`.
mod reflector_paginating_non_consistent_reads_if_watch_cache_disabled {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn once_the_first_list_came_back_paged_relists_page_too() {
        let (lw, inf) = (FakeLw::new(), informer());
        let ten: Vec<Pod> = (0..10).map(|i| pod(&format!("pod-{i}"), i)).collect();
        for _ in 0..2 {
            lw.list(Ok(list(ten[0..4].to_vec(), 10, Some("C1"))))
                .list(Ok(list(ten[4..8].to_vec(), 10, Some("C2"))))
                .list(Ok(list(ten[8..10].to_vec(), 10, None)))
                .watch(WatchScript::Events(vec![error_event(410, "Expired", "gone")], End::Hang));
        }
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step_until(&mut r, 5, |s| matches!(s, Step::Listed { .. })).await;
        assert_eq!(published(&inf, "10").await.len(), 10);
        step_until(&mut r, 8, |s| matches!(s, Step::Listed { .. })).await;
        let limits: Vec<Option<u32>> = lw
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::List { limit, .. } => Some(limit),
                Call::Watch { .. } => None,
            })
            .collect();
        assert_eq!(limits, [Some(500); 6]);
        assert_eq!(list_rvs(&lw), ["0", "", "", "10", "", ""]);
    }
}

/// client-go's `TestReflectorResyncWithResourceVersion`: a relist asks for the last synced
/// version, so a partitioned server cannot send the reflector back in time.
mod reflector_resync_with_resource_version {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_relist_asks_for_the_last_synced_version() {
        let (lw, inf) = (FakeLw::new(), informer());
        let eight: Vec<Pod> = (0..8).map(|i| pod(&format!("pod-{i}"), i)).collect();
        lw.list(Ok(list(eight[0..4].to_vec(), 10, None)))
            .watch(WatchScript::Events(vec![error_event(410, "Expired", "gone")], End::Hang))
            .list(Ok(list(eight, 11, None)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step(&mut r).await;
        assert_eq!(published(&inf, "10").await.len(), 4);
        step_until(&mut r, 4, |s| matches!(s, Step::Listed { .. })).await;
        assert_eq!(published(&inf, "11").await.len(), 8);
        assert_eq!(list_rvs(&lw), ["0", "10"]);
    }
}

/// client-go's `TestReflectorExpiredExactResourceVersion`.
mod reflector_expired_exact_resource_version {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_expired_relist_version_is_retried_as_a_consistent_list() {
        let (lw, inf) = (FakeLw::new(), informer());
        let eight: Vec<Pod> = (0..8).map(|i| pod(&format!("pod-{i}"), i)).collect();
        lw.list(Ok(list(eight[0..4].to_vec(), 10, None)))
            .watch(WatchScript::Events(vec![error_event(410, "Expired", "gone")], End::Hang))
            .list(Err(api_error(410, "Expired")))
            .list(Ok(list(eight, 11, None)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step(&mut r).await;
        assert_eq!(published(&inf, "10").await.len(), 4);
        step_until(&mut r, 6, |s| matches!(s, Step::Listed { .. })).await;
        assert_eq!(published(&inf, "11").await.len(), 8);
        assert_eq!(list_rvs(&lw), ["0", "10", ""]);
    }
}

/// client-go's `TestReflectorFullListIfExpired`: an expired continue token restarts the list,
/// unpaged, at the version first asked for.
mod reflector_full_list_if_expired {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_expired_second_page_lists_everything_at_the_requested_version() {
        let (lw, inf) = (FakeLw::new(), informer());
        let eight: Vec<Pod> = (0..8).map(|i| pod(&format!("pod-{i}"), i)).collect();
        lw.list(Ok(list(eight[0..4].to_vec(), 10, None)))
            .watch(WatchScript::Events(vec![error_event(410, "Expired", "gone")], End::Hang))
            .list(Ok(list(eight[0..4].to_vec(), 11, Some("C1"))))
            .list(Err(api_error(410, "Expired")))
            .list(Ok(list(eight, 11, None)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config().page_size(Some(4)));
        step(&mut r).await;
        assert_eq!(published(&inf, "10").await.len(), 4);
        step_until(&mut r, 8, |s| matches!(s, Step::Listed { .. })).await;
        assert_eq!(published(&inf, "11").await.len(), 8);
        assert_eq!(list_rvs(&lw), ["0", "10", "", "10"]);
        assert_eq!(lw.last_call(), list_call(Some("10"), None, None), "unpaged");
    }
}

/// client-go's `TestReflectorFullListIfTooLarge`: each of the three forms of "too large
/// resource version" is retried at once as a consistent list.
mod reflector_full_list_if_too_large {
    use super::*;

    fn timeout_status(message: &str, cause: serde_json::Value) -> kube::Error {
        let mut s = Status::failure(message, "Timeout").with_code(504);
        let details: StatusDetails =
            serde_json::from_value(serde_json::json!({ "causes": cause })).unwrap();
        s.details = Some(details);
        kube::Error::Api(Box::new(s))
    }

    #[tokio::test(start_paused = true)]
    async fn every_form_of_too_large_relists_consistently() {
        let (lw, inf) = (FakeLw::new(), informer());
        let expired = || WatchScript::Events(vec![error_event(410, "Expired", "gone")], End::Hang);
        lw.list(Ok(list(vec![], 20, None)))
            .watch(expired())
            // 1.18.6 and later: a cause of type ResourceVersionTooLarge.
            .list(Err(timeout_status(
                "Timeout: too large resource version",
                serde_json::json!([{"reason": "ResourceVersionTooLarge"}]),
            )))
            .list(Ok(list(vec![], 30, None)))
            .watch(expired())
            // 1.17.0 to 1.18.5: a cause with that message.
            .list(Err(timeout_status(
                "Timeout: too large resource version",
                serde_json::json!([{"message": "Too large resource version"}]),
            )))
            .list(Ok(list(vec![], 40, None)))
            .watch(expired())
            // Before 1.17: only the message.
            .list(Err(timeout_status("Timeout: Too large resource version", serde_json::json!([]))))
            .list(Ok(list(vec![], 50, None)));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        for _ in 0..4 {
            step_until(&mut r, 7, |s| matches!(s, Step::Listed { .. })).await;
        }
        assert_eq!(list_rvs(&lw), ["0", "20", "", "30", "", "40", ""]);
        let stats = r.status().stats;
        assert_eq!(stats.too_large, 3);
        // The three watches answered 410 at once back off; the too-large lists do not.
        assert_eq!(stats.backoffs, 3, "retried at once");
    }
}

/// client-go's `TestWatchTimeout`: the server-side watch timeout lies in
/// `[min, 2 * min]`. client-go's minimum is 5 minutes and it refuses anything smaller; ours
/// defaults to 145 s (so the longest watch stays under the kube client's 295 s read timeout)
/// and honours any minimum of a second or more.
mod watch_timeout {
    use super::*;

    async fn timeout_for(cfg: ReflectorConfig) -> u32 {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![], 10, None))).watch(WatchScript::Events(vec![], End::Hang));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), cfg);
        step(&mut r).await;
        step(&mut r).await;
        match lw.last_call() {
            Call::Watch { timeout: Some(t), .. } => t,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout() {
        let t = timeout_for(config()).await;
        assert!((145..=290).contains(&t), "{t}");
    }

    #[tokio::test(start_paused = true)]
    async fn small_timeout_honoured() {
        let t = timeout_for(config().min_watch_timeout(Duration::from_secs(1))).await;
        assert!((1..=2).contains(&t), "{t}");
    }

    #[tokio::test(start_paused = true)]
    async fn thirty_minute_timeout() {
        let t = timeout_for(config().min_watch_timeout(Duration::from_secs(30 * 60))).await;
        assert!((1800..=3600).contains(&t), "{t}");
    }
}

/// client-go's `TestReflectorResourceVersionUpdate`: every event, bookmarks included, moves the
/// version the store reports.
mod reflector_resource_version_update {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_event_and_bookmark_moves_the_published_version() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![], 10, None))).watch(WatchScript::Events(
            vec![added("a", 10), modified("a", 20), Ok(bookmark(30, false)), deleted("a", 40)],
            End::Hang,
        ));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step(&mut r).await;
        step(&mut r).await;
        let mut versions = Vec::new();
        for _ in 0..4 {
            step(&mut r).await;
            let rv = r.last_sync_resource_version().unwrap().to_owned();
            published(&inf, &rv).await;
            versions.push(inf.snapshot().resource_version().unwrap().to_owned());
        }
        assert_eq!(versions, ["10", "20", "30", "40"]);
    }
}

/// client-go's `TestReflectorListExtract` checks that objects of a paginated list do not keep
/// the whole page alive (Go slices). Here every object is its own allocation: an object
/// deleted from the store is freed while the others of its page stay.
mod reflector_list_extract {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_deleted_object_is_freed_while_the_rest_of_its_page_stays() {
        let (lw, inf) = (FakeLw::new(), informer());
        let page = |p: u64| -> Vec<Pod> {
            (0..10).map(|i| pod(&format!("pod-{}", p * 10 + i), 1)).collect()
        };
        lw.list(Ok(list(page(0), 5, Some("C1"))))
            .list(Ok(list(page(1), 5, Some("C2"))))
            .list(Ok(list(page(2), 5, None)));
        let firsts = ["pod-0", "pod-10", "pod-20"];
        let exempt = ["pod-2", "pod-12", "pod-22"];
        let mut deletes: Vec<Event> = Vec::new();
        let mut rv = 5;
        for p in 0..3 {
            for pod_ in page(p) {
                let name = pod_.metadata.name.clone().unwrap();
                if !exempt.contains(&name.as_str()) {
                    rv += 1;
                    deletes.push(deleted(&name, rv));
                }
            }
        }
        lw.watch(WatchScript::Events(deletes, End::Hang));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config().page_size(Some(10)));
        step_until(&mut r, 4, |s| matches!(s, Step::Listed { .. })).await;
        let snap = within(10, "list", inf.wait_for("5", Duration::from_secs(10))).await.unwrap();
        let weak = |name: &str| -> Weak<Pod> {
            Arc::downgrade(snap.get_by_key(&format!("default/{name}")).unwrap())
        };
        let first_weak: Vec<Weak<Pod>> = firsts.iter().map(|n| weak(n)).collect();
        let exempt_weak: Vec<Weak<Pod>> = exempt.iter().map(|n| weak(n)).collect();
        drop(snap);
        step_until(
            &mut r,
            40,
            |s| matches!(s, Step::Event { resource_version: Some(v), .. } if v == &rv.to_string()),
        )
        .await;
        published(&inf, &rv.to_string()).await;
        // Let the handler-less informer drop the applied batches.
        eventually_paused("deleted objects freed", || {
            first_weak.iter().all(|w| w.upgrade().is_none())
        })
        .await;
        assert!(exempt_weak.iter().all(|w| w.upgrade().is_some()), "the rest of each page stays");
        assert_eq!(inf.snapshot().len(), 3);
    }
}

/// client-go's `TestReflectorReplacesStoreOnUnsafeDelete`: an ERROR event with reason
/// `StorageReadError` (the server could not read an object, which was then deleted unsafely)
/// relists, so the unreadable object leaves the store while the others stay. (Before this
/// port the reflector re-opened the watch and the object stayed.)
mod reflector_replaces_store_on_unsafe_delete {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_storage_read_error_relists_and_the_unreadable_object_goes_away() {
        let (lw, inf) = (FakeLw::new(), informer());
        let (model, handler) = recorder();
        inf.add_event_handler(handler).unwrap();
        let three = pods(&[("foo-1", 1), ("foo-2", 2), ("foo-3", 3)]);
        lw.list(Ok(list(three.clone(), 3, None)))
            .watch(WatchScript::Events(
                vec![
                    added("foo", 4),
                    error_event(
                        500,
                        "StorageReadError",
                        "failed to prepare current and previous objects: corrupt object has been deleted",
                    ),
                ],
                End::Hang,
            ))
            .list(Ok(list(three, 5, None)))
            .watch(WatchScript::Events(vec![], End::Hang));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        for _ in 0..3 {
            step(&mut r).await;
        }
        assert!(published(&inf, "4").await.contains_key("default/foo"));
        match step(&mut r).await {
            Step::Failed { error, next: NextAction::Relist, retry_in } => {
                assert!(error.is_store_read_error(), "{error}");
                assert!(!retry_in.is_zero(), "after a backoff, as client-go");
            }
            other => panic!("{other:?}"),
        }
        step_until(&mut r, 3, |s| matches!(s, Step::Listed { .. })).await;
        assert_eq!(r.last_sync_resource_version(), Some("5"));
        assert_eq!(published(&inf, "5").await, state(&[("foo-1", 1), ("foo-2", 2), ("foo-3", 3)]));
        eventually_paused("the handler saw foo go", || model.lock().unwrap().tombstones == 1).await;
        assert!(model.lock().unwrap().violations.is_empty());
    }
}

/// client-go's `TestReflectorRespectStoreTransformer`, for both queues: objects of a streaming
/// list are transformed before they are stored. client-go transforms them twice (in its
/// temporary store, then on replace) and counts 5 calls for 3 objects; here each object is
/// transformed once, before it is queued.
mod reflector_respect_store_transformer {
    use super::*;

    async fn case(kind: QueueKind) {
        let inf = Informer::builder(access::<Pod>()).name("t").queue(kind).build().unwrap();
        inf.start().unwrap();
        let lw = FakeLw::new();
        lw.watch(WatchScript::Events(
            vec![added("foo-1", 1), added("foo-2", 2), Ok(bookmark(3, true)), added("foo-3", 3)],
            End::Hang,
        ));
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config().watch_list(true))
            .with_transform(move |p: &mut Pod| {
                c.fetch_add(1, Ordering::SeqCst);
                p.spec.get_or_insert_with(Default::default).hostname = Some("transformed".into());
            });
        for _ in 0..5 {
            step(&mut r).await;
        }
        assert_eq!(r.last_sync_resource_version(), Some("3"));
        // The end bookmark and foo-3 both carry version 3: wait for all three objects.
        eventually_paused("three objects stored", || inf.snapshot().len() == 3).await;
        let snap = inf.snapshot();
        for p in snap.iter() {
            assert_eq!(p.spec.as_ref().unwrap().hostname.as_deref(), Some("transformed"));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3, "once per object");
    }

    #[tokio::test(start_paused = true)]
    async fn real_fifo() {
        case(QueueKind::Real).await;
    }

    #[tokio::test(start_paused = true)]
    async fn delta_fifo() {
        case(QueueKind::Delta).await;
    }
}

// ===== reflector_watchlist_test.go ==========================================================

/// client-go's `TestNewReflectorWithDisablementWatchList` (the case of a client declaring no
/// watch-list support is not applicable: see the file header).
mod new_reflector_with_disablement_watch_list {
    use super::*;

    async fn first_request(watch_list: bool) -> Call {
        let (lw, inf) = (FakeLw::new(), informer());
        let mut r =
            Reflector::new(lw.clone(), inf.queue().clone(), config().watch_list(watch_list));
        // Neither request is answered: only the request made matters.
        let _ = tokio::time::timeout(Duration::from_millis(1), r.step()).await;
        lw.calls()[0].clone()
    }

    #[tokio::test(start_paused = true)]
    async fn watch_list_off_lists() {
        assert!(matches!(first_request(false).await, Call::List { .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn watch_list_on_streams() {
        assert!(matches!(first_request(true).await, Call::Watch { initial_events: true, .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn watch_list_on_with_a_client_that_declares_nothing_streams() {
        // Every ListWatch here is such a client.
        assert!(matches!(first_request(true).await, Call::Watch { initial_events: true, .. }));
    }
}

/// client-go's `TestInitialEventsEndBookmarkTicker`: a streaming list reports, every 10 s,
/// that it still waits for its end bookmark; a plain watch never does.
mod initial_events_end_bookmark_ticker {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn noop_a_plain_watch_never_reports_a_stall() {
        let (lw, inf) = (ChanLw::default(), informer());
        lw.list(Ok(list(vec![], 1, None)));
        let mut r = Reflector::new(
            lw.clone(),
            inf.queue().clone(),
            config().min_watch_timeout(Duration::from_secs(60)),
        );
        step(&mut r).await;
        step(&mut r).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        lw.send(added("a", 2));
        assert!(matches!(step(&mut r).await, Step::Event { .. }), "no stall report in between");
        assert_eq!(r.status().stats.streaming_list_stalls, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_streaming_list_reports_every_stall_since_its_start_or_its_last_event() {
        let (lw, inf) = (ChanLw::default(), informer());
        let cfg = config().watch_list(true).min_watch_timeout(Duration::from_secs(600));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), cfg);
        assert!(matches!(step(&mut r).await, Step::StreamingListOpened { .. }));
        let stall = |s: Step| match s {
            Step::StreamingListStalled { since, any_event } => (since, any_event),
            other => panic!("{other:?}"),
        };
        assert_eq!(stall(step(&mut r).await), (STREAMING_LIST_STALL, false));
        assert_eq!(stall(step(&mut r).await), (STREAMING_LIST_STALL * 2, false));
        lw.send(added("a", 1));
        assert!(matches!(step(&mut r).await, Step::Event { .. }));
        assert_eq!(stall(step(&mut r).await), (STREAMING_LIST_STALL, true));
        assert_eq!(stall(step(&mut r).await), (STREAMING_LIST_STALL * 2, true));
        lw.send(Ok(bookmark(1, true)));
        assert!(matches!(step(&mut r).await, Step::Listed { streaming: true, .. }));
        assert_eq!(r.status().stats.streaming_list_stalls, 4);
    }
}

/// client-go's `TestWatchListResourceVersion`: a streaming list takes its version from its end
/// bookmark, never from the objects before it.
mod watch_list_resource_version {
    use super::*;

    async fn version_after(events: Vec<Event>, steps: usize) -> Option<String> {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Events(events, End::Hang));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config().watch_list(true));
        for _ in 0..steps {
            step(&mut r).await;
        }
        r.last_sync_resource_version().map(str::to_owned)
    }

    #[tokio::test(start_paused = true)]
    async fn empty_resource_version() {
        assert_eq!(version_after(vec![], 1).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn empty_resource_version_without_bookmark_event() {
        assert_eq!(version_after(vec![added("p1", 1)], 2).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn non_empty_resource_version_with_bookmark_event_and_initial_events_annotation() {
        let events = vec![added("p1", 1), Ok(bookmark(2, true))];
        assert_eq!(version_after(events, 3).await.as_deref(), Some("2"));
    }
}

/// client-go's `TestWatchList`.
mod watch_list {
    use super::*;

    fn streaming_call(call: &Call) -> bool {
        matches!(call, Call::Watch { rv, initial_events: true, bookmarks: true, timeout: Some(_) } if rv.is_empty())
    }

    fn watch_call(call: &Call, at: &str) -> bool {
        matches!(call, Call::Watch { rv, initial_events: false, bookmarks: true, timeout: Some(_) } if rv == at)
    }

    fn reflector(lw: &FakeLw, inf: &Informer<Pod>) -> Reflector<Pod, FakeLw> {
        Reflector::new(lw.clone(), inf.queue().clone(), config().watch_list(true))
    }

    #[tokio::test(start_paused = true)]
    async fn the_reflector_is_not_synced_until_the_bookmark_event_is_received() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Events(vec![added("p1", 1)], End::Hang));
        let mut r = reflector(&lw, &inf);
        step(&mut r).await;
        step(&mut r).await;
        assert_eq!(watch_calls(&lw).len(), 1);
        assert!(streaming_call(&lw.calls()[0]));
        assert!(!inf.has_synced() && inf.snapshot().is_empty());
        assert!(!r.status().listed);
    }

    #[tokio::test(start_paused = true)]
    async fn the_reflector_uses_the_old_list_watch_semantics_if_watch_list_is_off() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.list(Ok(list(vec![pod("p1", 1)], 1, None)))
            .watch(WatchScript::Events(vec![], End::Hang));
        let mut r = Reflector::new(lw.clone(), inf.queue().clone(), config());
        step(&mut r).await;
        step(&mut r).await;
        let calls = lw.calls();
        assert_eq!(calls[0], list_call(Some("0"), Some(500), None));
        assert!(watch_call(&calls[1], "1"));
        assert_eq!(published(&inf, "1").await, state(&[("p1", 1)]));
    }

    async fn falls_back(refusal: kube::Error) {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Fail(refusal))
            .list(Ok(list(vec![pod("p1", 1)], 1, None)))
            .watch(WatchScript::Events(vec![added("p2", 2)], End::Hang));
        let mut r = reflector(&lw, &inf);
        assert!(matches!(
            step(&mut r).await,
            Step::Failed { next: NextAction::Relist, retry_in: Duration::ZERO, .. }
        ));
        for _ in 0..3 {
            step(&mut r).await;
        }
        let calls = lw.calls();
        assert_eq!(calls.len(), 3, "{calls:?}");
        assert!(streaming_call(&calls[0]));
        assert_eq!(calls[1], list_call(Some("0"), Some(500), None));
        assert!(watch_call(&calls[2], "1"));
        assert_eq!(published(&inf, "2").await, state(&[("p1", 1), ("p2", 2)]));
    }

    #[tokio::test(start_paused = true)]
    async fn returning_any_other_error_than_invalid_forces_fallback() {
        falls_back(other_error()).await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_reflector_can_fall_back_to_list_watch_when_a_server_does_not_support_streaming() {
        falls_back(api_error(422, "Invalid")).await;
    }

    #[tokio::test(start_paused = true)]
    async fn prove_that_the_reflector_is_synced_after_receiving_a_bookmark_event() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Events(
            vec![added("p1", 1), added("p2", 2), Ok(bookmark(2, true))],
            End::Hang,
        ));
        let mut r = reflector(&lw, &inf);
        for _ in 0..4 {
            step(&mut r).await;
        }
        assert_eq!(watch_calls(&lw).len(), 1);
        assert_eq!(published(&inf, "2").await, state(&[("p1", 1), ("p2", 2)]));
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn check_if_updates_and_deletes_are_propagated_during_streaming() {
        let (lw, inf) = (FakeLw::new(), informer());
        let mut p1 = pod("p1", 3);
        p1.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            active_deadline_seconds: Some(12),
            ..Default::default()
        });
        lw.watch(WatchScript::Events(
            vec![
                added("p1", 1),
                added("p2", 2),
                Ok(WatchEvent::Modified(p1)),
                added("p3", 4),
                deleted("p3", 5),
                Ok(bookmark(5, true)),
            ],
            End::Hang,
        ));
        let mut r = reflector(&lw, &inf);
        for _ in 0..7 {
            step(&mut r).await;
        }
        assert_eq!(published(&inf, "5").await, state(&[("p1", 3), ("p2", 2)]));
        let snap = inf.snapshot();
        let stored = snap.get_by_key("default/p1").unwrap();
        assert_eq!(stored.spec.as_ref().unwrap().active_deadline_seconds, Some(12));
    }

    #[tokio::test(start_paused = true)]
    async fn checks_if_the_reflector_retries_429() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Fail(api_error(429, "TooManyRequests")))
            .watch(WatchScript::Fail(api_error(429, "TooManyRequests")))
            .watch(WatchScript::Events(vec![added("p1", 1), Ok(bookmark(2, true))], End::Hang));
        let mut r = reflector(&lw, &inf);
        step_until(&mut r, 10, |s| matches!(s, Step::Listed { .. })).await;
        let calls = watch_calls(&lw);
        assert_eq!(calls.len(), 3);
        assert!(calls.iter().all(streaming_call));
        assert_eq!(list_count(&lw), 0);
        assert_eq!(published(&inf, "2").await, state(&[("p1", 1)]));
    }

    /// client-go opens another streaming list at once (without a backoff, so a server that
    /// keeps cutting it is asked again and again); ours falls back to one plain list and
    /// streams again at the next relist.
    #[tokio::test(start_paused = true)]
    async fn check_if_stopping_a_watcher_before_sync_falls_back_to_a_list() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Events(vec![added("p1", 1)], End::Close))
            .list(Ok(list(vec![pod("p1", 1)], 1, None)))
            .watch(WatchScript::Events(vec![], End::Hang));
        let mut r = reflector(&lw, &inf);
        step(&mut r).await;
        step(&mut r).await;
        match step(&mut r).await {
            Step::Failed {
                error: Error::WatchListIncomplete, next: NextAction::Relist, ..
            } => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(step(&mut r).await, Step::Listed { streaming: false, .. }));
        assert_eq!(published(&inf, "1").await, state(&[("p1", 1)]));
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_a_watcher_after_synchronization_results_in_a_new_watch_request() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Events(
            vec![added("p1", 1), added("p2", 2), Ok(bookmark(2, true)), added("p3", 3)],
            End::Close,
        ))
        .watch(WatchScript::Events(vec![added("p4", 4)], End::Hang));
        let mut r = reflector(&lw, &inf);
        step_until(
            &mut r,
            10,
            |s| matches!(s, Step::Event { resource_version: Some(v), .. } if v == "4"),
        )
        .await;
        let calls = watch_calls(&lw);
        assert_eq!(calls.len(), 2);
        assert!(streaming_call(&calls[0]) && watch_call(&calls[1], "3"));
        assert_eq!(
            published(&inf, "4").await,
            state(&[("p1", 1), ("p2", 2), ("p3", 3), ("p4", 4)])
        );
    }

    /// client-go's `ListAndWatch` returns the 410 and its caller starts over with a streaming
    /// list from the last synced version; here the reflector does that itself.
    #[tokio::test(start_paused = true)]
    async fn expiring_an_established_watcher_starts_over_with_a_streaming_list() {
        let (lw, inf) = (FakeLw::new(), informer());
        lw.watch(WatchScript::Events(
            vec![added("p1", 1), Ok(bookmark(2, true)), added("p3", 3)],
            End::Close,
        ))
        .watch(WatchScript::Fail(api_error(410, "Expired")));
        let mut r = reflector(&lw, &inf);
        let failed = step_until(&mut r, 10, |s| matches!(s, Step::Failed { .. })).await;
        match failed {
            Step::Failed { error, next: NextAction::Relist, .. } => {
                assert!(error.is_expired(), "{error}")
            }
            other => panic!("{other:?}"),
        }
        let calls = watch_calls(&lw);
        assert_eq!(calls.len(), 2);
        assert!(streaming_call(&calls[0]) && watch_call(&calls[1], "3"));
        assert_eq!(published(&inf, "3").await, state(&[("p1", 1), ("p3", 3)]));
        // client-go's caller backs off before it starts over; so does the reflector here.
        assert!(matches!(step(&mut r).await, Step::Waited { .. }));
        let _ = tokio::time::timeout(Duration::from_millis(1), r.step()).await;
        match lw.last_call() {
            Call::Watch { rv, initial_events: true, .. } => assert_eq!(rv, "3"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn prove_that_the_reflector_is_checking_the_value_of_the_initial_events_end_annotation() {
        let (lw, inf) = (FakeLw::new(), informer());
        let mut not_end = bookmark(2, true);
        if let WatchEvent::Bookmark(b) = &mut not_end {
            b.metadata.annotations.insert("k8s.io/initial-events-end".into(), "false".into());
        }
        lw.watch(WatchScript::Events(vec![added("p1", 1), added("p2", 2), Ok(not_end)], End::Hang));
        let mut r = reflector(&lw, &inf);
        for _ in 0..4 {
            step(&mut r).await;
        }
        assert!(!r.status().listed && inf.snapshot().is_empty());
        assert_eq!(watch_calls(&lw).len(), 1);
    }
}

// ===== moved here from shared_informer_test.go and controller_test.go ======================

/// client-go's `TestSharedInformerErrorHandling`: the watch error handler sees a failing list.
mod shared_informer_error_handling {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_watch_error_handler_sees_a_failing_list() {
        let lw = FakeLw::new();
        lw.list(Err(kube::Error::Api(status(403, "Forbidden", "Access Denied"))));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let inf = KubeInformerBuilder::new(lw)
            .name("errors")
            .reflector(ReflectorConfig::new().watch_list(false))
            .watch_error_handler(move |name: &str, e: &Error| {
                let _ = tx.send(format!("{name}: {e}"));
            })
            .build()
            .unwrap();
        inf.start().unwrap();
        let got = within(10, "the handler", rx.recv()).await.unwrap();
        assert!(got.starts_with("errors: ") && got.contains("Access Denied"), "{got}");
        inf.shutdown().await;
    }
}

/// client-go's `TestSharedInformerTransformer`.
mod shared_informer_transformer {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn handlers_see_transformed_objects() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![pod("pod1", 1), pod("pod2", 2)], 2, None)))
            .watch(WatchScript::Events(vec![], End::Hang));
        let inf = KubeInformerBuilder::new(lw)
            .name("upper")
            .reflector(config())
            .transform(|p: &mut Pod| {
                p.metadata.name = p.metadata.name.as_ref().map(|n| n.to_uppercase());
            })
            .build()
            .unwrap();
        let names = Arc::new(Mutex::new(Vec::new()));
        let n = names.clone();
        let reg = inf
            .add_event_handler(move |e: &Notification<Pod>| {
                if let Notification::Add { obj, .. } = e {
                    n.lock().unwrap().push(obj.metadata.name.clone().unwrap());
                }
            })
            .unwrap();
        inf.start().unwrap();
        eventually_paused("synced", || reg.has_synced()).await;
        let mut got = names.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, ["POD1", "POD2"]);
        inf.shutdown().await;
    }
}

fn make_pod(name: &str, generation: &str, rv: u64) -> Pod {
    let mut p = pod(name, rv);
    p.metadata.namespace = Some("namespace".into());
    p.metadata.labels = Some([("generation".to_owned(), generation.to_owned())].into());
    p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
        hostname: Some("hostname".into()),
        subdomain: Some("subdomain".into()),
        ..Default::default()
    });
    p
}

/// client-go's `TestTransformingInformer`: the transform's result is what the store holds and
/// what every notification carries.
mod transforming_informer {
    use super::*;

    fn expected(name: &str, generation: &str) -> Pod {
        let mut p = make_pod(name, generation, 0);
        p.metadata.resource_version = None;
        let spec = p.spec.as_mut().unwrap();
        spec.hostname = Some("new-hostname".into());
        spec.subdomain = None;
        spec.node_name = Some("nodename".into());
        p
    }

    #[tokio::test(start_paused = true)]
    async fn the_store_and_every_notification_hold_transformed_objects() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![make_pod("pod1", "2", 2)], 2, None))).watch(WatchScript::Events(
            vec![
                Ok(WatchEvent::Added(make_pod("pod2", "1", 3))),
                Ok(WatchEvent::Added(make_pod("pod3", "1", 4))),
                Ok(WatchEvent::Modified(make_pod("pod2", "2", 5))),
                Ok(WatchEvent::Deleted(make_pod("pod1", "2", 6))),
            ],
            End::Hang,
        ));
        let inf = KubeInformerBuilder::new(lw)
            .name("transforming")
            .reflector(config())
            .transform(|p: &mut Pod| {
                let spec = p.spec.get_or_insert_with(Default::default);
                spec.hostname = Some("new-hostname".into());
                spec.subdomain = None;
                spec.node_name = Some("nodename".into());
                // Clear the version, as client-go's test does, to compare objects simply.
                p.metadata.resource_version = None;
            })
            .build()
            .unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let e = events.clone();
        let reg = inf
            .add_event_handler(move |n: &Notification<Pod>| {
                let entry = match n {
                    Notification::Add { obj, .. } => ("add", None, Some((**obj).clone())),
                    Notification::Update { old, new } => {
                        ("update", Some((**old).clone()), Some((**new).clone()))
                    }
                    Notification::Delete { obj } => {
                        ("delete", obj.object().map(|o| (**o).clone()), None)
                    }
                };
                e.lock().unwrap().push(entry);
            })
            .unwrap();
        inf.start().unwrap();
        eventually_paused("five notifications", || events.lock().unwrap().len() == 5).await;
        assert!(reg.has_synced());
        assert_eq!(
            *events.lock().unwrap(),
            vec![
                ("add", None, Some(expected("pod1", "2"))),
                ("add", None, Some(expected("pod2", "1"))),
                ("add", None, Some(expected("pod3", "1"))),
                ("update", Some(expected("pod2", "1")), Some(expected("pod2", "2"))),
                ("delete", Some(expected("pod1", "2")), None),
            ]
        );
        let mut store: Vec<Pod> = inf.snapshot().iter().map(|p| (**p).clone()).collect();
        store.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        assert_eq!(store, [expected("pod2", "2"), expected("pod3", "1")]);
        inf.shutdown().await;
    }
}

/// client-go's `TestTransformingInformerRace`: resyncs re-deliver stored objects without
/// transforming them again, while readers read them.
mod transforming_informer_race {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn resyncs_never_transform_an_object_twice() {
        let label = "to-be-transformed";
        let lw = FakeLw::new();
        let five: Vec<Pod> = (0..5)
            .map(|i| {
                let mut p = pod(&format!("pod-{i}"), 1);
                p.metadata.labels = Some([(label.to_owned(), "true".to_owned())].into());
                p
            })
            .collect();
        lw.list(Ok(list(five, 1, None))).watch(WatchScript::Events(vec![], End::Hang));
        let bad = Arc::new(AtomicBool::new(false));
        let b = bad.clone();
        let inf = KubeInformerBuilder::new(lw)
            .name("race")
            .reflector(config())
            .informer(|i| i.resync_period(Duration::from_secs(1)))
            .transform(move |p: &mut Pod| {
                let labels = p.metadata.labels.get_or_insert_with(Default::default);
                if labels.get(label).map(String::as_str) != Some("true") {
                    b.store(true, Ordering::SeqCst);
                }
                labels.insert(label.to_owned(), "false".to_owned());
            })
            .build()
            .unwrap();
        let updates = Arc::new(AtomicUsize::new(0));
        let u = updates.clone();
        inf.add_event_handler(move |n: &Notification<Pod>| {
            if matches!(n, Notification::Update { .. }) {
                u.fetch_add(1, Ordering::SeqCst);
            }
        })
        .unwrap();
        inf.start().unwrap();
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
        let reader = inf.reader();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..5)
            .map(|i| {
                let (reader, stop) = (reader.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let snap = reader.snapshot();
                        let p = snap.get_by_key(&format!("default/pod-{i}")).expect("stored");
                        let labels = p.metadata.labels.as_ref().unwrap();
                        assert_eq!(labels.get(label).map(String::as_str), Some("false"));
                    }
                })
            })
            .collect();
        for _ in 0..3 {
            tokio::time::advance(Duration::from_secs(1)).await;
            tokio::task::yield_now().await;
        }
        eventually_paused("three resyncs of five objects", || updates.load(Ordering::SeqCst) >= 15)
            .await;
        stop.store(true, Ordering::SeqCst);
        for r in readers {
            r.join().unwrap();
        }
        assert!(!bad.load(Ordering::SeqCst), "an object was transformed twice");
        inf.shutdown().await;
    }
}
