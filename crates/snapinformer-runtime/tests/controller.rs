//! The controller runtime's behaviour: read-your-writes against a cache that lags on purpose,
//! its timeout, owned-object mapping, expectations, backoff, shutdown, concurrency, metrics.
//!
//! Tests whose only moving parts are Tokio tasks run on a paused clock, so every delay is
//! exact and free. Tests with a real informer (whose handlers run on their own threads) run on
//! real time, bounded by [`within`].

mod common;

use std::{
    collections::HashSet,
    future::Future,
    pin::pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    task::Poll,
    time::Duration,
};

use common::*;
use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    api::{DeleteParams, PostParams},
    core::Status,
};
use prometheus_client::registry::Registry;
use snapinformer_core::{HandlerExecution, Informer};
use snapinformer_runtime::{
    Action, Config, Context, Controller, Deleted, Handle, ObjectKey, OnTimeout, ReadYourWrites,
    Stopped, Writes, backoff_on_error,
};
use tokio::{
    sync::{Barrier, Notify, mpsc},
    time::{Instant, sleep},
};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn key(s: &str) -> ObjectKey {
    ObjectKey::parse(s)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap()
}

async fn poll_once<F: Future>(mut fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

/// Waits on the (paused) clock until `cond` holds, checking every millisecond.
async fn until(what: &str, cond: impl Fn() -> bool) {
    within(what, async {
        while !cond() {
            sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

// ------------------------------------------------------------------ read-your-writes

/// A StatefulSet-like controller that creates one missing ordinal per reconcile, reading the
/// pods from a [`LaggingCache`], and records, per reconcile, the version the cache showed and
/// the version of the key's previous write.
struct OneAtATime {
    cluster: Arc<MemoryCluster<Pod>>,
    pods: Arc<LaggingCache<Pod>>,
    replicas: usize,
    last_write: Mutex<u64>,
    seen: Mutex<Vec<(u64, u64)>>,
}

async fn create_one_missing(
    ctx: Context<StatefulSet>,
    d: Arc<OneAtATime>,
) -> Result<Action, Error> {
    let last = *lock(&d.last_write);
    lock(&d.seen).push((d.pods.version(), last));
    let (ns, set) = (ctx.key().namespace().unwrap(), ctx.key().name());
    let have: Vec<usize> = d.pods.list().iter().filter_map(|p| ordinal(p, set)).collect();
    let Some(next) = (0..d.replicas).find(|o| !have.contains(o)) else {
        return Ok(Action::await_change());
    };
    let pods = ctx.track(d.cluster.scoped(Some(ns)));
    let created = pods
        .create(
            &PostParams::default(),
            &pod(ns, &format!("{set}-{next}"), Some(("StatefulSet", set))),
        )
        .await?;
    *lock(&d.last_write) = created.metadata.resource_version.unwrap().parse().unwrap();
    Ok(Action::requeue(Duration::ZERO))
}

/// Runs [`create_one_missing`] for `ns/web` (3 replicas) against a pod cache that receives the
/// cluster's events only every 100 ms; returns the data once 3 pods exist and the cache shows
/// them.
async fn run_lagging(read_your_writes: bool) -> Arc<OneAtATime> {
    let rv = Arc::new(Mutex::new(0));
    let data = Arc::new(OneAtATime {
        cluster: MemoryCluster::new(rv),
        pods: LaggingCache::new("pods"),
        replicas: 3,
        last_write: Mutex::new(0),
        seen: Mutex::new(Vec::new()),
    });
    let controller = Controller::<StatefulSet>::new("sts")
        .owns_cache::<Pod>(data.pods.clone())
        .config(Config::default().read_your_writes(read_your_writes));
    let handle = controller.handle();
    let feeder = tokio::spawn({
        let (d, handle) = (data.clone(), handle.clone());
        async move {
            let mut delivered = 0;
            loop {
                sleep(Duration::from_millis(100)).await;
                deliver(&d.cluster, &d.pods, &handle, &mut delivered);
            }
        }
    });
    handle.enqueue(key("ns/web"));
    let run = tokio::spawn(controller.run(create_one_missing, backoff_on_error, data.clone()));
    until("three pods visible", || data.pods.list().len() == 3).await;
    handle.shutdown();
    let stopped = within("shutdown", run).await.unwrap().unwrap();
    assert!(stopped.drained);
    feeder.abort();
    data
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_never_runs_on_a_cache_older_than_its_own_last_write() {
    let data = run_lagging(true).await;
    let seen = lock(&data.seen).clone();
    assert!(seen.len() >= 3, "{seen:?}");
    for (visible, last_write) in &seen {
        assert!(
            visible >= last_write,
            "reconciled at {visible} after writing {last_write}: {seen:?}"
        );
    }
    assert_eq!(data.cluster.creates(), 3);
    assert_eq!(data.cluster.conflicts(), 0, "no create of a pod that exists");
}

#[tokio::test(start_paused = true)]
async fn without_read_your_writes_the_same_controller_acts_on_the_lagging_cache_and_conflicts() {
    // The control for the test above: the lag is real, and read-your-writes is what hides it.
    let data = run_lagging(false).await;
    let seen = lock(&data.seen).clone();
    assert!(seen.iter().any(|(visible, last)| visible < last), "{seen:?}");
    assert!(data.cluster.conflicts() > 0, "stale reads re-created existing pods");
    assert_eq!(data.cluster.creates(), 3);
}

/// A reconcile that creates one pod on its first call and records how read-your-writes went
/// on every call.
struct Recorder {
    cluster: Arc<MemoryCluster<Pod>>,
    calls: Mutex<Vec<(Instant, ReadYourWrites)>>,
}

impl Recorder {
    fn new() -> Arc<Self> {
        Arc::new(Recorder {
            cluster: MemoryCluster::new(Arc::new(Mutex::new(0))),
            calls: Mutex::new(Vec::new()),
        })
    }
}

async fn write_once(ctx: Context<StatefulSet>, d: Arc<Recorder>) -> Result<Action, Error> {
    let first = {
        let mut calls = lock(&d.calls);
        calls.push((Instant::now(), ctx.read_your_writes().clone()));
        calls.len() == 1
    };
    if !first {
        return Ok(Action::await_change());
    }
    let pods = ctx.track(d.cluster.scoped(Some("ns")));
    pods.create(&PostParams::default(), &pod("ns", "web-0", Some(("StatefulSet", "web")))).await?;
    Ok(Action::requeue(Duration::ZERO))
}

#[tokio::test(start_paused = true)]
async fn the_read_your_writes_timeout_fires_and_is_counted_then_the_reconcile_runs() {
    let d = Recorder::new();
    let pods = LaggingCache::<Pod>::new("pods"); // never receives anything
    let controller = Controller::<StatefulSet>::new("sts")
        .owns_cache::<Pod>(pods)
        .config(Config::default().ryw_timeout(Duration::from_secs(5)));
    let handle = controller.handle();
    handle.enqueue(key("ns/web"));
    let run = tokio::spawn(controller.run(write_once, backoff_on_error, d.clone()));
    until("second reconcile", || lock(&d.calls).len() == 2).await;
    let calls = lock(&d.calls).clone();
    assert_eq!(calls[0].1, ReadYourWrites::NothingWritten);
    assert_eq!(calls[1].0 - calls[0].0, Duration::from_secs(5), "waited exactly the timeout");
    assert_eq!(
        calls[1].1,
        ReadYourWrites::TimedOut {
            waited: Duration::from_secs(5),
            cache: "pods".into(),
            version: 1,
            stopped: false
        }
    );
    let stats = handle.stats();
    assert_eq!((stats.ryw_waits, stats.ryw_timeouts), (1, 1));
    // The versions given up on are forgotten: the next reconcile does not wait again.
    assert!(handle.pending_writes(&key("ns/web")).is_empty());
    let enqueued = Instant::now();
    handle.enqueue(key("ns/web"));
    until("third reconcile", || lock(&d.calls).len() == 3).await;
    assert_eq!(lock(&d.calls)[2].1, ReadYourWrites::NothingWritten);
    assert_eq!(lock(&d.calls)[2].0, enqueued, "no wait");
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn with_the_requeue_policy_a_timeout_puts_the_reconcile_off_until_the_cache_catches_up() {
    let d = Recorder::new();
    let pods = LaggingCache::<Pod>::new("pods");
    let controller = Controller::<StatefulSet>::new("sts").owns_cache::<Pod>(pods.clone()).config(
        Config::default()
            .ryw_timeout(Duration::from_secs(1))
            .ryw_timeout_policy(OnTimeout::Requeue),
    );
    let handle = controller.handle();
    handle.enqueue(key("ns/web"));
    let start = Instant::now();
    let run = tokio::spawn(controller.run(write_once, backoff_on_error, d.clone()));
    // Deliver the create 2.5 s later.
    sleep(Duration::from_millis(2500)).await;
    for (rv, ev) in d.cluster.events_after(0) {
        pods.apply(rv, &ev);
    }
    until("second reconcile", || lock(&d.calls).len() == 2).await;
    let calls = lock(&d.calls).clone();
    assert_eq!(
        calls[1].0 - start,
        Duration::from_millis(2500),
        "ran as soon as the cache showed it"
    );
    assert!(matches!(calls[1].1, ReadYourWrites::CaughtUp { .. }), "{:?}", calls[1].1);
    let stats = handle.stats();
    assert_eq!(stats.ryw_timeouts, 2, "1 s, then (after 5 ms backoff) 1 s again");
    assert_eq!(stats.ryw_requeues, 2);
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

// ------------------------------------------------------------------ owned objects

#[tokio::test]
async fn an_owned_object_event_maps_to_its_controller_owner() {
    owned_events_map_to_their_owner(HandlerExecution::Thread).await;
}

#[tokio::test]
async fn with_its_handlers_as_tasks_an_owned_object_event_maps_to_its_controller_owner() {
    owned_events_map_to_their_owner(HandlerExecution::Task).await;
}

async fn owned_events_map_to_their_owner(execution: HandlerExecution) {
    let pods =
        Informer::<Pod>::builder(snapinformer_kube::access::<Pod>()).name("pods").build().unwrap();
    pods.start().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<ObjectKey>();
    let controller = Controller::<StatefulSet>::new("sts")
        .config(Config::default().workers(1).handler_execution(execution))
        .owns(&pods);
    let handle = controller.handle();
    let reconcile = move |ctx: Context<StatefulSet>, tx: Arc<mpsc::UnboundedSender<ObjectKey>>| async move {
        tx.send(ctx.key().clone()).unwrap();
        Ok::<_, Error>(Action::await_change())
    };
    let run = tokio::spawn(controller.run(reconcile, backoff_on_error, Arc::new(tx)));
    async fn next(rx: &mut mpsc::UnboundedReceiver<ObjectKey>) -> ObjectKey {
        within("a reconcile", rx.recv()).await.unwrap()
    }

    let mut owned = pod("ns", "web-0", Some(("StatefulSet", "web")));
    owned.metadata.resource_version = Some("1".into());
    pods.queue().add(Arc::new(owned.clone())).unwrap();
    assert_eq!(next(&mut rx).await, key("ns/web"));

    // Neither a pod without a controller, nor one controlled by another kind, queues anything:
    // the next key reconciled is the sentinel's owner.
    let mut not_controller = pod("ns", "loose", Some(("StatefulSet", "web")));
    not_controller.metadata.owner_references.as_mut().unwrap()[0].controller = Some(false);
    pods.queue().add(Arc::new(not_controller)).unwrap();
    pods.queue().add(Arc::new(pod("ns", "rs-pod", Some(("ReplicaSet", "web"))))).unwrap();
    pods.queue().add(Arc::new(pod("ns", "orphan", None))).unwrap();
    pods.queue().add(Arc::new(pod("ns", "db-0", Some(("StatefulSet", "db"))))).unwrap();
    assert_eq!(next(&mut rx).await, key("ns/db"));

    // A delete maps to the owner too.
    pods.queue().delete(Arc::new(owned)).unwrap();
    assert_eq!(next(&mut rx).await, key("ns/web"));

    assert_eq!(handle.owner_of(&pod("x", "p", Some(("StatefulSet", "s")))), Some(key("x/s")));
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
    pods.shutdown().await;
}

#[tokio::test]
async fn a_custom_event_source_maps_owned_objects_through_the_handle() {
    let controller = Controller::<StatefulSet>::new("sts").workers(1);
    let handle: Handle<StatefulSet> = controller.handle();
    handle.owned_added(&pod("ns", "web-0", Some(("StatefulSet", "web"))));
    handle.owned_added(&pod("ns", "x", Some(("DaemonSet", "web"))));
    assert_eq!(handle.queue().len(), 1);
    assert_eq!(handle.queue().get_timeout(Duration::ZERO), Ok(Some(key("ns/web"))));
}

// ------------------------------------------------------------------ expectations

/// Creates `web-0` when the cache lacks it, unless earlier creates are still unobserved.
struct Expecting {
    cluster: Arc<MemoryCluster<Pod>>,
    pods: Arc<LaggingCache<Pod>>,
    blocked: AtomicUsize,
    reconciles: AtomicUsize,
}

impl Expecting {
    fn new() -> Arc<Self> {
        Arc::new(Expecting {
            cluster: MemoryCluster::new(Arc::new(Mutex::new(0))),
            pods: LaggingCache::new("pods"),
            blocked: AtomicUsize::new(0),
            reconciles: AtomicUsize::new(0),
        })
    }
}

async fn create_if_missing(ctx: Context<StatefulSet>, d: Arc<Expecting>) -> Result<Action, Error> {
    d.reconciles.fetch_add(1, Ordering::SeqCst);
    if !ctx.expectations_satisfied() {
        d.blocked.fetch_add(1, Ordering::SeqCst);
        return Ok(Action::await_change());
    }
    if d.pods.get("ns/web-0").is_none() {
        let pods = ctx.track(d.cluster.scoped(Some("ns")));
        pods.create(&PostParams::default(), &pod("ns", "web-0", Some(("StatefulSet", "web"))))
            .await?;
    }
    Ok(Action::await_change())
}

#[tokio::test(start_paused = true)]
async fn expectations_block_re_creation_until_the_create_is_observed() {
    let d = Expecting::new();
    // Read-your-writes off: expectations alone must prevent the duplicate.
    let controller = Controller::<StatefulSet>::new("sts")
        .owns_cache::<Pod>(d.pods.clone())
        .config(Config::default().read_your_writes(false).workers(1));
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(create_if_missing, backoff_on_error, d.clone()));
    let web = key("ns/web");
    handle.enqueue(web.clone());
    until("first reconcile", || d.reconciles.load(Ordering::SeqCst) == 1).await;
    assert_eq!(handle.expectations(&web).adds, 1);
    assert_eq!(handle.stats().expected_adds, 1);

    // The cache has not shown the pod: a reconcile now must not create it again.
    handle.enqueue(web.clone());
    until("second reconcile", || d.reconciles.load(Ordering::SeqCst) == 2).await;
    assert_eq!(d.blocked.load(Ordering::SeqCst), 1);
    assert_eq!(d.cluster.creates(), 1);

    // The add event arrives: the expectation is met and the key reconciled again.
    let mut delivered = 0;
    deliver(&d.cluster, &d.pods, &handle, &mut delivered);
    until("third reconcile", || d.reconciles.load(Ordering::SeqCst) == 3).await;
    assert_eq!(d.blocked.load(Ordering::SeqCst), 1, "satisfied now");
    assert!(handle.expectations(&web).is_empty());
    assert_eq!(d.cluster.creates(), 1);
    assert_eq!(d.cluster.conflicts(), 0);
    assert_eq!(handle.stats().expected_adds, 0);
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn unobserved_expectations_expire_after_their_timeout() {
    let d = Expecting::new();
    let controller =
        Controller::<StatefulSet>::new("sts").owns_cache::<Pod>(d.pods.clone()).config(
            Config::default()
                .read_your_writes(false)
                .expectations_timeout(Duration::from_secs(60))
                .workers(1),
        );
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(create_if_missing, backoff_on_error, d.clone()));
    handle.enqueue(key("ns/web"));
    until("first reconcile", || d.reconciles.load(Ordering::SeqCst) == 1).await;
    sleep(Duration::from_secs(60)).await;
    // The event was lost: after the timeout the controller acts again (and finds the conflict).
    handle.enqueue(key("ns/web"));
    until("second reconcile", || d.reconciles.load(Ordering::SeqCst) >= 2).await;
    assert_eq!(d.blocked.load(Ordering::SeqCst), 0);
    assert_eq!(handle.stats().expectations_expired, 1);
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

/// Writes whose deletes answer with a bare `Status`, as a server may.
struct StatusDeletes;

impl Writes<Pod> for StatusDeletes {
    fn namespace(&self) -> Option<&str> {
        Some("ns")
    }
    async fn create(&self, _: &PostParams, obj: &Pod) -> kube::Result<Pod> {
        Ok(obj.clone())
    }
    async fn replace(&self, _: &str, _: &PostParams, obj: &Pod) -> kube::Result<Pod> {
        Ok(obj.clone())
    }
    async fn replace_status(&self, _: &str, _: &PostParams, obj: &Pod) -> kube::Result<Pod> {
        Ok(obj.clone())
    }
    async fn patch<P: serde::Serialize + std::fmt::Debug + Send + Sync>(
        &self,
        _: &str,
        _: &kube::api::PatchParams,
        _: &kube::api::Patch<P>,
    ) -> kube::Result<Pod> {
        unimplemented!("not used")
    }
    async fn patch_status<P: serde::Serialize + std::fmt::Debug + Send + Sync>(
        &self,
        _: &str,
        _: &kube::api::PatchParams,
        _: &kube::api::Patch<P>,
    ) -> kube::Result<Pod> {
        unimplemented!("not used")
    }
    async fn delete(&self, _: &str, _: &DeleteParams) -> kube::Result<Deleted<Pod>> {
        Ok(Deleted::Status(Box::new(Status::success())))
    }
}

/// A controller for `ns/web` whose first reconcile deletes `web-1` (answered with a bare
/// `Status`) and whose every reconcile reports whether its expectations are satisfied; the
/// first report is already received. Returns the handle, the reports and the running task.
async fn deleting_web_1() -> (
    Handle<StatefulSet>,
    mpsc::UnboundedReceiver<bool>,
    tokio::task::JoinHandle<snapinformer_runtime::Result<Stopped>>,
) {
    let pods = LaggingCache::<Pod>::new("pods");
    let controller = Controller::<StatefulSet>::new("sts").owns_cache::<Pod>(pods).workers(1);
    let handle = controller.handle();
    let (tx, mut rx) = mpsc::unbounded_channel();
    type D = (mpsc::UnboundedSender<bool>, AtomicUsize);
    let reconcile = move |ctx: Context<StatefulSet>, d: Arc<D>| async move {
        if d.1.fetch_add(1, Ordering::SeqCst) == 0 {
            ctx.track(StatusDeletes).delete("web-1", &DeleteParams::default()).await?;
        }
        d.0.send(ctx.expectations_satisfied()).unwrap();
        Ok::<_, Error>(Action::await_change())
    };
    let run = tokio::spawn(controller.run(
        reconcile,
        backoff_on_error,
        Arc::new((tx, AtomicUsize::new(0))),
    ));
    handle.enqueue(key("ns/web"));
    assert!(!within("reconcile", rx.recv()).await.unwrap(), "the delete is expected");
    assert_eq!(handle.stats().expected_deletes, 1);
    (handle, rx, run)
}

/// `web-1` (as `deleting_web_1` deletes it), alive and terminating.
fn web_1_alive_and_terminating() -> (Pod, Pod) {
    let alive = pod("ns", "web-1", Some(("StatefulSet", "web")));
    let mut terminating = alive.clone();
    terminating.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
    (alive, terminating)
}

#[tokio::test(start_paused = true)]
async fn a_delete_answered_with_a_status_is_expected_until_the_object_is_seen_gone() {
    let (handle, mut rx, run) = deleting_web_1().await;
    assert!(
        handle.pending_writes(&key("ns/web")).is_empty(),
        "a status has no version to wait for"
    );
    // Seeing it terminating, then gone, lowers it once.
    let (gone, terminating) = web_1_alive_and_terminating();
    handle.owned_updated(&gone, &terminating);
    assert!(within("reconcile", rx.recv()).await.unwrap(), "terminating counts as observed");
    assert_eq!(handle.stats().expected_deletes, 0);
    handle.owned_deleted(&gone);
    assert!(within("reconcile", rx.recv()).await.unwrap());
    assert_eq!(handle.stats().expected_deletes, 0, "seen twice, lowered once");
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_terminating_object_seen_without_its_old_state_counts_as_an_observed_delete_once() {
    // A source with no old objects (kube-rs' watcher, a harness pipeline) reports changes
    // through `owned_changed`.
    let (handle, mut rx, run) = deleting_web_1().await;
    let (alive, terminating) = web_1_alive_and_terminating();
    handle.owned_changed(&alive);
    assert!(!within("reconcile", rx.recv()).await.unwrap(), "not terminating: still expected");
    handle.owned_changed(&terminating);
    assert!(within("reconcile", rx.recv()).await.unwrap(), "terminating counts as observed");
    handle.owned_changed(&terminating);
    assert!(within("reconcile", rx.recv()).await.unwrap());
    assert_eq!(handle.stats().expected_deletes, 0, "seen twice, lowered once");
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

// ------------------------------------------------------------------ write outcomes

#[tokio::test(start_paused = true)]
async fn writes_are_counted_by_outcome_and_a_create_of_an_existing_object_is_already_exists() {
    let cluster = MemoryCluster::<Pod>::new(Arc::new(Mutex::new(0)));
    cluster.insert(pod("ns", "web-0", Some(("StatefulSet", "web"))));
    let controller = Controller::<StatefulSet>::new("sts")
        .owns_cache::<Pod>(LaggingCache::<Pod>::new("pods"))
        .config(Config::default().read_your_writes(false).workers(1));
    let mut registry = Registry::default();
    controller.register_metrics(&mut registry);
    let handle = controller.handle();
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let reconcile = move |ctx: Context<StatefulSet>, d: Arc<(Arc<MemoryCluster<Pod>>, _)>| async move {
        let (cluster, done): &(_, mpsc::UnboundedSender<()>) = &d;
        let pods = ctx.track(cluster.scoped(Some("ns")));
        let web = |name: &str| pod("ns", name, Some(("StatefulSet", "web")));
        let pp = PostParams::default();
        let exists = pods.create(&pp, &web("web-0")).await.unwrap_err();
        assert!(matches!(exists, kube::Error::Api(s) if s.code == 409));
        pods.create(&pp, &web("web-1")).await?;
        assert!(pods.delete("web-9", &DeleteParams::default()).await.is_err());
        cluster.fail_next(1);
        assert!(pods.create(&pp, &web("web-2")).await.is_err());
        pods.delete("web-1", &DeleteParams::default()).await?;
        done.send(()).unwrap();
        Ok::<_, Error>(Action::await_change())
    };
    let run = tokio::spawn(controller.run(reconcile, backoff_on_error, Arc::new((cluster, tx))));
    handle.enqueue(key("ns/web"));
    within("reconcile", rx.recv()).await.unwrap();
    let stats = handle.stats();
    assert_eq!(
        (stats.created, stats.deleted, stats.writes),
        (1, 1, 2),
        "successful writes: {stats:?}"
    );
    assert_eq!(
        (stats.already_exists, stats.not_found, stats.write_errors, stats.write_conflicts),
        (1, 1, 1, 0),
        "failed writes: {stats:?}"
    );
    let text = snapinformer_core::metrics::encode_text(&registry).unwrap();
    for line in [
        "snapinformer_controller_writes_total{controller=\"sts\",verb=\"create\",outcome=\"already_exists\"} 1",
        "snapinformer_controller_writes_total{controller=\"sts\",verb=\"create\",outcome=\"success\"} 1",
        "snapinformer_controller_writes_total{controller=\"sts\",verb=\"create\",outcome=\"error\"} 1",
        "snapinformer_controller_writes_total{controller=\"sts\",verb=\"delete\",outcome=\"not_found\"} 1",
        "snapinformer_controller_writes_total{controller=\"sts\",verb=\"delete\",outcome=\"success\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

// ------------------------------------------------------------------ errors

#[tokio::test(start_paused = true)]
async fn errors_requeue_with_exponential_backoff_and_a_success_resets_it() {
    let calls = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let controller = Controller::<StatefulSet>::new("sts").workers(1);
    let handle = controller.handle();
    let reconcile = |_ctx: Context<StatefulSet>, calls: Arc<Mutex<Vec<Instant>>>| async move {
        let n = {
            let mut c = lock(&calls);
            c.push(Instant::now());
            c.len()
        };
        // Fails three times, succeeds, then fails once more.
        match n {
            1..=3 | 5 => Err::<Action, Error>(format!("attempt {n} failed").into()),
            _ => Ok(Action::await_change()),
        }
    };
    handle.enqueue(key("ns/web"));
    let run = tokio::spawn(controller.run(reconcile, backoff_on_error, calls.clone()));
    until("four attempts", || lock(&calls).len() == 4).await;
    handle.enqueue(key("ns/web"));
    until("six attempts", || lock(&calls).len() == 6).await;
    let t = lock(&calls).clone();
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1] - w[0]).collect();
    let ms = Duration::from_millis;
    assert_eq!(&gaps[..3], &[ms(5), ms(10), ms(20)], "the default limiter doubles from 5 ms");
    assert_eq!(gaps[4], ms(5), "the success reset the backoff");
    assert_eq!(handle.stats().errors, 4);
    assert_eq!(handle.stats().successes, 2);
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_is_counted_and_its_key_backed_off() {
    let calls = Arc::new(AtomicUsize::new(0));
    let controller = Controller::<StatefulSet>::new("sts").workers(1);
    let handle = controller.handle();
    let reconcile = |_ctx: Context<StatefulSet>, calls: Arc<AtomicUsize>| async move {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("reconcile bug");
        }
        Ok::<_, Error>(Action::await_change())
    };
    handle.enqueue(key("ns/web"));
    let run = tokio::spawn(controller.run(reconcile, backoff_on_error, calls.clone()));
    until("retried after the panic", || calls.load(Ordering::SeqCst) == 2).await;
    let stats = handle.stats();
    assert_eq!((stats.panics, stats.successes), (1, 1));
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

// ------------------------------------------------------------------ shutdown and workers

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_running_reconciles_and_takes_no_new_keys() {
    let release = Arc::new(Notify::new());
    let started = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let controller = Controller::<StatefulSet>::new("sts").workers(1);
    let handle = controller.handle();
    let data = Arc::new((release.clone(), started.clone(), finished.clone()));
    let reconcile =
        |_ctx: Context<StatefulSet>, d: Arc<(Arc<Notify>, Arc<AtomicUsize>, Arc<AtomicUsize>)>| async move {
            d.1.fetch_add(1, Ordering::SeqCst);
            d.0.notified().await;
            d.2.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Error>(Action::await_change())
        };
    handle.enqueue(key("ns/a"));
    let mut run = pin!(controller.run(reconcile, backoff_on_error, data));
    assert!(poll_once(run.as_mut()).await.is_pending());
    // Let the worker take `a` and block in it.
    let mut spins = 0;
    while started.load(Ordering::SeqCst) == 0 {
        assert!(poll_once(run.as_mut()).await.is_pending());
        tokio::task::yield_now().await;
        spins += 1;
        assert!(spins < 10_000, "the reconcile never started");
    }
    handle.enqueue(key("ns/b"));
    handle.shutdown();
    for _ in 0..100 {
        assert!(poll_once(run.as_mut()).await.is_pending(), "returned while `a` was running");
        tokio::task::yield_now().await;
    }
    release.notify_one();
    let stopped = within("shutdown", run).await.unwrap();
    assert_eq!(stopped, Stopped { drained: true, cancelled: 0 });
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert_eq!(started.load(Ordering::SeqCst), 1, "`b` was not taken after shutdown");
    assert!(handle.queue().is_shutting_down());
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_reconciles_still_running_after_its_timeout() {
    let controller = Controller::<StatefulSet>::new("sts")
        .config(Config::default().workers(1).shutdown_timeout(Duration::from_secs(3)));
    let handle = controller.handle();
    let started = Arc::new(Notify::new());
    let reconcile = |_ctx: Context<StatefulSet>, started: Arc<Notify>| async move {
        started.notify_one();
        std::future::pending::<()>().await;
        Ok::<_, Error>(Action::await_change())
    };
    handle.enqueue(key("ns/stuck"));
    let run = tokio::spawn(controller.run(reconcile, backoff_on_error, started.clone()));
    within("reconcile starts", started.notified()).await;
    let t0 = Instant::now();
    handle.shutdown();
    let stopped = within("shutdown", run).await.unwrap().unwrap();
    assert_eq!(stopped, Stopped { drained: false, cancelled: 1 });
    assert_eq!(t0.elapsed(), Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_run_returns_no_reconcile_code_runs_any_more() {
    // A reconcile blocked in a synchronous step (a long read, a lock) when the shutdown
    // timeout passes: `run` returns only once that step is over, so the controller's writes
    // are over when it returns. Real time: the step blocks a thread.
    let controller = Controller::<StatefulSet>::new("sts")
        .config(Config::default().workers(1).shutdown_timeout(Duration::from_millis(10)));
    let handle = controller.handle();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    type D = (
        Mutex<std::sync::mpsc::Sender<()>>,
        Mutex<std::sync::mpsc::Receiver<()>>,
        Arc<std::sync::atomic::AtomicBool>,
    );
    let data: Arc<D> = Arc::new((Mutex::new(started_tx), Mutex::new(release_rx), finished.clone()));
    let reconcile = |_ctx: Context<StatefulSet>, d: Arc<D>| async move {
        lock(&d.0).send(()).unwrap();
        let _ = lock(&d.1).recv_timeout(Duration::from_secs(20));
        d.2.store(true, Ordering::SeqCst);
        Ok::<_, Error>(Action::await_change())
    };
    handle.enqueue(key("ns/web"));
    let run = tokio::spawn(controller.run(reconcile, backoff_on_error, data));
    within("reconcile starts", async {
        tokio::task::spawn_blocking(move || started_rx.recv_timeout(Duration::from_secs(20)))
            .await
            .unwrap()
            .unwrap()
    })
    .await;
    handle.shutdown();
    let releaser = std::thread::spawn(move || {
        // Well after the shutdown timeout.
        std::thread::sleep(Duration::from_millis(200));
        let _ = release_tx.send(());
    });
    let stopped = within("shutdown", run).await.unwrap().unwrap();
    assert!(!stopped.drained, "the shutdown timeout passed first");
    assert!(finished.load(Ordering::SeqCst), "run returned while the reconcile was still running");
    releaser.join().unwrap();
}

#[tokio::test(start_paused = true)]
async fn n_workers_reconcile_distinct_keys_concurrently_but_never_one_key_twice_at_once() {
    const KEYS: usize = 4;
    struct D {
        /// The first run of each key waits here until all four run at once.
        barrier: Barrier,
        first_runs: Mutex<HashSet<ObjectKey>>,
        in_flight: Mutex<HashSet<ObjectKey>>,
        overlaps: AtomicUsize,
        max_parallel: AtomicUsize,
        runs_of_a: AtomicUsize,
        handle: Mutex<Option<Handle<StatefulSet>>>,
    }
    let d = Arc::new(D {
        barrier: Barrier::new(KEYS),
        first_runs: Mutex::new(HashSet::new()),
        in_flight: Mutex::new(HashSet::new()),
        overlaps: AtomicUsize::new(0),
        max_parallel: AtomicUsize::new(0),
        runs_of_a: AtomicUsize::new(0),
        handle: Mutex::new(None),
    });
    // One worker more than keys: it is idle, and would take `a` again if the queue let it.
    let controller = Controller::<StatefulSet>::new("sts").workers(KEYS + 1);
    let handle = controller.handle();
    *lock(&d.handle) = Some(handle.clone());
    let reconcile = |ctx: Context<StatefulSet>, d: Arc<D>| async move {
        let k = ctx.key().clone();
        let first = lock(&d.first_runs).insert(k.clone());
        {
            let mut f = lock(&d.in_flight);
            if !f.insert(k.clone()) {
                d.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            d.max_parallel.fetch_max(f.len(), Ordering::SeqCst);
        }
        if first {
            if k.name() == "a" {
                // Queued again while it runs: must wait for this run to end.
                lock(&d.handle).as_ref().unwrap().enqueue(k.clone());
            }
            d.barrier.wait().await;
        }
        sleep(Duration::from_millis(10)).await;
        lock(&d.in_flight).remove(&k);
        if k.name() == "a" {
            d.runs_of_a.fetch_add(1, Ordering::SeqCst);
        }
        Ok::<_, Error>(Action::await_change())
    };
    for k in ["ns/a", "ns/b", "ns/c", "ns/d"] {
        handle.enqueue(key(k));
    }
    let run = tokio::spawn(controller.run(reconcile, backoff_on_error, d.clone()));
    until("a ran twice", || d.runs_of_a.load(Ordering::SeqCst) == 2).await;
    assert_eq!(d.max_parallel.load(Ordering::SeqCst), KEYS, "the four keys ran at once");
    assert_eq!(d.overlaps.load(Ordering::SeqCst), 0, "a key was reconciled twice at once");
    assert_eq!(handle.stats().successes, 5);
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}

// ------------------------------------------------------------------ metrics

#[tokio::test(start_paused = true)]
async fn metrics_render_reconciles_waits_timeouts_expectations_and_the_queue() {
    let d = Recorder::new();
    let controller = Controller::<StatefulSet>::new("web-sts")
        .owns_cache::<Pod>(LaggingCache::<Pod>::new("pods"))
        .config(Config::default().ryw_timeout(Duration::from_secs(1)));
    let mut registry = Registry::default();
    controller.register_metrics(&mut registry);
    let handle = controller.handle();
    handle.enqueue(key("ns/web"));
    let run = tokio::spawn(controller.run(write_once, backoff_on_error, d.clone()));
    until("second reconcile", || lock(&d.calls).len() == 2).await;
    let text = snapinformer_core::metrics::encode_text(&registry).unwrap();
    for line in [
        "snapinformer_controller_reconciles_total{controller=\"web-sts\",result=\"success\"} 2",
        "snapinformer_controller_ryw_waits_total{controller=\"web-sts\"} 1",
        "snapinformer_controller_ryw_timeouts_total{controller=\"web-sts\"} 1",
        "snapinformer_controller_ryw_wait_duration_seconds_sum{controller=\"web-sts\"} 1.0",
        "snapinformer_controller_reconcile_duration_seconds_count{controller=\"web-sts\"} 2",
        "snapinformer_controller_expected_adds{controller=\"web-sts\"} 1",
        "snapinformer_controller_expected_deletes{controller=\"web-sts\"} 0",
        "snapinformer_workqueue_adds_total{name=\"web-sts\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    handle.shutdown();
    within("shutdown", run).await.unwrap().unwrap();
}
