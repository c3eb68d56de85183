//! The shared informer: batch apply and publish, handler isolation, late registration, resync,
//! has_synced, removal, the factory and metrics.

mod common;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{Obj, access, eventually, key, labeled, obj};
use snapinformer_core::{
    DeltaObject, HandlerExecution, HandlerOptions, Informer, InformerBuilder, InformerFactory,
    Notification, Processing, Published, QueueKind,
};
use snapinformer_store::{IndexFn, StoreBuilder};
use tokio::time::timeout;

/// What a recording handler saw.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Add(String, String, bool),
    Update(String, String, String),
    Delete(String, bool),
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn recorder() -> (Log, impl FnMut(&Notification<Obj>) + Send + 'static) {
    let log: Log = Arc::default();
    let l = log.clone();
    let handler = move |n: &Notification<Obj>| {
        let seen = match n {
            Notification::Add { obj, is_in_initial_list } => {
                Seen::Add(obj.name.clone(), obj.rv.clone(), *is_in_initial_list)
            }
            Notification::Update { old, new } => {
                Seen::Update(new.name.clone(), old.rv.clone(), new.rv.clone())
            }
            Notification::Delete { obj } => Seen::Delete(
                obj.object().map(|o| o.name.clone()).unwrap_or_default(),
                obj.is_tombstone(),
            ),
        };
        l.lock().unwrap().push(seen);
    };
    (log, handler)
}

fn len(log: &Log) -> usize {
    log.lock().unwrap().len()
}

fn informer(kind: QueueKind) -> Informer<Obj> {
    Informer::<Obj>::builder(access()).name("test").queue(kind).build().unwrap()
}

#[tokio::test]
async fn batch_is_applied_and_published_once_then_distributed() {
    for kind in [QueueKind::Real, QueueKind::Delta] {
        let inf = informer(kind);
        let (log, h) = recorder();
        inf.add_event_handler(h).unwrap();
        for i in 1..=100 {
            inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
        }
        inf.start().unwrap();
        let snap = inf.wait_for("100", Duration::from_secs(5)).await.unwrap();
        assert_eq!(snap.len(), 100);
        assert_eq!(snap.publication(), 1, "{kind:?}: one batch, one publication");
        assert_eq!(snap.resource_version(), Some("100"));
        assert_eq!(inf.metrics().publications.get(), 1);
        assert_eq!(inf.metrics().deltas_applied.get(), 100);
        eventually("handler got 100 adds", || len(&log) == 100).await;
        assert!(log.lock().unwrap().iter().all(|s| matches!(s, Seen::Add(_, _, false))));
        assert!(inf.has_synced(), "an add before any replace counts as synced");
        inf.shutdown().await;
    }
}

#[tokio::test]
async fn notifications_carry_old_and_new_objects_and_tombstones() {
    for kind in [QueueKind::Real, QueueKind::Delta] {
        let inf = informer(kind);
        let (log, h) = recorder();
        inf.add_event_handler(h).unwrap();
        inf.start().unwrap();
        let q = inf.queue();
        q.replace(vec![obj("a", 1), obj("b", 2)], "2").unwrap();
        inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
        q.update(obj("a", 3)).unwrap();
        q.delete(obj("a", 4)).unwrap();
        inf.wait_for("4", Duration::from_secs(5)).await.unwrap();
        q.replace(vec![], "5").unwrap(); // b vanished while the watch was down
        let snap = inf.wait_for("5", Duration::from_secs(5)).await.unwrap();
        assert!(snap.is_empty());
        eventually("five notifications", || len(&log) == 5).await;
        let mut got = log.lock().unwrap().clone();
        got[..2].sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        assert_eq!(
            got,
            vec![
                Seen::Add("a".into(), "1".into(), true),
                Seen::Add("b".into(), "2".into(), true),
                Seen::Update("a".into(), "1".into(), "3".into()),
                Seen::Delete("a".into(), false),
                Seen::Delete("b".into(), true),
            ],
            "{kind:?}"
        );
        inf.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handler_delays_neither_the_store_nor_other_handlers() {
    let inf = informer(QueueKind::Real);
    let slow_calls = Arc::new(AtomicUsize::new(0));
    let s = slow_calls.clone();
    let slow = inf
        .add_event_handler_with(
            move |_: &Notification<Obj>| {
                s.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(1500));
            },
            HandlerOptions::new().name("slow"),
        )
        .unwrap();
    let (log, fast) = recorder();
    inf.add_event_handler_with(fast, HandlerOptions::new().name("fast")).unwrap();
    inf.start().unwrap();
    let start = std::time::Instant::now();
    for i in 1..=200 {
        inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
        if i % 20 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let snap = inf.wait_for("200", Duration::from_secs(1)).await.expect("store held back");
    assert_eq!(snap.len(), 200);
    timeout(Duration::from_secs(1), async {
        while len(&log) < 200 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the fast handler was held back by the slow one");
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_millis(1400), "took {elapsed:?}");
    assert_eq!(slow_calls.load(Ordering::SeqCst), 1, "the slow handler is still in its first call");
    assert!(slow.buffer_depth() >= 150, "the slow handler's own buffer holds its backlog");
    inf.remove_event_handler(&slow).unwrap();
    assert_eq!(slow.buffer_depth(), 0, "removal drops the backlog");
    inf.shutdown().await;
}

/// A handler that checks, per key, that it never sees a duplicate add, an update or delete for
/// a key it does not hold, or an update whose old state is not the one it holds (a gap).
#[derive(Default)]
struct Model {
    objects: HashMap<String, String>,
    errors: Vec<String>,
    /// Adds from the registration replay, and notifications of later changes.
    replayed: usize,
    live: usize,
}

fn model_handler(model: Arc<Mutex<Model>>) -> impl FnMut(&Notification<Obj>) + Send + 'static {
    move |n: &Notification<Obj>| {
        let mut m = model.lock().unwrap();
        match n {
            Notification::Add { is_in_initial_list: true, .. } => m.replayed += 1,
            _ => m.live += 1,
        }
        match n {
            Notification::Add { obj, .. } => {
                if m.objects.insert(obj.name.clone(), obj.rv.clone()).is_some() {
                    m.errors.push(format!("duplicate add of {}", obj.name));
                }
            }
            Notification::Update { old, new } => {
                match m.objects.insert(new.name.clone(), new.rv.clone()) {
                    Some(held) if held == old.rv => {}
                    other => m.errors.push(format!(
                        "update of {} from {} but held {other:?} (gap)",
                        new.name, old.rv
                    )),
                }
            }
            Notification::Delete { obj } => {
                let name = obj.object().map(|o| o.name.clone()).unwrap_or_default();
                if m.objects.remove(&name).is_none() {
                    m.errors.push(format!("delete of {name} not held"));
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_handler_gets_snapshot_then_every_later_change_without_gap_or_duplicate() {
    let variants = [
        (QueueKind::Real, Processing::Runtime),
        (QueueKind::Delta, Processing::Runtime),
        (QueueKind::Real, Processing::DedicatedThread),
        (QueueKind::Delta, Processing::DedicatedThread),
    ];
    for (kind, processing) in variants {
        let kind = (kind, processing);
        let inf = Informer::<Obj>::builder(access())
            .queue(kind.0)
            .processing(processing)
            .max_batch(64)
            .build()
            .unwrap();
        inf.start().unwrap();
        let producer = tokio::spawn({
            let inf = inf.clone();
            async move {
                let q = inf.queue();
                let mut written = HashMap::new();
                let mut rv = 0;
                for i in 0..3000u64 {
                    rv += 1;
                    q.add(obj(&format!("k{i}"), rv)).unwrap();
                    written.insert(format!("k{i}"), rv.to_string());
                    if i >= 10 {
                        rv += 1;
                        q.update(obj(&format!("k{}", i - 10), rv)).unwrap();
                        written.insert(format!("k{}", i - 10), rv.to_string());
                    }
                    if i >= 20 && i % 7 == 0 {
                        rv += 1;
                        q.delete(obj(&format!("k{}", i - 20), rv)).unwrap();
                        written.remove(&format!("k{}", i - 20));
                    }
                    if i % 50 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                (rv, written)
            }
        });
        // Register handlers at different moments while the stream flows.
        let mut models = Vec::new();
        for round in 0..6 {
            let model = Arc::new(Mutex::new(Model::default()));
            // Every other handler runs as a task: the same guarantee either way.
            let execution =
                if round % 2 == 1 { HandlerExecution::Task } else { HandlerExecution::Thread };
            let reg = inf
                .add_event_handler_with(
                    model_handler(model.clone()),
                    HandlerOptions::new().execution(execution),
                )
                .unwrap();
            models.push((reg, model));
            tokio::time::sleep(Duration::from_millis(1 + round)).await;
        }
        let (last_rv, written) = producer.await.unwrap();
        let snap = inf.wait_for(&last_rv.to_string(), Duration::from_secs(10)).await.unwrap();
        let expected: HashMap<String, String> =
            snap.iter().map(|o| (o.name.clone(), o.rv.clone())).collect();
        assert!(expected == written, "{kind:?}: wait_for returned a snapshot missing writes");
        for (i, (reg, model)) in models.iter().enumerate() {
            timeout(Duration::from_secs(10), async {
                while model.lock().unwrap().objects != expected
                    && model.lock().unwrap().errors.is_empty()
                {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
            .await
            .unwrap_or_else(|_| {
                let m = model.lock().unwrap();
                let mut diff: Vec<String> = Vec::new();
                for (k, v) in &expected {
                    if m.objects.get(k) != Some(v) {
                        diff.push(format!("{k}: store {v} handler {:?}", m.objects.get(k)));
                    }
                }
                for (k, v) in &m.objects {
                    if !expected.contains_key(k) {
                        diff.push(format!("{k}: store None handler {v}"));
                    }
                }
                diff.truncate(10);
                panic!(
                    "{kind:?} handler {i} never caught up: replayed {} live {} diff {diff:?}",
                    m.replayed, m.live
                )
            });
            let m = model.lock().unwrap();
            assert!(
                m.errors.is_empty(),
                "{kind:?} handler {i}: {:?}",
                &m.errors[..m.errors.len().min(5)]
            );
            assert_eq!(m.objects, expected);
            assert!(reg.has_synced());
        }
        assert!(
            models.iter().any(|(_, m)| {
                let m = m.lock().unwrap();
                m.replayed > 0 && m.live > 0
            }),
            "{kind:?}: no handler registered mid-stream (replay and live changes)"
        );
        inf.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn update_with_unchanged_resource_version_only_reaches_handlers_due_a_resync() {
    let inf = informer(QueueKind::Real);
    let (plain_log, plain) = recorder();
    let (resync_log, resyncing) = recorder();
    inf.add_event_handler_with(plain, HandlerOptions::new().name("plain")).unwrap();
    inf.add_event_handler_with(
        resyncing,
        HandlerOptions::new().name("resyncing").resync_period(Duration::from_secs(30)),
    )
    .unwrap();
    inf.start().unwrap();
    inf.queue().replace(vec![obj("a", 1)], "1").unwrap();
    assert!(inf.wait_for_sync(Duration::from_secs(5)).await);
    eventually("initial adds", || len(&plain_log) == 1 && len(&resync_log) == 1).await;

    // The same version again: a resync, and no handler is due one yet.
    inf.queue().update(obj("a", 1)).unwrap();
    // A real change: everyone.
    inf.queue().update(obj("a", 2)).unwrap();
    inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
    eventually("real update", || len(&plain_log) == 2 && len(&resync_log) == 2).await;
    assert_eq!(plain_log.lock().unwrap()[1], Seen::Update("a".into(), "1".into(), "2".into()));

    // The resync period elapses: only the resyncing handler gets the object again.
    tokio::time::sleep(Duration::from_secs(31)).await;
    eventually("resync update", || len(&resync_log) == 3).await;
    assert_eq!(resync_log.lock().unwrap()[2], Seen::Update("a".into(), "2".into(), "2".into()));
    assert_eq!(len(&plain_log), 2);
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn resync_reaches_only_handlers_whose_period_elapsed() {
    let inf = informer(QueueKind::Delta);
    let (l10, h10) = recorder();
    let (l25, h25) = recorder();
    let (lnone, hnone) = recorder();
    inf.add_event_handler_with(h10, HandlerOptions::new().resync_period(Duration::from_secs(10)))
        .unwrap();
    inf.add_event_handler_with(h25, HandlerOptions::new().resync_period(Duration::from_secs(25)))
        .unwrap();
    inf.add_event_handler(hnone).unwrap();
    inf.start().unwrap();
    inf.queue().replace(vec![obj("a", 1), obj("b", 1)], "1").unwrap();
    assert!(inf.wait_for_sync(Duration::from_secs(1)).await);
    eventually("initial adds", || len(&l10) == 2 && len(&l25) == 2 && len(&lnone) == 2).await;

    let syncs = |l: &Log| {
        l.lock().unwrap().iter().filter(|s| matches!(s, Seen::Update(_, a, b) if a == b)).count()
    };
    tokio::time::sleep(Duration::from_secs(10)).await;
    eventually("first resync of h10", || syncs(&l10) == 2).await;
    assert_eq!((syncs(&l25), syncs(&lnone)), (0, 0));
    tokio::time::sleep(Duration::from_secs(16)).await; // t = 26 s
    eventually("h10 twice, h25 once", || syncs(&l10) == 4 && syncs(&l25) == 2).await;
    assert_eq!(syncs(&lnone), 0);
    inf.shutdown().await;
}

#[tokio::test]
async fn handler_has_synced_only_after_handling_its_initial_notifications() {
    let inf = informer(QueueKind::Real);
    let gate = Arc::new(std::sync::Barrier::new(2));
    let g = gate.clone();
    let mut first = true;
    let reg = inf
        .add_event_handler(move |_: &Notification<Obj>| {
            if std::mem::take(&mut first) {
                g.wait();
            }
        })
        .unwrap();
    inf.start().unwrap();
    inf.queue().replace(vec![obj("a", 1), obj("b", 2)], "2").unwrap();
    assert!(inf.wait_for_sync(Duration::from_secs(5)).await);
    assert!(!reg.has_synced(), "the handler is still in its first notification");
    gate.wait();
    assert!(reg.wait_synced(Duration::from_secs(5)).await);

    // A late handler is synced once it has handled its replay.
    let (log, h) = recorder();
    let late = inf.add_event_handler(h).unwrap();
    assert!(late.wait_synced(Duration::from_secs(5)).await);
    let mut got = log.lock().unwrap().clone();
    got.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    assert_eq!(
        got,
        vec![Seen::Add("a".into(), "1".into(), true), Seen::Add("b".into(), "2".into(), true)]
    );
    inf.shutdown().await;
}

#[tokio::test]
async fn removed_handler_receives_nothing_more() {
    let inf = informer(QueueKind::Real);
    let (log, h) = recorder();
    let reg = inf.add_event_handler(h).unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("a", 1)).unwrap();
    inf.wait_for("1", Duration::from_secs(5)).await.unwrap();
    eventually("first add", || len(&log) == 1).await;
    inf.remove_event_handler(&reg).unwrap();
    assert_eq!(inf.handler_count(), 0);
    assert!(inf.remove_event_handler(&reg).is_err(), "removing twice is an error");
    inf.queue().add(obj("b", 2)).unwrap();
    inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(len(&log), 1);
    inf.shutdown().await;
}

#[tokio::test]
async fn handler_names_are_unique_and_a_panicking_handler_keeps_going() {
    let inf = informer(QueueKind::Real);
    inf.add_event_handler_with(|_: &Notification<Obj>| {}, HandlerOptions::new().name("x"))
        .unwrap();
    assert!(
        inf.add_event_handler_with(|_: &Notification<Obj>| {}, HandlerOptions::new().name("x"))
            .is_err()
    );
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let reg = inf
        .add_event_handler(move |n: &Notification<Obj>| {
            s.fetch_add(1, Ordering::SeqCst);
            if let Notification::Add { obj, .. } = n {
                assert_ne!(obj.name, "boom", "handler bug");
            }
        })
        .unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("boom", 1)).unwrap();
    inf.queue().add(obj("fine", 2)).unwrap();
    inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
    eventually("both handled", || seen.load(Ordering::SeqCst) == 2).await;
    assert_eq!(reg.panics(), 1);
    inf.shutdown().await;
}

#[tokio::test]
async fn factory_shares_one_informer_per_resource_with_a_typed_lister() {
    let registry = Arc::new(Mutex::new(prometheus_client::registry::Registry::default()));
    let factory = InformerFactory::new().with_registry(registry.clone());
    let build = || Informer::builder(access()).name("pods").build();
    let a = factory.informer("pods", build).unwrap();
    let b = factory
        .informer("pods", || -> snapinformer_core::informer::Result<Informer<Obj>> {
            panic!("built twice")
        })
        .unwrap();
    let other = factory.informer::<String, snapinformer_store::Chunked>("pods", || unreachable!());
    assert!(matches!(other, Err(snapinformer_core::factory::Error::TypeMismatch { .. })));
    assert!(factory.get::<Obj, snapinformer_store::Chunked>("pods").is_some());

    factory.start().unwrap();
    a.queue()
        .replace(
            vec![labeled("web-1", 1, &[("app", "web")]), labeled("db-1", 2, &[("app", "db")])],
            "2",
        )
        .unwrap();
    let synced = factory.wait_for_cache_sync(Duration::from_secs(5)).await;
    assert_eq!(synced.get("pods"), Some(&true));

    // `b` is the same informer: it sees what was fed through `a`.
    let lister = b.lister();
    assert_eq!(lister.list().len(), 2);
    assert_eq!(lister.get(&key("web-1")).unwrap().rv, "1");
    assert_eq!(lister.list_by_labels(&[("app", "db")]).len(), 1);
    let ns = lister.namespace("default");
    assert_eq!(ns.list().len(), 2);
    assert_eq!(ns.get("db-1").unwrap().rv, "2");
    assert_eq!(ns.list_by_labels(&[("app", "web")]).len(), 1);
    assert!(lister.namespace("other").list().is_empty());

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry.lock().unwrap()).unwrap();
    for metric in [
        "snapinformer_queue_depth{informer=\"pods\"} 0",
        "snapinformer_lag_deltas{informer=\"pods\"} 0",
        "snapinformer_lag_seconds{informer=\"pods\"}",
        "snapinformer_publications_total{informer=\"pods\"} 1",
        "snapinformer_batch_size_bucket",
        "snapinformer_batch_duration_seconds_bucket",
        "snapinformer_published_resource_version{informer=\"pods\"} 2",
        "snapinformer_queue_producer_blocked_total",
        "snapinformer_staleness_seconds_count{informer=\"pods\"} 2",
    ] {
        assert!(text.contains(metric), "missing {metric} in:\n{text}");
    }
    factory.shutdown().await;
    assert!(factory.start().is_err());
}

#[tokio::test]
async fn handler_buffer_depth_is_exported_per_handler() {
    let inf = informer(QueueKind::Real);
    let mut registry = prometheus_client::registry::Registry::default();
    inf.register_metrics(&mut registry);
    inf.add_event_handler_with(|_: &Notification<Obj>| {}, HandlerOptions::new().name("ctl"))
        .unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("a", 1)).unwrap();
    inf.wait_for("1", Duration::from_secs(5)).await.unwrap();
    let text = snapinformer_core::metrics::encode_text(&registry).unwrap();
    assert!(
        text.contains("snapinformer_handler_buffer_depth{informer=\"test\",handler=\"ctl\"}"),
        "{text}"
    );
    assert!(
        text.contains(
            "snapinformer_handler_notifications_total{informer=\"test\",handler=\"ctl\"} 1"
        ),
        "{text}"
    );
    inf.shutdown().await;
}

#[tokio::test]
async fn indexes_of_the_store_are_queryable_through_snapshots() {
    let store = StoreBuilder::new(access()).index("app", IndexFn::label(access(), "app"));
    let inf = snapinformer_core::InformerBuilder::with_store(store).build().unwrap();
    inf.start().unwrap();
    inf.queue().add(labeled("w1", 1, &[("app", "web")])).unwrap();
    inf.queue().add(labeled("w2", 2, &[("app", "web")])).unwrap();
    let snap = inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
    assert_eq!(snap.by_index("app", "web").unwrap().len(), 2);
    inf.add_indexers(
        snapinformer_store::Indexers::new().with("app2", IndexFn::label(access(), "app")),
    )
    .unwrap();
    assert_eq!(inf.lister().by_index("app2", "web").unwrap().len(), 2);
    assert!(inf.start().is_err(), "starting twice is an error");
    inf.shutdown().await;
    assert!(inf.queue().add(obj("late", 3)).is_err(), "a stopped informer's queue is closed");
}

#[tokio::test]
async fn delete_notification_for_a_tombstone_carries_the_last_known_object() {
    let inf = informer(QueueKind::Delta);
    let got: Arc<Mutex<Option<DeltaObject<Obj>>>> = Arc::default();
    let g = got.clone();
    inf.add_event_handler(move |n: &Notification<Obj>| {
        if let Notification::Delete { obj } = n {
            *g.lock().unwrap() = Some(obj.clone());
        }
    })
    .unwrap();
    inf.start().unwrap();
    inf.queue().replace(vec![obj("a", 7)], "7").unwrap();
    inf.wait_for("7", Duration::from_secs(5)).await.unwrap();
    inf.queue().replace(vec![], "8").unwrap();
    inf.wait_for("8", Duration::from_secs(5)).await.unwrap();
    eventually("delete seen", || got.lock().unwrap().is_some()).await;
    match got.lock().unwrap().take().unwrap() {
        DeltaObject::Tombstone(t) => {
            assert_eq!(&*t.key, key("a"));
            assert_eq!(t.obj.unwrap().rv, "7");
        }
        other => panic!("expected a tombstone, got {other:?}"),
    }
    inf.shutdown().await;
}

/// Collects the fields of every tracing event into a string per event.
struct Capture(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut f = Fields(String::new());
        event.record(&mut f);
        self.0.lock().unwrap().push(f.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn slow_batch_emits_a_trace_naming_batch_size_queue_depth_and_time() {
    let events: Arc<Mutex<Vec<String>>> = Arc::default();
    let _guard = tracing::subscriber::set_default(Capture(events.clone()));
    let inf = Informer::<Obj>::builder(access())
        .name("traced")
        .slow_batch_threshold(Duration::ZERO)
        .build()
        .unwrap();
    for i in 1..=3 {
        inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
    }
    inf.start().unwrap();
    inf.wait_for("3", Duration::from_secs(5)).await.unwrap();
    inf.shutdown().await;
    let events = events.lock().unwrap();
    let slow = events
        .iter()
        .find(|e| e.contains("slow informer batch"))
        .unwrap_or_else(|| panic!("no slow-batch event in {events:?}"));
    for field in ["informer=traced", "batch_size=3", "queue_depth=0", "total_ms="] {
        assert!(slow.contains(field), "{field} missing in {slow}");
    }
}

#[tokio::test]
async fn dropping_the_last_informer_handle_stops_its_tasks_and_handlers() {
    struct DropFlag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let variants = [
        (true, Processing::Runtime),
        (false, Processing::Runtime),
        (true, Processing::DedicatedThread),
        (false, Processing::DedicatedThread),
    ];
    for (start, processing) in variants {
        let inf = Informer::<Obj>::builder(access()).processing(processing).build().unwrap();
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        inf.add_event_handler(move |_: &Notification<Obj>| {
            let _keep = &flag;
        })
        .unwrap();
        if start {
            inf.start().unwrap();
        }
        let queue = inf.queue().clone();
        let mut rx = inf.subscribe();
        let clone = inf.clone();
        drop(inf);
        assert!(!queue.is_closed(), "a clone is still alive");
        drop(clone);
        assert!(queue.is_closed());
        timeout(Duration::from_secs(5), rx.wait_for(|p| p.stopped)).await.unwrap().unwrap();
        eventually("handler thread ended", || dropped.load(Ordering::SeqCst)).await;
    }
}

#[tokio::test]
async fn handlers_cannot_be_added_after_shutdown() {
    let inf = informer(QueueKind::Real);
    inf.start().unwrap();
    inf.shutdown().await;
    let err = inf.add_event_handler(|_: &Notification<Obj>| {}).unwrap_err();
    assert!(matches!(err, snapinformer_core::informer::Error::Stopped(_)), "{err}");
    assert!(inf.start().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_producers_nor_readers_wait_while_a_batch_is_applied() {
    // An index function that is slow for one object makes applying its batch take 500 ms.
    let slow_index = IndexFn::new(|o: &Obj| {
        if o.name == "slow" {
            std::thread::sleep(Duration::from_millis(500));
        }
        smallvec_of(&o.name)
    });
    let store = StoreBuilder::new(access()).index("name", slow_index);
    let inf = snapinformer_core::InformerBuilder::with_store(store).build().unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("slow", 1)).unwrap();
    eventually("the slow batch is in flight", || inf.queue().stats().in_flight == 1).await;

    let start = std::time::Instant::now();
    for i in 2..=1001 {
        inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
        let snap = inf.snapshot();
        assert!(snap.len() <= 1001);
    }
    let elapsed = start.elapsed();
    assert!(inf.queue().stats().in_flight == 1, "the slow batch should still be applying");
    assert!(elapsed < Duration::from_millis(150), "1000 adds and reads took {elapsed:?}");
    inf.wait_for("1001", Duration::from_secs(5)).await.unwrap();
    inf.shutdown().await;
}

fn smallvec_of(s: &str) -> snapinformer_store::IndexValues<'_> {
    std::iter::once(std::borrow::Cow::Borrowed(s)).collect()
}

#[tokio::test]
async fn a_backlog_is_applied_in_batches_of_max_batch_deltas() {
    for kind in [QueueKind::Real, QueueKind::Delta] {
        let hooked = Arc::new(AtomicUsize::new(0));
        let h = hooked.clone();
        let inf = Informer::<Obj>::builder(access())
            .queue(kind)
            .max_batch(1000)
            .on_publish(move |p| {
                assert!(p.deltas.iter().all(|d| d.enqueued_at <= p.published_at));
                h.fetch_add(p.deltas.len(), Ordering::SeqCst);
            })
            .build()
            .unwrap();
        for i in 1..=20_000 {
            inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
        }
        let start = std::time::Instant::now();
        inf.start().unwrap();
        let snap = inf.wait_for("20000", Duration::from_secs(20)).await.unwrap();
        let elapsed = start.elapsed();
        assert_eq!(snap.len(), 20_000);
        assert_eq!(snap.publication(), 20, "{kind:?}: 20 batches of 1000, one publication each");
        assert_eq!(inf.metrics().deltas_applied.get(), 20_000);
        assert_eq!(hooked.load(Ordering::SeqCst), 20_000, "the publish hook saw every delta");
        eprintln!("{kind:?}: 20k deltas applied in {elapsed:?} (debug build)");
        inf.shutdown().await;
    }
}

#[test]
fn handler_threads_end_when_the_runtime_running_the_informer_is_dropped() {
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    struct DropFlag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = DropFlag(dropped.clone());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let inf = rt.block_on(async {
        let inf = informer(QueueKind::Real);
        inf.add_event_handler(move |_: &Notification<Obj>| {
            let _keep = &flag;
        })
        .unwrap();
        inf.start().unwrap();
        inf.queue().add(obj("a", 1)).unwrap();
        inf.wait_for("1", Duration::from_secs(5)).await.unwrap();
        inf
    });
    // The processing loop dies with its runtime, without winding down.
    drop(rt);
    drop(inf);
    let start = std::time::Instant::now();
    while !dropped.load(Ordering::SeqCst) {
        assert!(start.elapsed() < Duration::from_secs(5), "handler thread still running");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[tokio::test]
async fn empty_initial_list_without_a_version_syncs_the_informer_and_its_handlers() {
    for kind in [QueueKind::Real, QueueKind::Delta] {
        let inf = informer(kind);
        let (log, h) = recorder();
        let reg = inf.add_event_handler(h).unwrap();
        inf.start().unwrap();
        inf.queue().replace(Vec::new(), "").unwrap();
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await, "{kind:?}: informer synced");
        eventually("handler synced", || reg.has_synced()).await;
        assert_eq!(len(&log), 0);
        assert!(inf.snapshot().is_empty());
        inf.shutdown().await;
    }
}

#[tokio::test]
async fn filtering_handler_turns_entering_and_leaving_the_filter_into_adds_and_deletes() {
    use snapinformer_core::FilteringHandler;
    let inf = informer(QueueKind::Real);
    let (log, h) = recorder();
    let web = |o: &Obj| o.labels.get("app").is_some_and(|v| v == "web");
    let reg = inf.add_event_handler(FilteringHandler::new(web, h)).unwrap();
    inf.start().unwrap();
    let q = inf.queue();
    q.replace(vec![labeled("a", 1, &[("app", "web")]), labeled("b", 2, &[("app", "db")])], "2")
        .unwrap();
    q.update(labeled("a", 3, &[("app", "web")])).unwrap(); // stays in: update
    q.update(labeled("b", 4, &[("app", "web")])).unwrap(); // enters: add
    q.update(labeled("a", 5, &[("app", "db")])).unwrap(); // leaves: delete of the old state
    q.update(labeled("a", 6, &[("app", "db")])).unwrap(); // stays out: nothing
    q.delete(labeled("b", 7, &[("app", "web")])).unwrap(); // accepted delete
    q.delete(labeled("a", 8, &[("app", "db")])).unwrap(); // filtered delete
    inf.wait_for("8", Duration::from_secs(5)).await.unwrap();
    eventually("all handled", || reg.handled() == 8).await;
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            Seen::Add("a".into(), "1".into(), true),
            Seen::Update("a".into(), "1".into(), "3".into()),
            Seen::Add("b".into(), "4".into(), false),
            Seen::Delete("a".into(), false),
            Seen::Delete("b".into(), false),
        ]
    );
    // A tombstone is filtered on its last known state; without one it is passed on.
    let (log, h) = recorder();
    let mut filtered = FilteringHandler::new(web, h);
    use snapinformer_core::{DeletedFinalStateUnknown, EventHandler};
    let tomb = |obj: Option<Arc<Obj>>| {
        DeltaObject::Tombstone(DeletedFinalStateUnknown { key: "default/x".into(), obj })
    };
    filtered.on_delete(&tomb(Some(labeled("x", 9, &[("app", "db")]))));
    filtered.on_delete(&tomb(Some(labeled("x", 9, &[("app", "web")]))));
    filtered.on_delete(&tomb(None));
    assert_eq!(
        *log.lock().unwrap(),
        vec![Seen::Delete("x".into(), true), Seen::Delete(String::new(), true)]
    );
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn informer_default_resync_period_applies_to_handlers_that_ask_for_none() {
    let inf = Informer::<Obj>::builder(access())
        .name("test")
        .resync_period(Duration::from_secs(10))
        .build()
        .unwrap();
    let (default_log, default) = recorder();
    let (never_log, never) = recorder();
    let d = inf.add_event_handler(default).unwrap();
    let n = inf
        .add_event_handler_with(never, HandlerOptions::new().resync_period(Duration::ZERO))
        .unwrap();
    assert_eq!(inf.handler_resync_period(&d).unwrap(), Duration::from_secs(10));
    assert_eq!(inf.handler_resync_period(&n).unwrap(), Duration::ZERO);
    inf.start().unwrap();
    inf.queue().replace(vec![obj("a", 1)], "1").unwrap();
    eventually("initial adds", || len(&default_log) == 1 && len(&never_log) == 1).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    eventually("default handler resynced", || len(&default_log) == 2).await;
    assert_eq!(default_log.lock().unwrap()[1], Seen::Update("a".into(), "1".into(), "1".into()));
    assert_eq!(len(&never_log), 1);
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn resync_window_closes_once_its_deltas_are_delivered() {
    // A handler receives updates that keep the resource version only from the resync it is due
    // for: a relist long after that resync does not re-send unchanged objects to it.
    let inf = informer(QueueKind::Real);
    let (log, h) = recorder();
    let reg = inf
        .add_event_handler_with(h, HandlerOptions::new().resync_period(Duration::from_secs(60)))
        .unwrap();
    inf.start().unwrap();
    inf.queue().replace(vec![obj("a", 1)], "1").unwrap();
    eventually("initial add", || len(&log) == 1).await;
    tokio::time::advance(Duration::from_secs(60)).await;
    eventually("resync", || len(&log) == 2).await;
    eventually("resync handled", || reg.handled() == 2).await;
    // A relist 10 s later with the object unchanged: no notification for it.
    tokio::time::advance(Duration::from_secs(10)).await;
    inf.queue().replace(vec![obj("a", 1), obj("b", 2)], "2").unwrap();
    inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
    eventually("b added", || len(&log) == 3).await;
    eventually("idle", || reg.handled() == 3).await;
    assert_eq!(log.lock().unwrap()[2], Seen::Add("b".into(), "2".into(), false));
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn handler_wait_synced_is_woken_not_polled() {
    // A polling wait sleeps on the (paused) clock between checks, so it only notices the sync
    // once time has advanced; a woken wait returns with the clock where it was.
    let inf = informer(QueueKind::Real);
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(Some(release_rx));
    let reg = inf
        .add_event_handler(move |_: &Notification<Obj>| {
            if let Some(rx) = gate.lock().unwrap().take() {
                rx.recv().unwrap();
            }
        })
        .unwrap();
    inf.start().unwrap();
    inf.queue().replace(vec![obj("a", 1)], "1").unwrap();
    assert!(inf.wait_for_sync(Duration::from_secs(5)).await);
    let start = tokio::time::Instant::now();
    let r = reg.clone();
    let waiter = tokio::spawn(async move { r.wait_synced(Duration::from_secs(3600)).await });
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished() && !reg.has_synced());
    release_tx.send(()).unwrap();
    // Block the runtime (no time passes) until the handler thread has synced.
    let real = std::time::Instant::now();
    while !reg.has_synced() {
        assert!(real.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(waiter.await.unwrap());
    assert_eq!(tokio::time::Instant::now(), start, "the wait woke without the clock moving");
    inf.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn factory_wait_for_cache_sync_is_woken_not_polled() {
    let factory = InformerFactory::new();
    let inf =
        factory.informer("pods", || Informer::builder(access()).name("pods").build()).unwrap();
    factory.start().unwrap();
    let start = tokio::time::Instant::now();
    let wait = factory.wait_for_cache_sync(Duration::from_secs(3600));
    tokio::pin!(wait);
    assert!(futures_poll_once(wait.as_mut()).await.is_none(), "not synced yet");
    inf.queue().replace(vec![obj("a", 1)], "1").unwrap();
    let synced = wait.await;
    assert_eq!(synced.get("pods"), Some(&true));
    assert_eq!(tokio::time::Instant::now(), start, "the wait woke without the clock moving");
    factory.shutdown().await;
}

/// Polls `fut` once.
async fn futures_poll_once<F: std::future::Future + Unpin>(fut: F) -> Option<F::Output> {
    let mut fut = fut;
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test]
async fn a_dedicated_processing_thread_runs_the_loop_on_a_named_thread_of_its_own() {
    let threads: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let seen = threads.clone();
    let inf = Informer::<Obj>::builder(access())
        .name("pods")
        .processing(Processing::DedicatedThread)
        .on_publish(move |_| {
            seen.lock().unwrap().push(std::thread::current().name().map(str::to_owned));
        })
        .build()
        .unwrap();
    let (log, h) = recorder();
    inf.add_event_handler(h).unwrap();
    inf.start().unwrap();
    for i in 1..=50 {
        inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
    }
    let snap = inf.wait_for("50", Duration::from_secs(5)).await.unwrap();
    assert_eq!(snap.len(), 50);
    eventually("the handler got 50 adds", || len(&log) == 50).await;
    let threads = threads.lock().unwrap().clone();
    assert!(!threads.is_empty(), "the hook never ran");
    assert!(
        threads.iter().all(|t| t.as_deref() == Some("informer-pods")),
        "every batch runs on the informer's own thread, not {threads:?}"
    );
    inf.shutdown().await;
    assert!(inf.is_stopped());
}

/// On a single-threaded runtime whose thread is busy (a controller blocking in a sync call),
/// a processing loop that is a task of that runtime cannot run; one on its own thread can.
#[tokio::test(flavor = "current_thread")]
async fn a_dedicated_processing_thread_publishes_while_the_runtime_is_blocked() {
    for processing in [Processing::Runtime, Processing::DedicatedThread] {
        let inf = Informer::<Obj>::builder(access()).processing(processing).build().unwrap();
        inf.start().unwrap();
        // Let the runtime poll the loop once, so that it waits on the empty queue.
        tokio::task::yield_now().await;
        inf.queue().add(obj("a", 1)).unwrap();
        // Block the runtime's only thread without ever yielding to it.
        let start = std::time::Instant::now();
        while inf.snapshot().is_empty() && start.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let published = !inf.snapshot().is_empty();
        match processing {
            Processing::Runtime => {
                assert!(!published, "a task of the blocked runtime cannot have published")
            }
            Processing::DedicatedThread => {
                assert!(published, "its own thread published within 300 ms")
            }
        }
        timeout(Duration::from_secs(5), inf.shutdown()).await.expect("shutdown never ended");
        assert_eq!(inf.snapshot().len(), 1, "{processing:?}: shutdown drains the queue");
    }
}

#[tokio::test]
async fn a_panic_on_the_dedicated_processing_thread_stops_the_informer_and_its_waits() {
    let inf = Informer::<Obj>::builder(access())
        .processing(Processing::DedicatedThread)
        .on_publish(|p| {
            if p.resource_version == Some("2") {
                panic!("publish hook fails on purpose");
            }
        })
        .build()
        .unwrap();
    let (log, h) = recorder();
    inf.add_event_handler(h).unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("a", 1)).unwrap();
    inf.wait_for("1", Duration::from_secs(5)).await.unwrap();
    inf.queue().add(obj("b", 2)).unwrap();
    // The second batch's hook panics: the thread unwinds, the informer winds down at shutdown.
    let waiting = inf.wait_for("3", Duration::from_secs(5));
    timeout(Duration::from_secs(5), inf.shutdown()).await.expect("shutdown never ended");
    assert!(inf.is_stopped());
    let err = waiting.await.unwrap_err();
    assert!(
        matches!(err, snapinformer_core::freshness::Error::Stopped),
        "a wait in progress fails as stopped, not {err}"
    );
    eventually("the handler got the first add", || len(&log) >= 1).await;
}

#[tokio::test]
async fn names_with_a_nul_byte_still_get_their_processing_and_handler_threads() {
    let inf = Informer::<Obj>::builder(access())
        .name("po\0ds")
        .processing(Processing::DedicatedThread)
        .build()
        .unwrap();
    let (log, h) = recorder();
    inf.add_event_handler_with(h, HandlerOptions::new().name("vis\0ible")).unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("a", 1)).unwrap();
    inf.wait_for("1", Duration::from_secs(5)).await.unwrap();
    eventually("the handler with a NUL in its name got the add", || len(&log) == 1).await;
    inf.shutdown().await;
}

/// The publications the informer made so far.
fn publications<T: Send + Sync + 'static>(inf: &Informer<T>) -> u64 {
    inf.snapshot().publication()
}

/// Builds and starts the informer, then publishes `p1` through it.
async fn started_with_p1(builder: snapinformer_core::InformerBuilder<Obj>) -> Informer<Obj> {
    let inf = builder.build().unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("p1", 1)).unwrap();
    inf.wait_for("1", Duration::from_secs(5)).await.unwrap();
    inf
}

/// A publish hook that holds the first publication: it sends that publication's number on the
/// returned receiver, then waits (at most 10 s, so that a test failing elsewhere does not hang
/// here) until the returned sender is used. Later publications pass through.
fn hold_first_publication() -> (
    impl Fn(&Published<'_, Obj>) + Send + Sync + 'static,
    std::sync::mpsc::Receiver<u64>,
    std::sync::mpsc::Sender<()>,
) {
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<u64>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(Some((entered_tx, release_rx)));
    let hook = move |p: &Published<'_, Obj>| {
        let taken = gate.lock().unwrap().take();
        if let Some((entered, release)) = taken {
            entered.send(p.publication).unwrap();
            let _ = release.recv_timeout(Duration::from_secs(10));
        }
    };
    (hook, entered_rx, release_tx)
}

/// Starts an informer with a 300 ms window on `processing` whose publish hook holds p1's
/// publication until p2..=p6 are queued, so that deltas are waiting when p1's batch ends: they
/// must come out together, in one publication, once the window that p1's batch opened ends.
async fn check_the_window_gathers_what_arrives_during_a_batch(processing: Processing) {
    let window = Duration::from_millis(300);
    let (hook, entered_rx, release_tx) = hold_first_publication();
    let inf = Informer::<Obj>::builder(access())
        .processing(processing)
        .batch_window(window)
        .on_publish(hook)
        .build()
        .unwrap();
    inf.start().unwrap();
    let began = std::time::Instant::now();
    inf.queue().add(obj("p1", 1)).unwrap();
    let first =
        tokio::task::spawn_blocking(move || entered_rx.recv_timeout(Duration::from_secs(10)))
            .await
            .unwrap()
            .expect("p1's publication reached the hook");
    for i in 2..=6 {
        inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
    }
    release_tx.send(()).unwrap();
    let snap = inf.wait_for("6", Duration::from_secs(10)).await.unwrap();
    assert_eq!(snap.len(), 6);
    assert_eq!(
        snap.publication(),
        first + 1,
        "{processing:?}: the five came out in one publication"
    );
    assert_eq!(inf.metrics().batch_window_waits.get(), 1, "{processing:?}: one wait, counted");
    let waited = began.elapsed();
    assert!(
        waited >= window,
        "{processing:?}: held back until the window p1's batch opened ended, not {waited:?}"
    );
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_window_gathers_deltas_that_arrive_while_a_batch_is_applied() {
    check_the_window_gathers_what_arrives_during_a_batch(Processing::Runtime).await;
}

#[tokio::test]
async fn batch_window_does_not_hold_back_a_stream_the_loop_keeps_up_with() {
    // Real time, with a window long enough that "at once" and "at the window's end" cannot be
    // told apart only on a machine that stalls this test for seconds. Each delta comes 50 ms
    // after the one before it was published: nothing is queued when a batch ends, so no window
    // opens (before 2026-12-04 every delta here waited out the window p1's batch opened).
    let window = Duration::from_secs(5);
    for processing in [Processing::Runtime, Processing::DedicatedThread] {
        let builder =
            Informer::<Obj>::builder(access()).processing(processing).batch_window(window);
        let inf = started_with_p1(builder).await;
        for i in 2..=4 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let before = std::time::Instant::now();
            inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
            inf.wait_for(&i.to_string(), Duration::from_secs(20)).await.unwrap();
            let took = before.elapsed();
            assert!(took < window / 2, "{processing:?}: p{i} was held back {took:?}");
        }
        assert_eq!(inf.metrics().batch_window_waits.get(), 0, "{processing:?}: never waited");
        inf.shutdown().await;
    }
}

#[tokio::test]
async fn batch_window_publishes_a_delta_after_a_quiet_period_at_once() {
    // Real time, with a window long enough that "at once" and "at the window's end" cannot be
    // told apart only on a machine that stalls this test for seconds.
    let window = Duration::from_secs(3);
    let inf = started_with_p1(Informer::<Obj>::builder(access()).batch_window(window)).await;
    tokio::time::sleep(window + Duration::from_millis(200)).await;
    let before = std::time::Instant::now();
    inf.queue().add(obj("p2", 2)).unwrap();
    inf.wait_for("2", Duration::from_secs(10)).await.unwrap();
    let took = before.elapsed();
    assert!(took < window / 2, "no window was open: published at once, not after {took:?}");
    inf.shutdown().await;
}

#[tokio::test]
async fn batch_window_never_holds_back_full_batches() {
    for kind in [QueueKind::Real, QueueKind::Delta] {
        let inf = Informer::<Obj>::builder(access())
            .queue(kind)
            .max_batch(100)
            .batch_window(Duration::from_secs(30))
            .build()
            .unwrap();
        for i in 1..=1000 {
            inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
        }
        inf.start().unwrap();
        // Any wait would take 30 s, longer than this deadline.
        let snap = inf.wait_for("1000", Duration::from_secs(20)).await.unwrap();
        assert_eq!(snap.publication(), 10, "{kind:?}: ten full batches");
        assert_eq!(inf.metrics().batch_window_waits.get(), 0, "{kind:?}: never waited");
        inf.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_paused_clock_turns_the_batch_window_off() {
    // A window this long would outlast every timeout below, paused or not.
    let builder = Informer::<Obj>::builder(access()).batch_window(Duration::from_secs(3600));
    let inf = started_with_p1(builder).await;
    let first = publications(&inf);
    let began = tokio::time::Instant::now();
    for i in 2..=6 {
        inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
        let snap = inf.wait_for(&i.to_string(), Duration::from_secs(5)).await.unwrap();
        assert_eq!(snap.len(), i as usize);
    }
    assert_eq!(publications(&inf), first + 5, "one publication per add: no window gathered them");
    assert_eq!(inf.metrics().batch_window_waits.get(), 0, "never waited");
    assert_eq!(began.elapsed(), Duration::ZERO, "the paused clock never had to advance");
    inf.shutdown().await;
}

#[test]
fn the_default_batch_window_needs_no_time_driver() {
    // A runtime without `enable_time`: a window on Tokio's timer would panic in the loop. The
    // hook holds p1's publication until p2..p6 are queued, so that deltas arrive during a
    // batch and the default window is waited out for certain (before 2026-12-04 the test
    // sent bursts and relied on the loop falling behind them, which a loaded machine did not
    // always let happen).
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
    let (hook, entered_rx, release_tx) = hold_first_publication();
    let inf = rt.block_on(async {
        let inf = Informer::<Obj>::builder(access()).on_publish(hook).build().unwrap();
        inf.start().unwrap();
        inf
    });
    inf.queue().add(obj("p1", 1)).unwrap();
    entered_rx.recv_timeout(Duration::from_secs(10)).expect("p1's publication reached the hook");
    for i in 2..=6 {
        inf.queue().add(obj(&format!("p{i}"), i)).unwrap();
    }
    release_tx.send(()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while inf.snapshot().len() < 6 {
        assert!(std::time::Instant::now() < deadline, "the loop stopped publishing");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(inf.is_started() && !inf.is_stopped(), "the loop is alive");
    assert_eq!(inf.metrics().batch_window_waits.get(), 1, "the window was waited out once");
    rt.block_on(inf.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_window_works_on_a_dedicated_processing_thread() {
    // The thread's runtime is its own, on the real clock: the window must have a timer there.
    check_the_window_gathers_what_arrives_during_a_batch(Processing::DedicatedThread).await;
}

/// An object that records the name of the thread that frees it.
#[derive(Debug)]
struct Traced {
    name: String,
    rv: String,
    freed_on: Arc<Mutex<Vec<(String, String)>>>,
}

impl snapinformer_store::Object for Traced {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        Some("default")
    }
    fn resource_version(&self) -> Option<&str> {
        Some(&self.rv)
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        let thread = std::thread::current().name().unwrap_or("").to_owned();
        self.freed_on.lock().unwrap().push((self.rv.clone(), thread));
    }
}

#[tokio::test]
async fn handled_notifications_reach_the_reclaimer_soon_after_the_stream_stops() {
    // A handler thread hands what it handled to the reclaimer in batches and whenever its
    // buffer runs empty: with nothing more to handle it must let go while the informer runs,
    // not at its next full batch or at shutdown.
    let freed_on: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let traced = |rv: u64| {
        Arc::new(Traced { name: "a".into(), rv: rv.to_string(), freed_on: freed_on.clone() })
    };
    let store = StoreBuilder::new(snapinformer_store::ObjectAccess::<Traced>::of());
    let inf = InformerBuilder::with_store(store).name("linger").build().unwrap();
    let quick = inf
        .add_event_handler_with(|_: &Notification<Traced>| {}, HandlerOptions::new().name("quick"))
        .unwrap();
    inf.start().unwrap();
    inf.queue().update(traced(1)).unwrap();
    inf.wait_for("1", Duration::from_secs(5)).await.unwrap();
    inf.queue().update(traced(2)).unwrap();
    inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
    eventually("2 notifications handled", || quick.handled() == 2).await;
    // Version 1 is held by the store's superseded version (dropped by its reclaimer) and by
    // the handler's two notifications; all three must let go while the informer runs on.
    eventually("version 1 freed while the informer runs", || {
        freed_on.lock().unwrap().iter().any(|(rv, _)| rv == "1")
    })
    .await;
    let freed = freed_on.lock().unwrap().clone();
    assert!(freed.iter().all(|(rv, _)| rv == "1"), "only version 1 is superseded: {freed:?}");
    inf.shutdown().await;
}

#[tokio::test]
async fn handler_threads_leave_freeing_superseded_objects_to_a_reclaimer() {
    for background in [true, false] {
        let freed_on: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let traced = |rv: u64| {
            Arc::new(Traced { name: "a".into(), rv: rv.to_string(), freed_on: freed_on.clone() })
        };
        let store = StoreBuilder::new(snapinformer_store::ObjectAccess::<Traced>::of())
            .background_reclaim(background);
        let inf = InformerBuilder::with_store(store).name("traced").build().unwrap();
        // The handler holds each notification a while, so that the store has let the old
        // state go before the handler's thread is done with it: its reference is the last.
        let handled = Arc::new(AtomicUsize::new(0));
        let h = handled.clone();
        inf.add_event_handler_with(
            move |_: &Notification<Traced>| {
                std::thread::sleep(Duration::from_millis(20));
                h.fetch_add(1, Ordering::SeqCst);
            },
            HandlerOptions::new().name("slow"),
        )
        .unwrap();
        inf.start().unwrap();
        for rv in 1..=20 {
            inf.queue().update(traced(rv)).unwrap();
        }
        inf.wait_for("20", Duration::from_secs(5)).await.unwrap();
        eventually("20 notifications handled", || handled.load(Ordering::SeqCst) == 20).await;
        inf.shutdown().await;
        drop(inf);
        let freed = freed_on.lock().unwrap().clone();
        let on_handler: Vec<_> =
            freed.iter().filter(|(_, thread)| thread.starts_with("handler-")).collect();
        if background {
            // Versions 1 to 19 were superseded; whichever of the store and the handler let
            // each go last, no handler thread freed it.
            assert!(freed.len() >= 19, "{freed:?}");
            assert!(on_handler.is_empty(), "freed on a handler thread: {on_handler:?}");
            // Each was freed by one of the two reclaimers, whichever let it go last.
            let superseded: Vec<_> =
                freed.iter().filter(|(rv, _)| rv.parse::<u64>().unwrap() < 20).collect();
            assert_eq!(superseded.len(), 19, "{freed:?}");
            for (rv, thread) in superseded {
                assert!(
                    ["snapinformer-reclaim", "snapinformer-handler-reclaim"]
                        .contains(&thread.as_str()),
                    "version {rv} freed on {thread:?}"
                );
            }
        } else {
            // Without background reclamation nothing changes: the handler frees what it
            // holds last (so the test would see a regression of the case above).
            assert!(!on_handler.is_empty(), "{freed:?}");
        }
    }
}
