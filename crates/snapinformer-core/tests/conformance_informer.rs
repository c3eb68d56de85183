//! Conformance with client-go's controller and shared informer, case by case.
//!
//! Ported (in our words, on our API) from client-go v0.37.2, `tools/cache`:
//! - `controller_test.go`: every case, as the module of the same name (snake case) below, except
//!   `TestTransformingInformer` and `TestTransformingInformerRace`, which exercise the transform
//!   hook and live in `crates/snapinformer-kube/tests/conformance_reflector.rs` (the hook is
//!   the reflector's), and cases 2 to 4 of `TestProcessDeltasInBatch` (a store that refuses
//!   part of a batch), which cannot happen through the public API and are unit tests in
//!   `src/informer.rs` (`process_deltas_in_batch_*`).
//! - `shared_informer_test.go`: every case, except `TestSharedInformerErrorHandling` and
//!   `TestSharedInformerTransformer` (in `conformance_reflector.rs`: the watch error handler and
//!   the transform belong to the reflector) and `TestSharedInformerStartRace`, which is not
//!   applicable: it races `SetTransform`/`SetWatchErrorHandler` against `Run`, and here both are
//!   options of the builder, set before the informer exists, so the race cannot be written.
//!
//! No case of these two files was removed between v0.34.0 and v0.37.2 (the files were
//! diffed), so none comes from v0.34.
//!
//! client-go's tests run a reflector over a fake API source (`fcache.FakeControllerSource`).
//! Here the reflector is the Kubernetes layer's, so [`Source`] plays both: it keeps the objects
//! with a resource version counter, like the fake source, and feeds the informer's queue as the
//! reflector would (an event per change; `relist` is the reflector's relist after its watch
//! was reset). Handlers run on their own threads: waits for them use real time, never a sleep
//! that a paused clock could skip, and "nothing more arrives" is checked once every queued
//! delta is applied and every handler has handled everything it was given ([`settled`]).
//!
//! Where ours deliberately differs (removing an unknown handle is an error, a panicking
//! handler is contained), the test pins our behaviour and says what client-go does.

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use snapinformer_core::{
    DeletedFinalStateUnknown, DeltaObject, EventHandler, HandlerOptions, HandlerRegistration,
    Informer, Notification, QueueKind, informer::Error, metrics::HandlerLabels,
};
use snapinformer_store::{IndexFn, Indexers, Object, ObjectAccess};

// ----- objects ------------------------------------------------------------------------------

/// A pod as these tests need it: identity, version, labels.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pod {
    namespace: String,
    name: String,
    rv: String,
    labels: BTreeMap<String, String>,
}

impl Object for Pod {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        Some(self.namespace.as_str()).filter(|ns| !ns.is_empty())
    }
    fn resource_version(&self) -> Option<&str> {
        Some(self.rv.as_str()).filter(|rv| !rv.is_empty())
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        Some(&self.labels)
    }
}

/// A cluster-scoped pod named `name` without a version (the source stamps one).
fn pod(name: &str) -> Pod {
    Pod { namespace: String::new(), name: name.into(), rv: String::new(), labels: BTreeMap::new() }
}

fn in_ns(ns: &str, name: &str) -> Pod {
    Pod { namespace: ns.into(), ..pod(name) }
}

fn with_labels(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    p
}

fn with_rv(mut p: Pod, rv: u64) -> Pod {
    p.rv = rv.to_string();
    p
}

fn access() -> ObjectAccess<Pod> {
    ObjectAccess::of()
}

fn informer(name: &str) -> Informer<Pod> {
    Informer::builder(access()).name(name).build().unwrap()
}

fn informer_with_resync(name: &str, resync: Duration) -> Informer<Pod> {
    Informer::builder(access()).name(name).resync_period(resync).build().unwrap()
}

// ----- the fake API source ------------------------------------------------------------------

/// The API server's objects and resource version counter, feeding an informer's queue as a
/// reflector would (client-go's `FakeControllerSource` plus its reflector).
struct Source {
    informer: Informer<Pod>,
    state: Mutex<SourceState>,
}

#[derive(Default)]
struct SourceState {
    rv: u64,
    objects: BTreeMap<String, Arc<Pod>>,
}

impl Source {
    fn new(informer: &Informer<Pod>) -> Arc<Source> {
        Arc::new(Source { informer: informer.clone(), state: Mutex::default() })
    }

    fn key(p: &Pod) -> String {
        access().key(p).unwrap()
    }

    /// Stamps the next version on `p` and stores it (or removes it); returns the stamped pod.
    fn change(&self, mut p: Pod, delete: bool) -> Arc<Pod> {
        let mut st = self.state.lock().unwrap();
        st.rv += 1;
        p.rv = st.rv.to_string();
        let p = Arc::new(p);
        if delete {
            st.objects.remove(&Self::key(&p));
        } else {
            st.objects.insert(Self::key(&p), p.clone());
        }
        p
    }

    fn add(&self, p: Pod) {
        let p = self.change(p, false);
        self.informer.queue().add(p).unwrap();
    }

    fn modify(&self, p: Pod) {
        let p = self.change(p, false);
        self.informer.queue().update(p).unwrap();
    }

    fn delete(&self, p: Pod) {
        let p = self.change(p, true);
        self.informer.queue().delete(p).unwrap();
    }

    /// A change the watch does not deliver: only a relist sees it.
    fn add_drop_watch(&self, p: Pod) {
        self.change(p, false);
    }

    fn modify_drop_watch(&self, p: Pod) {
        self.change(p, false);
    }

    /// The reflector's (re)list: every object, at the current version.
    fn relist(&self) {
        let (items, rv) = {
            let st = self.state.lock().unwrap();
            (st.objects.values().cloned().collect::<Vec<_>>(), st.rv)
        };
        self.informer.queue().replace(items, &rv.to_string()).unwrap();
    }
}

/// Starts the informer and queues the first list (client-go's `informer.Run`).
fn run(informer: &Informer<Pod>, source: &Source) {
    informer.start().unwrap();
    source.relist();
}

// ----- handlers -----------------------------------------------------------------------------

/// What a handler saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Add { key: String, rv: String, initial: bool },
    Update { key: String, old_rv: String, rv: String },
    Delete { key: String, rv: String, tombstone: bool },
}

type Log = Arc<Mutex<Vec<Event>>>;

fn key_of(p: &Pod) -> String {
    access().key(p).unwrap()
}

/// A handler recording every notification.
fn recorder() -> (Log, impl FnMut(&Notification<Pod>) + Send + 'static) {
    let log = Log::default();
    let l = log.clone();
    let handler = move |n: &Notification<Pod>| {
        let event = match n {
            Notification::Add { obj, is_in_initial_list } => {
                Event::Add { key: key_of(obj), rv: obj.rv.clone(), initial: *is_in_initial_list }
            }
            Notification::Update { old, new } => {
                Event::Update { key: key_of(new), old_rv: old.rv.clone(), rv: new.rv.clone() }
            }
            Notification::Delete { obj } => match obj {
                DeltaObject::Object(o) => {
                    Event::Delete { key: key_of(o), rv: o.rv.clone(), tombstone: false }
                }
                DeltaObject::Tombstone(t) => Event::Delete {
                    key: t.key.to_string(),
                    rv: t.obj.as_ref().map(|o| o.rv.clone()).unwrap_or_default(),
                    tombstone: true,
                },
            },
        };
        l.lock().unwrap().push(event);
    };
    (log, handler)
}

/// client-go's `testListener`: the names of the objects added or updated (deletes ignored).
#[derive(Clone, Default)]
struct Names(Arc<Mutex<Vec<String>>>);

impl Names {
    fn handler(&self) -> impl FnMut(&Notification<Pod>) + Send + 'static {
        let names = self.0.clone();
        move |n: &Notification<Pod>| match n {
            Notification::Add { obj, .. } | Notification::Update { new: obj, .. } => {
                names.lock().unwrap().push(obj.name.clone())
            }
            Notification::Delete { .. } => {}
        }
    }
    fn set(&self) -> BTreeSet<String> {
        self.0.lock().unwrap().iter().cloned().collect()
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn reset(&self) {
        self.0.lock().unwrap().clear();
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

// ----- waiting ------------------------------------------------------------------------------

/// Waits in real time (yielding to the runtime, never advancing a paused clock) until `cond`
/// holds; fails after ten seconds.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting for: {what}");
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Notifications pushed to a handler so far.
fn pushed(informer: &Informer<Pod>, reg: &HandlerRegistration) -> u64 {
    let labels = HandlerLabels { handler: reg.name().to_owned() };
    informer.metrics().handler_notifications.get_or_create(&labels).get()
}

/// Waits until everything queued so far is applied and distributed and every handler in
/// `regs` has handled everything it was given: after this, nothing more arrives unless
/// something new is queued.
async fn settled(informer: &Informer<Pod>, regs: &[&HandlerRegistration]) {
    eventually("queue drained and every batch distributed", || {
        let stats = informer.queue().stats();
        stats.depth == 0 && stats.in_flight == 0
    })
    .await;
    eventually("handlers idle", || regs.iter().all(|r| r.handled() == pushed(informer, r))).await;
}

// ===== controller_test.go ==================================================================

/// client-go's `Example`: a controller that deletes everything it is told about, and reports
/// each deletion.
mod example {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_controller_deletes_everything_it_sees_and_reports_each_deletion() {
        let inf =
            Informer::builder(access()).name("example").queue(QueueKind::Real).build().unwrap();
        let source = Source::new(&inf);
        let (tx, rx) = mpsc::channel();
        let s = source.clone();
        inf.add_event_handler(move |n: &Notification<Pod>| match n {
            Notification::Add { obj, .. } => s.delete((**obj).clone()),
            Notification::Delete { obj } => {
                let key = match obj {
                    DeltaObject::Object(o) => key_of(o),
                    DeltaObject::Tombstone(t) => t.key.to_string(),
                };
                tx.send(key).unwrap();
            }
            Notification::Update { .. } => {}
        })
        .unwrap();
        run(&inf, &source);
        for name in ["a-hello", "b-controller", "c-framework"] {
            source.add(pod(name));
        }
        let mut deleted: Vec<String> =
            (0..3).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
        deleted.sort();
        assert_eq!(deleted, ["a-hello", "b-controller", "c-framework"]);
        inf.shutdown().await;
    }
}

/// client-go's `ExampleNewInformer`: the same with a delta FIFO behind the informer.
mod example_new_informer {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_informer_handler_deletes_everything_added_and_sees_the_deletions() {
        let inf =
            Informer::builder(access()).name("example").queue(QueueKind::Delta).build().unwrap();
        let source = Source::new(&inf);
        let (tx, rx) = mpsc::channel();
        let s = source.clone();
        inf.add_event_handler(move |n: &Notification<Pod>| match n {
            Notification::Add { obj, .. } => s.delete((**obj).clone()),
            Notification::Delete { obj } => {
                tx.send(obj.object().map(|o| key_of(o)).unwrap_or_default()).unwrap()
            }
            Notification::Update { .. } => {}
        })
        .unwrap();
        run(&inf, &source);
        for name in ["a-hello", "b-controller", "c-framework"] {
            source.add(pod(name));
        }
        let mut deleted: Vec<String> =
            (0..3).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
        deleted.sort();
        assert_eq!(deleted, ["a-hello", "b-controller", "c-framework"]);
        inf.shutdown().await;
    }
}

/// client-go's `TestHammerController`: concurrent producers, no lost or reordered change.
mod hammer_controller {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_adds_updates_and_deletes_end_in_the_sources_state() {
        let inf = informer_with_resync("hammer", Duration::from_millis(100));
        let source = Source::new(&inf);
        let (log, h) = recorder();
        let reg = inf.add_event_handler(h).unwrap();
        assert!(!inf.has_synced(), "not synced before it runs");
        run(&inf, &source);
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await, "synced after the first list");

        let threads: Vec<_> = (0..3u64)
            .map(|t| {
                let source = source.clone();
                std::thread::spawn(move || {
                    // A small deterministic generator per thread.
                    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ t;
                    let mut next = move |n: u64| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed % n
                    };
                    let mut names: Vec<String> = Vec::new();
                    for i in 0..100 {
                        if names.is_empty() || next(3) == 1 {
                            let name = format!("t{t}-p{i}");
                            names.push(name.clone());
                            source.add(in_ns("default", &name));
                            continue;
                        }
                        let idx = next(names.len() as u64) as usize;
                        if next(2) == 0 {
                            source.modify(in_ns("default", &names[idx]));
                        } else {
                            source.delete(in_ns("default", &names.swap_remove(idx)));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        settled(&inf, &[&reg]).await;
        // What the handler saw, replayed, is the source's state, and the store agrees.
        let mut view: BTreeMap<String, String> = BTreeMap::new();
        for e in log.lock().unwrap().iter() {
            match e {
                Event::Add { key, rv, .. } | Event::Update { key, rv, .. } => {
                    view.insert(key.clone(), rv.clone());
                }
                Event::Delete { key, .. } => {
                    view.remove(key);
                }
            }
        }
        let expected: BTreeMap<String, String> = source
            .state
            .lock()
            .unwrap()
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), v.rv.clone()))
            .collect();
        assert_eq!(view, expected);
        let store: BTreeMap<String, String> =
            inf.snapshot().iter().map(|p| (key_of(p), p.rv.clone())).collect();
        assert_eq!(store, expected);
        inf.shutdown().await;
    }
}

/// client-go's `TestUpdate`: every path to an update delivers only allowed transitions, and a
/// handler may write back to the source.
mod update {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn updates_carry_allowed_transitions_and_deletes_triggered_by_them_arrive() {
        let inf = informer("update");
        let source = Source::new(&inf);
        let check = |name: &str, value: &str, last: bool| {
            let mut labels = vec![("check", value)];
            if last {
                labels.push(("final", "true"));
            }
            with_labels(pod(name), &labels)
        };
        let bad = Arc::new(Mutex::new(Vec::new()));
        let deleted = Arc::new(AtomicUsize::new(0));
        let (s, b, d) = (source.clone(), bad.clone(), deleted.clone());
        inf.add_event_handler(move |n: &Notification<Pod>| match n {
            Notification::Update { old, new } => {
                let pair = (old.labels["check"].as_str(), new.labels["check"].as_str());
                if !matches!(pair, ("from", "to") | ("to", "to") | ("from", "from")) {
                    b.lock().unwrap().push(format!("{pair:?} for {}", new.name));
                }
                if new.labels.get("final").is_some_and(|v| v == "true") {
                    s.delete((**new).clone());
                }
            }
            Notification::Delete { .. } => {
                d.fetch_add(1, Ordering::SeqCst);
            }
            Notification::Add { .. } => {}
        })
        .unwrap();
        run(&inf, &source);
        let threads: Vec<_> = (0..3)
            .map(|i| {
                let source = source.clone();
                std::thread::spawn(move || {
                    let name = format!("a-{i}-0");
                    source.add(check(&name, "from", false));
                    source.modify(check(&name, "to", true));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        eventually("every object deleted after its final update", || {
            deleted.load(Ordering::SeqCst) == 3
        })
        .await;
        assert!(bad.lock().unwrap().is_empty(), "{:?}", bad.lock().unwrap());
        inf.shutdown().await;
    }
}

/// client-go's `TestPanicPropagated`. client-go lets a handler's panic escape `Run` (and, by
/// default, crash the process). Here a panic is contained in the handler's own thread: the
/// notification is skipped, counted and logged, and everything else goes on.
mod panic_propagated {
    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_is_contained_counted_and_the_informer_keeps_running() {
        let inf = informer("panics");
        let source = Source::new(&inf);
        let reg = inf
            .add_event_handler_with(
                |n: &Notification<Pod>| {
                    if matches!(n, Notification::Add { .. }) {
                        panic!("Just panic.");
                    }
                },
                HandlerOptions::new().panic_delay(Duration::ZERO),
            )
            .unwrap();
        let (log, other) = recorder();
        inf.add_event_handler(other).unwrap();
        run(&inf, &source);
        source.add(pod("test"));
        eventually("the panic was caught", || reg.panics() == 1).await;
        eventually("the other handler got the add", || log.lock().unwrap().len() == 1).await;
        assert!(!inf.is_stopped());
        source.add(pod("test2"));
        inf.wait_for("2", Duration::from_secs(10)).await.unwrap();
        eventually("the second add panicked too", || reg.panics() == 2).await;
        inf.shutdown().await;
    }
}

/// client-go's `TestDeletionHandlingObjectToName`: a tombstone names the object it stands for.
mod deletion_handling_object_to_name {
    use super::*;

    #[test]
    fn a_tombstone_names_its_object_by_its_key() {
        let cm = Arc::new(in_ns("testnamespace", "testname"));
        let key: Arc<str> = access().key(&cm).unwrap().into();
        let tombstone =
            DeltaObject::Tombstone(DeletedFinalStateUnknown { key: key.clone(), obj: Some(cm) });
        let DeltaObject::Tombstone(t) = &tombstone else { unreachable!() };
        assert_eq!(&*t.key, "testnamespace/testname");
        let name = tombstone.object().map(|o| (o.namespace.clone(), o.name.clone()));
        assert_eq!(name, Some(("testnamespace".into(), "testname".into())));
    }
}

/// client-go's `TestDeletedObjectGetObjectName` (the last case, an empty `DeletedObject`,
/// cannot be built here: a delete always carries an object or a tombstone).
mod deleted_object_get_object_name {
    use super::*;

    fn name_of(d: &DeltaObject<Pod>) -> Option<(String, String)> {
        match d {
            DeltaObject::Object(o) => Some((o.namespace.clone(), o.name.clone())),
            // The key is authoritative, with or without the last state.
            DeltaObject::Tombstone(t) => {
                let (ns, name) = t.key.split_once('/').unwrap_or(("", &t.key));
                Some((ns.to_owned(), name.to_owned()))
            }
        }
    }

    #[test]
    fn a_deleted_object_names_itself_whether_its_final_state_is_known_or_not() {
        let cm = Arc::new(in_ns("testnamespace", "testname"));
        let expected = Some(("testnamespace".to_owned(), "testname".to_owned()));
        assert_eq!(name_of(&DeltaObject::Object(cm.clone())), expected);
        let key: Arc<str> = "testnamespace/testname".into();
        let with_obj = DeletedFinalStateUnknown { key: key.clone(), obj: Some(cm) };
        assert_eq!(name_of(&DeltaObject::Tombstone(with_obj)), expected);
        let without = DeletedFinalStateUnknown { key, obj: None };
        let without = DeltaObject::Tombstone(without);
        assert_eq!(name_of(&without), expected);
        assert!(without.object().is_none() && without.is_tombstone());
    }
}

/// client-go's `TestDeletedObjectGetKey` (same remark about the empty case).
mod deleted_object_get_key {
    use super::*;

    fn key(d: &DeltaObject<Pod>) -> String {
        match d {
            DeltaObject::Object(o) => access().key(o).unwrap(),
            DeltaObject::Tombstone(t) => t.key.to_string(),
        }
    }

    #[test]
    fn a_deleted_object_has_its_key_whether_its_final_state_is_known_or_not() {
        let cm = Arc::new(in_ns("testnamespace", "testname"));
        let expected = "testnamespace/testname";
        assert_eq!(key(&DeltaObject::Object(cm.clone())), expected);
        let k: Arc<str> = expected.into();
        let t = DeletedFinalStateUnknown { key: k.clone(), obj: Some(cm) };
        assert_eq!(key(&DeltaObject::Tombstone(t)), expected);
        let t = DeletedFinalStateUnknown::<Pod> { key: k, obj: None };
        assert_eq!(key(&DeltaObject::Tombstone(t)), expected);
    }
}

/// client-go's `TestProcessDeltasInBatch`, first case (the others are unit tests in
/// `src/informer.rs`: see the file header).
mod process_deltas_in_batch {
    use super::*;

    #[tokio::test]
    async fn all_transactions_succeeding_reach_the_listener() {
        let inf = informer("batch");
        let (log, h) = recorder();
        let reg = inf.add_event_handler(h).unwrap();
        inf.start().unwrap();
        inf.queue().add(Arc::new(with_rv(in_ns("testnamespace", "testname1"), 1))).unwrap();
        settled(&inf, &[&reg]).await;
        assert_eq!(
            *log.lock().unwrap(),
            [Event::Add { key: "testnamespace/testname1".into(), rv: "1".into(), initial: false }]
        );
        assert_eq!(inf.snapshot().len(), 1);
        inf.shutdown().await;
    }
}

/// One recorded notification: `(action, key, event rv, store rv, initial)`.
type Record = (String, String, String, String, bool);

/// Records, for each notification, what the store held for that key when the handler ran
/// (client-go's `eventRecorder`).
fn store_recorder(informer: &Informer<Pod>) -> (Arc<Mutex<Vec<Record>>>, impl EventHandler<Pod>) {
    let log: Arc<Mutex<Vec<Record>>> = Arc::default();
    let l = log.clone();
    let reader = informer.reader();
    let handler = move |n: &Notification<Pod>| {
        let (action, obj, initial) = match n {
            Notification::Add { obj, is_in_initial_list } => {
                ("add", Some(obj.clone()), *is_in_initial_list)
            }
            Notification::Update { new, .. } => ("update", Some(new.clone()), false),
            Notification::Delete { obj } => ("delete", obj.object().cloned(), false),
        };
        let key = match n {
            Notification::Delete { obj: DeltaObject::Tombstone(t) } => t.key.to_string(),
            _ => obj.as_ref().map(|o| key_of(o)).unwrap_or_default(),
        };
        let event_rv = obj.map(|o| o.rv.clone()).unwrap_or_default();
        let store_rv = reader.snapshot().get_by_key(&key).map(|o| o.rv.clone()).unwrap_or_default();
        l.lock().unwrap().push((action.to_owned(), key, event_rv, store_rv, initial));
    };
    (log, handler)
}

/// client-go's `TestReplaceEvents`, each case with `atomic` false and true. client-go's
/// `AtomicEvents` makes the RealFIFO hand a replace over as one unit; here a replace that fits
/// in one batch is always applied in one publication, so `atomic: true` is the default batch
/// size (and the test checks the single publication), `atomic: false` a batch size of one
/// (one publication per delta, as client-go processes one delta at a time).
mod replace_events {
    use super::*;

    type History = Vec<(&'static str, &'static str, &'static str, &'static str)>;

    async fn case(atomic: bool, initial: &[Pod], replaced: &[Pod], rv: &str, expected: History) {
        let inf = Informer::builder(access())
            .name("replace")
            .max_batch(if atomic { 1000 } else { 1 })
            .build()
            .unwrap();
        let (log, h) = store_recorder(&inf);
        let reg = inf.add_event_handler(h).unwrap();
        inf.start().unwrap();
        inf.queue().replace(vec![], "0").unwrap();
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
        for p in initial {
            inf.queue().add(Arc::new(p.clone())).unwrap();
        }
        settled(&inf, &[&reg]).await;
        assert_eq!(log.lock().unwrap().len(), initial.len());
        log.lock().unwrap().clear();
        let before = inf.snapshot().publication();

        let items: Vec<Arc<Pod>> = replaced.iter().cloned().map(Arc::new).collect();
        inf.queue().replace(items, rv).unwrap();
        settled(&inf, &[&reg]).await;

        let mut store: Vec<Pod> = inf.snapshot().iter().map(|p| (**p).clone()).collect();
        store.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(store, replaced, "atomic {atomic}: the store holds exactly the list");
        let mut history = log.lock().unwrap().clone();
        // Deletes synthesised by a replace are not ordered among themselves.
        let deletes = history.iter().take_while(|e| e.0 == "delete").count();
        history[..deletes].sort_by(|a, b| a.1.cmp(&b.1));
        let expected: Vec<_> = expected
            .into_iter()
            .map(|(a, k, e, s)| (a.into(), k.into(), e.into(), s.into(), false))
            .collect();
        assert_eq!(history, expected, "atomic {atomic}");
        if atomic {
            assert_eq!(inf.snapshot().publication(), before + 1, "one publication for the replace");
        }
        inf.shutdown().await;
    }

    fn p(name: &str, rv: u64) -> Pod {
        with_rv(in_ns("default", name), rv)
    }

    #[tokio::test]
    async fn create_with_no_initial_objects() {
        for atomic in [false, true] {
            let expected = vec![("add", "default/pod-1", "1", "1")];
            case(atomic, &[], &[p("pod-1", 1)], "1", expected).await;
        }
    }

    #[tokio::test]
    async fn delete_all_objects() {
        for atomic in [false, true] {
            let expected =
                vec![("delete", "default/pod-1", "1", ""), ("delete", "default/pod-3", "2", "")];
            case(atomic, &[p("pod-1", 1), p("pod-3", 2)], &[], "2", expected).await;
        }
    }

    #[tokio::test]
    async fn create_update_delete() {
        for atomic in [false, true] {
            let initial =
                [p("pod-1", 1), with_labels(p("pod-2", 2), &[("ver", "1")]), p("pod-3", 3)];
            let replaced =
                [p("pod-1", 4), with_labels(p("pod-2", 5), &[("ver", "2")]), p("pod-4", 6)];
            let expected = vec![
                ("delete", "default/pod-3", "3", ""),
                ("update", "default/pod-1", "4", "4"),
                ("update", "default/pod-2", "5", "5"),
                ("add", "default/pod-4", "6", "6"),
            ];
            case(atomic, &initial, &replaced, "6", expected).await;
        }
    }
}

/// client-go's `TestResetWatch` (atomic false and true, as in `replace_events`): changes the
/// watch missed reach handlers through the relist, none of them as part of the initial list.
mod reset_watch {
    use super::*;

    #[tokio::test]
    async fn a_relist_after_a_reset_watch_delivers_what_the_watch_missed() {
        for atomic in [false, true] {
            let inf = Informer::builder(access())
                .name("reset")
                .max_batch(if atomic { 1000 } else { 1 })
                .build()
                .unwrap();
            let source = Source::new(&inf);
            source.add_drop_watch(in_ns("default", "pod-1"));
            let (log, h) = store_recorder(&inf);
            let reg = inf.add_event_handler(h).unwrap();
            run(&inf, &source);
            assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
            settled(&inf, &[&reg]).await;
            {
                let mut log = log.lock().unwrap();
                assert_eq!(log.len(), 1);
                assert_eq!(
                    (log[0].0.as_str(), log[0].1.as_str(), log[0].4),
                    ("add", "default/pod-1", true)
                );
                log.clear();
            }
            source.modify_drop_watch(in_ns("default", "pod-1"));
            source.add_drop_watch(in_ns("default", "pod-2"));
            source.relist();
            settled(&inf, &[&reg]).await;
            let log = log.lock().unwrap().clone();
            let mut got: Vec<(&str, &str, bool)> =
                log.iter().map(|e| (e.0.as_str(), e.1.as_str(), e.4)).collect();
            got.sort();
            assert_eq!(
                got,
                [("add", "default/pod-2", false), ("update", "default/pod-1", false)],
                "atomic {atomic}"
            );
            inf.shutdown().await;
        }
    }
}

/// client-go's `TestStoreResourceVersion`: after an update and after a delete, the store's
/// version is the event's.
mod store_resource_version {
    use super::*;

    #[tokio::test]
    async fn the_published_version_follows_updates_and_deletes() {
        let inf = informer("rv");
        let source = Source::new(&inf);
        source.add_drop_watch(in_ns("default", "pod-1"));
        let (log, h) = recorder();
        let reg = inf.add_event_handler(h).unwrap();
        run(&inf, &source);
        settled(&inf, &[&reg]).await;
        assert!(matches!(&log.lock().unwrap()[..], [Event::Add { initial: true, .. }]));
        log.lock().unwrap().clear();

        source.modify(with_labels(in_ns("default", "pod-1"), &[("foo", "bar")]));
        settled(&inf, &[&reg]).await;
        let Event::Update { rv, .. } = log.lock().unwrap()[0].clone() else { panic!() };
        assert_eq!(inf.snapshot().resource_version(), Some(rv.as_str()));
        log.lock().unwrap().clear();

        source.delete(in_ns("default", "pod-1"));
        settled(&inf, &[&reg]).await;
        let Event::Delete { rv, .. } = log.lock().unwrap()[0].clone() else { panic!() };
        assert_eq!(inf.snapshot().resource_version(), Some(rv.as_str()));
        inf.shutdown().await;
    }
}

/// client-go's `TestStoreResourceVersionWithNonMetaTransform`: objects that carry no resource
/// version (client-go's case transforms them into strings) leave the store's version at the
/// last list's, and the next relist moves it.
mod store_resource_version_with_non_meta_transform {
    use super::*;

    /// An object without any resource version.
    #[derive(Debug)]
    struct Bare(String);

    impl Object for Bare {
        fn name(&self) -> Option<&str> {
            Some(&self.0)
        }
        fn namespace(&self) -> Option<&str> {
            None
        }
        fn resource_version(&self) -> Option<&str> {
            None
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn objects_without_versions_leave_the_version_of_the_last_list() {
        let inf = Informer::builder(ObjectAccess::<Bare>::of()).name("bare").build().unwrap();
        let (tx, rx) = mpsc::channel();
        inf.add_event_handler(move |n: &Notification<Bare>| {
            let what = match n {
                Notification::Add { is_in_initial_list, .. } => format!("add {is_in_initial_list}"),
                Notification::Update { .. } => "update".into(),
                Notification::Delete { .. } => "delete".into(),
            };
            tx.send(what).unwrap();
        })
        .unwrap();
        inf.start().unwrap();
        inf.queue().replace(vec![Arc::new(Bare("pod-1".into()))], "1").unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "add true");
        assert_eq!(inf.snapshot().resource_version(), Some("1"));

        inf.queue().update(Arc::new(Bare("pod-1".into()))).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "update");
        assert_eq!(inf.snapshot().resource_version(), Some("1"), "an update without a version");

        // A change the watch missed, then a relist at version 3.
        inf.queue().replace(vec![Arc::new(Bare("pod-1".into()))], "3").unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "update");
        inf.wait_for("3", Duration::from_secs(10)).await.unwrap();
        assert_eq!(inf.snapshot().resource_version(), Some("3"));
        inf.shutdown().await;
    }
}

// ===== shared_informer_test.go =============================================================

/// The label keys of a pod, as index values (client-go's "labels" index function).
fn label_keys() -> IndexFn<Pod> {
    IndexFn::new(|p: &Pod| p.labels.keys().map(|k| Cow::Borrowed(k.as_str())).collect())
}

/// client-go's `TestIndexer`.
mod indexer {
    use super::*;

    fn names(pods: Vec<Arc<Pod>>) -> Vec<String> {
        let mut n: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
        n.sort();
        n
    }

    #[tokio::test]
    async fn indexes_added_before_or_after_the_start_answer_at_once() {
        let inf = informer_with_resync("indexer", Duration::from_secs(1));
        let source = Source::new(&inf);
        source.add_drop_watch(with_labels(pod("pod1"), &[("a", "a-val"), ("b", "b-val1")]));
        source.add_drop_watch(with_labels(pod("pod2"), &[("b", "b-val2")]));
        inf.add_indexers(Indexers::new().with("labels", label_keys())).unwrap();
        run(&inf, &source);
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
        assert_eq!(names(inf.snapshot().by_index("labels", "a").unwrap()), ["pod1"]);

        source.add(with_labels(pod("pod3"), &[("a", "a-val2")]));
        inf.wait_for("3", Duration::from_secs(10)).await.unwrap();
        assert_eq!(names(inf.snapshot().by_index("labels", "a").unwrap()), ["pod1", "pod3"]);

        inf.add_indexers(Indexers::new().with("labels-again", label_keys())).unwrap();
        let snap = inf.snapshot();
        assert_eq!(names(snap.by_index("labels-again", "a").unwrap()), ["pod1", "pod3"]);
        for index in ["labels", "labels-again"] {
            let mut values: Vec<String> =
                snap.index_values(index).unwrap().iter().map(|v| v.to_string()).collect();
            values.sort();
            assert_eq!(values, ["a", "b"], "{index}");
        }
        inf.shutdown().await;
    }
}

/// client-go's `TestListenerResyncPeriods` and `TestListenerResyncPeriodsDelayed`.
mod listener_resync_periods {
    use super::*;

    /// An informer resyncing every second, with handlers that never resync, resync every 2 s
    /// and every 3 s; `delayed` queues the first list before the processing loop starts, as
    /// client-go's delayed variant starts its processor late.
    async fn case(delayed: bool) {
        let inf = informer_with_resync("resync", Duration::from_secs(1));
        let source = Source::new(&inf);
        source.add_drop_watch(pod("pod1"));
        source.add_drop_watch(pod("pod2"));
        let listeners: Vec<Names> = (0..3).map(|_| Names::default()).collect();
        let mut regs = Vec::new();
        for (l, period) in listeners.iter().zip([0, 2, 3]) {
            let options = HandlerOptions::new().resync_period(Duration::from_secs(period));
            regs.push(inf.add_event_handler_with(l.handler(), options).unwrap());
        }
        let regs: Vec<&HandlerRegistration> = regs.iter().collect();
        if delayed {
            source.relist();
            tokio::time::advance(Duration::from_secs(1)).await;
            inf.start().unwrap();
        } else {
            run(&inf, &source);
        }
        let pods = set(&["pod1", "pod2"]);
        eventually("initial list", || listeners.iter().all(|l| l.set() == pods)).await;
        settled(&inf, &regs).await;
        listeners.iter().for_each(Names::reset);

        let elapsed = if delayed { 1 } else { 0 };
        tokio::time::advance(Duration::from_secs(2 - elapsed)).await;
        eventually("listener 2 resynced", || listeners[1].len() == 2).await;
        settled(&inf, &regs).await;
        assert_eq!(listeners[1].set(), pods);
        assert_eq!((listeners[0].len(), listeners[2].len()), (0, 0), "only listener 2 at 2 s");
        listeners.iter().for_each(Names::reset);

        tokio::time::advance(Duration::from_secs(1)).await;
        eventually("listener 3 resynced", || listeners[2].len() == 2).await;
        settled(&inf, &regs).await;
        assert_eq!(listeners[2].set(), pods);
        assert_eq!((listeners[0].len(), listeners[1].len()), (0, 0), "only listener 3 at 3 s");
        inf.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn each_listener_is_resynced_at_its_own_period() {
        case(false).await;
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_processing_start_neither_deadlocks_nor_shifts_the_resyncs() {
        case(true).await;
    }
}

/// client-go's `TestResyncCheckPeriod`: before the start, handlers asking for less lower the
/// informer's check period, and the other handlers' periods are raised to it.
mod resync_check_period {
    use super::*;

    #[tokio::test]
    async fn handlers_registered_before_the_start_lower_the_check_period() {
        let inf = informer_with_resync("check", Duration::from_secs(12 * 3600));
        let period = |r: &HandlerRegistration| inf.handler_resync_period(r).unwrap();
        let secs = Duration::from_secs;
        let add = |p: u64| {
            let options = HandlerOptions::new().resync_period(secs(p));
            inf.add_event_handler_with(|_: &Notification<Pod>| {}, options).unwrap()
        };

        let h1 = add(0);
        assert_eq!(inf.resync_check_period(), secs(12 * 3600));
        assert_eq!(period(&h1), secs(0));

        let h2 = add(60);
        assert_eq!(inf.resync_check_period(), secs(60));
        assert_eq!((period(&h1), period(&h2)), (secs(0), secs(60)));

        let h3 = add(55);
        assert_eq!(inf.resync_check_period(), secs(55));
        assert_eq!((period(&h1), period(&h2), period(&h3)), (secs(0), secs(60), secs(55)));

        let h4 = add(5);
        assert_eq!(inf.resync_check_period(), secs(5));
        assert_eq!(
            (period(&h1), period(&h2), period(&h3), period(&h4)),
            (secs(0), secs(60), secs(55), secs(5))
        );
    }

    #[tokio::test]
    async fn once_started_a_shorter_period_is_raised_to_the_check_period() {
        let inf = informer_with_resync("check", Duration::from_secs(30));
        inf.start().unwrap();
        let options = HandlerOptions::new().resync_period(Duration::from_secs(5));
        let h = inf.add_event_handler_with(|_: &Notification<Pod>| {}, options).unwrap();
        assert_eq!(inf.resync_check_period(), Duration::from_secs(30));
        assert_eq!(inf.handler_resync_period(&h).unwrap(), Duration::from_secs(30));
        // Under a second: raised to the one-second minimum (then to the check period).
        let options = HandlerOptions::new().resync_period(Duration::from_millis(10));
        let tiny = inf.add_event_handler_with(|_: &Notification<Pod>| {}, options).unwrap();
        assert_eq!(inf.handler_resync_period(&tiny).unwrap(), Duration::from_secs(30));
        // No period asked: the informer's default.
        let default = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        assert_eq!(inf.handler_resync_period(&default).unwrap(), Duration::from_secs(30));
        inf.shutdown().await;
    }
}

/// client-go's `TestSharedInformerInitializationRace`: registering a handler while the informer
/// starts neither races nor deadlocks.
mod shared_informer_initialization_race {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handler_registered_during_the_start_is_served() {
        let inf = informer_with_resync("race", Duration::from_secs(1));
        let source = Source::new(&inf);
        source.add_drop_watch(pod("pod1"));
        let i = inf.clone();
        let names = Names::default();
        let h = names.handler();
        let adder = std::thread::spawn(move || i.add_event_handler(h).unwrap());
        run(&inf, &source);
        let reg = adder.join().unwrap();
        assert!(reg.wait_synced(Duration::from_secs(10)).await);
        assert_eq!(names.set(), set(&["pod1"]));
        inf.shutdown().await;
    }
}

/// client-go's `TestSharedInformerWatchDisruption`: after the watch was reset, a relist brings
/// what it missed; a handler due for a resync also gets the unchanged objects.
mod shared_informer_watch_disruption {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_relist_delivers_missed_changes_and_resyncing_handlers_see_everything() {
        let inf = informer_with_resync("disruption", Duration::from_secs(1));
        let source = Source::new(&inf);
        source.add_drop_watch(pod("pod1"));
        source.add_drop_watch(pod("pod2"));
        let (no_resync, resync) = (Names::default(), Names::default());
        let opts = HandlerOptions::new().resync_period(Duration::ZERO);
        let r1 = inf.add_event_handler_with(no_resync.handler(), opts).unwrap();
        let opts = HandlerOptions::new().resync_period(Duration::from_secs(1));
        let r2 = inf.add_event_handler_with(resync.handler(), opts).unwrap();
        run(&inf, &source);
        let both = set(&["pod1", "pod2"]);
        eventually("initial list", || no_resync.set() == both && resync.set() == both).await;
        settled(&inf, &[&r1, &r2]).await;

        // Changes the watch does not deliver: nobody sees them.
        source.add_drop_watch(pod("pod3"));
        source.modify_drop_watch(pod("pod2"));
        settled(&inf, &[&r1, &r2]).await;
        assert_eq!((no_resync.set(), resync.set()), (both.clone(), both));
        no_resync.reset();
        resync.reset();

        // The resync period elapses, then the watch is reset and the reflector relists.
        tokio::time::advance(Duration::from_secs(1)).await;
        eventually("resync delivered", || resync.len() >= 2).await;
        source.relist();
        eventually("relist delivered", || {
            no_resync.set() == set(&["pod2", "pod3"])
                && resync.set() == set(&["pod1", "pod2", "pod3"])
        })
        .await;
        settled(&inf, &[&r1, &r2]).await;
        assert_eq!(no_resync.set(), set(&["pod2", "pod3"]), "the unchanged pod1 is not re-sent");
        inf.shutdown().await;
    }
}

/// client-go's `TestSharedInformerRemoveHandler`.
mod shared_informer_remove_handler {
    use super::*;

    #[tokio::test]
    async fn handlers_are_removed_one_by_one() {
        let inf = informer_with_resync("remove", Duration::from_secs(1));
        let h1 = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        let h2 = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        assert_eq!(inf.handler_count(), 2);
        inf.remove_event_handler(&h2).unwrap();
        assert_eq!(inf.handler_count(), 1);
        inf.remove_event_handler(&h1).unwrap();
        assert_eq!(inf.handler_count(), 0);
    }
}

/// client-go's `TestSharedInformerRemoveForeignHandler`: another informer's handle removes
/// nothing. client-go returns no error; here it is [`Error::ForeignHandler`]. (Before this
/// port, ids were numbered per informer, so the foreign handle removed the handler with the
/// same number.)
mod shared_informer_remove_foreign_handler {
    use super::*;

    #[tokio::test]
    async fn another_informers_handle_removes_nothing() {
        let inf = informer_with_resync("one", Duration::from_secs(1));
        let inf2 = informer_with_resync("two", Duration::from_secs(1));
        let h1 = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        let h2 = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        // A handler of the second informer, numbered as the first informer's would be.
        let other = inf2.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        assert_eq!((inf.handler_count(), inf2.handler_count()), (2, 1));
        assert!(!inf2.is_registered(&h1) && !inf2.is_registered(&h2));

        for h in [&h1, &h2] {
            assert!(matches!(inf2.remove_event_handler(h), Err(Error::ForeignHandler { .. })));
        }
        assert!(matches!(inf.remove_event_handler(&other), Err(Error::ForeignHandler { .. })));
        assert_eq!((inf.handler_count(), inf2.handler_count()), (2, 1));
        assert!(inf.is_registered(&h1) && inf.is_registered(&h2) && inf2.is_registered(&other));

        inf.remove_event_handler(&h2).unwrap();
        assert_eq!(inf.handler_count(), 1);
        inf.remove_event_handler(&h1).unwrap();
        assert_eq!(inf.handler_count(), 0);
        assert_eq!(inf2.handler_count(), 1);
    }
}

/// client-go's `TestSharedInformerMultipleRegistration`: one handler registered twice is two
/// registrations, removed independently.
mod shared_informer_multiple_registration {
    use super::*;

    #[derive(Clone)]
    struct Noop;

    impl EventHandler<Pod> for Noop {
        fn on_add(&mut self, _: &Arc<Pod>, _: bool) {}
        fn on_update(&mut self, _: &Arc<Pod>, _: &Arc<Pod>) {}
        fn on_delete(&mut self, _: &DeltaObject<Pod>) {}
    }

    #[tokio::test]
    async fn the_same_handler_twice_is_two_registrations() {
        let inf = informer_with_resync("multi", Duration::from_secs(1));
        let handler = Noop;
        let reg1 = inf.add_event_handler(handler.clone()).unwrap();
        assert!(inf.is_registered(&reg1));
        let reg2 = inf.add_event_handler(handler).unwrap();
        assert!(inf.is_registered(&reg2));
        assert_eq!(inf.handler_count(), 2);
        inf.remove_event_handler(&reg1).unwrap();
        assert!(!inf.is_registered(&reg1) && inf.is_registered(&reg2));
        assert_eq!(inf.handler_count(), 1);
        inf.remove_event_handler(&reg2).unwrap();
        assert!(!inf.is_registered(&reg2));
        assert_eq!(inf.handler_count(), 0);
    }
}

/// client-go's `TestRemovingRemovedSharedInformer`. client-go accepts removing a removed
/// handler silently; here it is [`Error::UnknownHandler`], and nothing changes.
mod removing_removed_shared_informer {
    use super::*;

    #[tokio::test]
    async fn removing_twice_is_an_error_that_changes_nothing() {
        let inf = informer_with_resync("twice", Duration::from_secs(1));
        let reg = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        inf.remove_event_handler(&reg).unwrap();
        assert!(!inf.is_registered(&reg));
        assert!(matches!(inf.remove_event_handler(&reg), Err(Error::UnknownHandler(_))));
        assert!(!inf.is_registered(&reg));
        assert_eq!(inf.handler_count(), 0);
    }
}

/// client-go's `TestSharedInformerHandlerAbuse`: many tasks adding and removing handlers while
/// events flow and the informer stops.
mod shared_informer_handler_abuse {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_registrations_and_removals_while_events_flow_and_the_informer_stops() {
        let inf = informer_with_resync("abuse", Duration::from_secs(1));
        let source = Source::new(&inf);
        run(&inf, &source);
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..8u64)
            .map(|w| {
                let (inf, stop) = (inf.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut handles: Vec<HandlerRegistration> = Vec::new();
                    let mut i = w;
                    for _ in 0..300 {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        i = i.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        if (i >> 33) % 2 == 0 || handles.is_empty() {
                            let opts = HandlerOptions::new().resync_period(Duration::from_secs(1));
                            match inf.add_event_handler_with(|_: &Notification<Pod>| {}, opts) {
                                Ok(h) => handles.push(h),
                                Err(Error::Stopped(_)) => return,
                                Err(e) => panic!("cannot add a handler: {e}"),
                            }
                        } else {
                            let h = handles.swap_remove(((i >> 33) as usize) % handles.len());
                            inf.remove_event_handler(&h).unwrap();
                        }
                        if handles.len() > 16 {
                            let h = handles.swap_remove(0);
                            inf.remove_event_handler(&h).unwrap();
                        }
                    }
                })
            })
            .collect();
        let mut live: Vec<String> = Vec::new();
        for i in 0..2000 {
            let name = format!("pod{i}");
            match (i % 3, live.is_empty()) {
                (0, _) | (_, true) => {
                    source.add(pod(&name));
                    live.push(name);
                }
                (1, false) => source.modify(pod(&live[i % live.len()])),
                _ => {
                    let gone = live.swap_remove(i % live.len());
                    source.delete(pod(&gone));
                }
            }
        }
        // Stop the informer while the workers still run.
        inf.shutdown().await;
        stop.store(true, Ordering::SeqCst);
        for w in workers {
            w.join().unwrap();
        }
        assert!(matches!(
            inf.add_event_handler(|_: &Notification<Pod>| {}),
            Err(Error::Stopped(_))
        ));
    }
}

/// client-go's `TestStateSharedInformer`: started and stopped, before, during and after.
mod state_shared_informer {
    use super::*;

    #[tokio::test]
    async fn started_and_stopped_report_the_informers_life() {
        let inf = informer_with_resync("state", Duration::from_secs(1));
        let source = Source::new(&inf);
        source.add_drop_watch(pod("pod1"));
        let names = Names::default();
        let reg = inf.add_event_handler(names.handler()).unwrap();
        assert!(!inf.is_started() && !inf.is_stopped());
        run(&inf, &source);
        assert!(reg.wait_synced(Duration::from_secs(10)).await);
        assert_eq!(names.set(), set(&["pod1"]));
        assert!(inf.is_started() && !inf.is_stopped());
        inf.shutdown().await;
        assert!(inf.is_stopped());
        assert!(inf.is_started(), "still reports that it was started");
    }
}

/// client-go's `TestAddOnStoppedSharedInformer`.
mod add_on_stopped_shared_informer {
    use super::*;

    #[tokio::test]
    async fn a_stopped_informer_refuses_new_handlers() {
        let inf = informer_with_resync("stopped", Duration::from_secs(1));
        let source = Source::new(&inf);
        source.add_drop_watch(pod("pod1"));
        run(&inf, &source);
        inf.shutdown().await;
        assert!(inf.is_stopped());
        let err = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap_err();
        assert!(matches!(err, Error::Stopped(_)), "{err}");
        assert_eq!(inf.handler_count(), 0);
    }
}

/// client-go's `TestRemoveOnStoppedSharedInformer`.
mod remove_on_stopped_shared_informer {
    use super::*;

    #[tokio::test]
    async fn a_handler_can_be_removed_from_a_stopped_informer() {
        let inf = informer_with_resync("stopped", Duration::from_secs(1));
        let source = Source::new(&inf);
        source.add_drop_watch(pod("pod1"));
        let reg = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        run(&inf, &source);
        inf.shutdown().await;
        assert!(inf.is_stopped());
        inf.remove_event_handler(&reg).unwrap();
        assert!(!inf.is_registered(&reg));
    }
}

/// client-go's `TestRemoveWhileActive`.
mod remove_while_active {
    use super::*;

    #[tokio::test]
    async fn a_removed_handler_gets_nothing_more_while_the_informer_runs() {
        let inf = informer("active");
        let source = Source::new(&inf);
        let names = Names::default();
        let reg = inf.add_event_handler(names.handler()).unwrap();
        run(&inf, &source);
        source.add(pod("pod1"));
        eventually("pod1", || names.set() == set(&["pod1"])).await;
        inf.remove_event_handler(&reg).unwrap();
        assert!(!inf.is_registered(&reg));
        source.add(pod("pod2"));
        inf.wait_for("2", Duration::from_secs(10)).await.unwrap();
        settled(&inf, &[]).await;
        reg.wait_stopped().await;
        assert_eq!(names.set(), set(&["pod1"]));
        inf.shutdown().await;
    }
}

/// client-go's `TestAddWhileActive`: a handler added to a running informer is not synced until
/// it has handled its initial notifications, then it is.
mod add_while_active {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_late_handler_syncs_once_it_has_handled_its_replay() {
        let inf = informer("active");
        let source = Source::new(&inf);
        let first = Names::default();
        let handle1 = inf.add_event_handler(first.handler()).unwrap();
        assert!(!handle1.has_synced(), "synced before running");
        run(&inf, &source);
        source.add(pod("pod1"));
        eventually("pod1 on the first handler", || first.set() == set(&["pod1"])).await;
        assert!(handle1.wait_synced(Duration::from_secs(10)).await);

        // The second handler is held inside its first call: it must not be synced meanwhile.
        let (gate_tx, gate_rx) = mpsc::channel::<()>();
        let gate = Mutex::new(Some(gate_rx));
        let second = Names::default();
        let mut record = second.handler();
        let handle2 = inf
            .add_event_handler(move |n: &Notification<Pod>| {
                if let Some(rx) = gate.lock().unwrap().take() {
                    rx.recv().unwrap();
                }
                record(n);
            })
            .unwrap();
        assert!(!handle2.has_synced(), "synced before handling anything");
        gate_tx.send(()).unwrap();

        source.add(pod("pod2"));
        let both = set(&["pod1", "pod2"]);
        eventually("both pods on the second handler", || second.set() == both).await;
        assert!(handle2.wait_synced(Duration::from_secs(10)).await);
        assert!(inf.is_registered(&handle1) && inf.is_registered(&handle2));
        eventually("both pods on the first handler", || first.set() == both).await;
        inf.shutdown().await;
    }
}

/// client-go's `TestShutdown` (its three cases check, through a goroutine leak detector, that
/// nothing keeps running; here: every handler thread has ended).
mod shutdown {
    use super::*;

    #[tokio::test]
    async fn no_context_handler_added_before_the_start_ends_with_the_informer() {
        let inf = informer_with_resync("shutdown", Duration::from_secs(1));
        let source = Source::new(&inf);
        let reg = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        run(&inf, &source);
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
        inf.shutdown().await;
        inf.remove_event_handler(&reg).unwrap();
        tokio::time::timeout(Duration::from_secs(10), reg.wait_stopped()).await.unwrap();
    }

    #[tokio::test]
    async fn no_context_later_handler_added_after_the_sync_ends_when_removed() {
        let inf = informer_with_resync("shutdown", Duration::from_secs(1));
        let source = Source::new(&inf);
        run(&inf, &source);
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
        let reg = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        inf.remove_event_handler(&reg).unwrap();
        tokio::time::timeout(Duration::from_secs(10), reg.wait_stopped()).await.unwrap();
        inf.shutdown().await;
    }

    #[tokio::test]
    async fn no_run_handler_of_an_informer_never_started_ends_when_it_is_dropped() {
        let inf = informer_with_resync("shutdown", Duration::from_secs(1));
        let reg = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        drop(inf);
        tokio::time::timeout(Duration::from_secs(10), reg.wait_stopped()).await.unwrap();
    }
}

/// client-go's `TestEventPanics`: a panicking handler is reported, keeps receiving, and waits
/// one second after each panic (client-go's `processorListener.run`).
mod event_panics {
    use super::*;

    fn panicking() -> impl FnMut(&Notification<Pod>) + Send + 'static {
        |n: &Notification<Pod>| {
            if matches!(n, Notification::Add { .. }) {
                panic!("fake panic");
            }
        }
    }

    #[tokio::test]
    async fn simple_a_panic_is_reported_and_the_informer_syncs() {
        assert_eq!(HandlerOptions::default().panic_delay, Duration::from_secs(1));
        let inf = informer_with_resync("panics", Duration::from_secs(1));
        let source = Source::new(&inf);
        source.add_drop_watch(pod("pod1"));
        let reg = inf.add_event_handler(panicking()).unwrap();
        run(&inf, &source);
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
        eventually("the handler panicked", || reg.panics() == 1).await;
        inf.remove_event_handler(&reg).unwrap();
        inf.shutdown().await;
        assert!(inf.is_stopped());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_every_panic_is_reported_and_followed_by_the_panic_delay() {
        let inf = informer_with_resync("panics", Duration::from_secs(1));
        let source = Source::new(&inf);
        for i in 1..=5 {
            source.add_drop_watch(pod(&format!("pod{i}")));
        }
        let delay = Duration::from_millis(100);
        let opts = |name: &str| HandlerOptions::new().name(name).panic_delay(delay);
        let reg1 = inf.add_event_handler_with(panicking(), opts("fake-event-handler-1")).unwrap();
        let reg2 = inf.add_event_handler_with(panicking(), opts("fake-event-handler-2")).unwrap();
        let start = Instant::now();
        run(&inf, &source);
        assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
        eventually("five panics each", || reg1.panics() == 5 && reg2.panics() == 5).await;
        // Each handler waited after each panic that had a notification after it.
        assert!(start.elapsed() >= delay * 4, "{:?}", start.elapsed());
        for reg in [&reg1, &reg2] {
            inf.remove_event_handler(reg).unwrap();
        }
        inf.shutdown().await;
    }
}

/// `(started, release, finished, handler)` of [`blocking_handler`].
type Blocking<H> = (mpsc::Receiver<()>, mpsc::Sender<()>, Arc<AtomicBool>, H);

/// A handler that announces its first call, waits for a release, then records that it
/// returned (client-go's blocked handler in the removal tests).
fn blocking_handler() -> Blocking<impl FnMut(&Notification<Pod>) + Send + 'static> {
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let finished = Arc::new(AtomicBool::new(false));
    let f = finished.clone();
    let handler = move |n: &Notification<Pod>| {
        if matches!(n, Notification::Add { .. }) {
            let _ = started_tx.send(());
            let _ = release_rx.recv();
            f.store(true, Ordering::SeqCst);
        }
    };
    (started_rx, release_tx, finished, handler)
}

/// client-go's `TestRemoveEventHandler_AsynchronousPanic`: removing a handler returns at once,
/// even while the handler is inside a call (in client-go the handler then uses what the test
/// tore down and panics; here the test shows the call still runs after the removal).
mod remove_event_handler_asynchronous_panic {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn removal_does_not_wait_for_the_call_in_progress() {
        let inf = informer("async");
        let source = Source::new(&inf);
        let (started, release, finished, handler) = blocking_handler();
        let reg = inf.add_event_handler(handler).unwrap();
        run(&inf, &source);
        source.add(pod("pod1"));
        started.recv_timeout(Duration::from_secs(10)).unwrap();
        inf.remove_event_handler(&reg).unwrap();
        assert!(!finished.load(Ordering::SeqCst), "returned while the handler is still inside");
        assert!(!reg.is_stopped());
        release.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), reg.wait_stopped()).await.unwrap();
        assert!(finished.load(Ordering::SeqCst));
        inf.shutdown().await;
    }
}

/// client-go's `TestRemoveEventHandler_SynchronousShutdown`: `shutdown_event_handler`
/// (`ShutDownEventHandler`) returns only once the handler's call has returned.
mod remove_event_handler_synchronous_shutdown {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_waits_for_the_call_in_progress() {
        let inf = informer("sync");
        let source = Source::new(&inf);
        let (started, release, finished, handler) = blocking_handler();
        let reg = inf.add_event_handler(handler).unwrap();
        run(&inf, &source);
        source.add(pod("pod1"));
        started.recv_timeout(Duration::from_secs(10)).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            release.send(()).unwrap();
        });
        tokio::time::timeout(Duration::from_secs(10), inf.shutdown_event_handler(&reg))
            .await
            .unwrap()
            .unwrap();
        assert!(finished.load(Ordering::SeqCst), "the call had returned");
        assert!(reg.is_stopped());
        releaser.join().unwrap();
        inf.shutdown().await;
    }
}

/// client-go's `TestShutDownEventHandler_Lifecycles`.
mod shut_down_event_handler_lifecycles {
    use super::*;

    async fn shut_down(inf: &Informer<Pod>, reg: &HandlerRegistration) {
        tokio::time::timeout(Duration::from_secs(10), inf.shutdown_event_handler(reg))
            .await
            .expect("shut down in time")
            .unwrap();
        assert!(reg.is_stopped() && !inf.is_registered(reg));
    }

    #[tokio::test]
    async fn informer_never_started() {
        let inf = informer("never");
        let reg = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        shut_down(&inf, &reg).await;
    }

    #[tokio::test]
    async fn started_then_added_then_shut_down() {
        let inf = informer("started");
        let source = Source::new(&inf);
        run(&inf, &source);
        assert!(inf.wait_for_sync(Duration::from_secs(2)).await);
        let reg = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        shut_down(&inf, &reg).await;
        inf.shutdown().await;
    }

    #[tokio::test]
    async fn added_then_started_then_shut_down() {
        let inf = informer("added");
        let source = Source::new(&inf);
        let reg = inf.add_event_handler(|_: &Notification<Pod>| {}).unwrap();
        run(&inf, &source);
        assert!(inf.wait_for_sync(Duration::from_secs(2)).await);
        shut_down(&inf, &reg).await;
        inf.shutdown().await;
    }
}
