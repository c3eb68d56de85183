//! Behaviour tests: error cases, batches, held snapshots, concurrent readers.

mod common;

use std::{
    collections::BTreeMap,
    sync::{Arc, mpsc},
    thread,
    time::Duration,
};

use common::{TObj, access, base_indexers};
use snapinformer_store::{Change, Chunked, Error, Hamt, IndexFn, Indexers, StoreBuilder};

fn pod(name: &str, node: &str, rv: u64) -> TObj {
    TObj {
        name: name.into(),
        ns: Some("default".into()),
        rv: rv.to_string(),
        node: node.into(),
        owners: vec!["uid-a".into()],
        labels: BTreeMap::from([("app".into(), "web".into())]),
    }
}

#[test]
fn a_selector_list_follows_label_changes_and_deletes_in_a_large_and_a_small_namespace() {
    selector_lists_follow_changes(true);
}

#[test]
fn a_store_without_label_digests_returns_the_same_selector_lists() {
    selector_lists_follow_changes(false);
}

fn selector_lists_follow_changes(digests: bool) {
    let (mut w, r) = StoreBuilder::new(access()).label_digests(digests).build().unwrap();
    let labelled = |name: &str, ns: &str, app: &str, rv: u64| {
        let mut o = pod(name, "n1", rv);
        o.ns = Some(ns.into());
        o.labels = BTreeMap::from([("app".into(), app.into()), ("tier".into(), "web".into())]);
        Arc::new(o)
    };
    // "big" holds most of the store (its lists scan the primary map), "small" the rest (its
    // lists resolve the namespace bucket's keys).
    for i in 0..40 {
        w.add(labelled(&format!("p{i}"), "big", &format!("app-{}", i % 4), 1)).unwrap();
    }
    for i in 0..4 {
        w.add(labelled(&format!("q{i}"), "small", &format!("app-{}", i % 2), 1)).unwrap();
    }
    let names = |ns: &str, selector: &[(&str, &str)]| {
        let mut got: Vec<String> =
            r.snapshot().list_selected(ns, selector).iter().map(|o| o.name.clone()).collect();
        got.sort();
        got
    };
    assert_eq!(names("big", &[("app", "app-1")]).len(), 10);
    assert_eq!(names("small", &[("app", "app-1"), ("tier", "web")]), ["q1", "q3"]);
    assert_eq!(names("", &[("app", "app-1")]).len(), 12);
    assert!(names("big", &[("app", "app-1"), ("tier", "db")]).is_empty());
    assert_eq!(names("small", &[]).len(), 4, "the empty selector selects everything");
    // A label change moves an object out of one selection and into another; a delete removes it.
    w.update(labelled("p1", "big", "moved", 2)).unwrap();
    w.update(labelled("q1", "small", "moved", 2)).unwrap();
    w.delete_key("big/p5");
    assert_eq!(names("big", &[("app", "app-1")]).len(), 8);
    assert_eq!(names("big", &[("app", "moved")]), ["p1"]);
    assert_eq!(names("small", &[("app", "app-1")]), ["q3"]);
    assert_eq!(names("", &[("app", "moved")]), ["p1", "q1"]);
    assert!(names("nowhere", &[("app", "moved")]).is_empty());
}

#[test]
fn object_without_a_name_is_rejected_and_changes_nothing() {
    let (mut w, r) = StoreBuilder::new(access()).build().unwrap();
    w.add(Arc::new(pod("a", "n1", 1))).unwrap();
    let before = r.snapshot().publication();
    let err = w.add(Arc::new(pod("", "n1", 2))).unwrap_err();
    assert_eq!(err, Error::MissingName { namespace: Some("default".into()) });
    assert!(err.to_string().contains("no name"), "{err}");
    assert_eq!(w.delete(&pod("", "n1", 3)).unwrap_err(), err);
    assert!(w.replace(vec![Arc::new(pod("b", "n", 4)), Arc::new(pod("", "n", 5))], "9").is_err());
    let snap = r.snapshot();
    assert_eq!(snap.publication(), before);
    assert_eq!(snap.list_keys().len(), 1);
    assert_eq!(snap.resource_version(), Some("1"));
}

#[test]
fn unknown_index_is_an_error_naming_the_known_ones() {
    let (_w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    let snap = r.snapshot();
    let err = snap.by_index("nodes", "n1").unwrap_err();
    assert!(matches!(&err, Error::IndexNotFound { name, .. } if name == "nodes"));
    assert_eq!(
        err.to_string(),
        r#"index "nodes" does not exist (registered: namespace, node, owner)"#
    );
    assert!(snap.index_keys("nope", "x").is_err());
    assert!(snap.index_values("nope").is_err());
    assert!(snap.index("nope", &pod("a", "n", 1)).is_err());
}

#[test]
fn duplicate_index_name_is_rejected_and_changes_nothing() {
    let dup = Indexers::new().with("node", IndexFn::field(|o: &TObj| Some(o.node.as_str())));
    let (mut w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    assert_eq!(w.add_indexers(dup.clone()), Err(Error::IndexExists("node".into())));
    let twice = Indexers::new()
        .with("x", IndexFn::field(|o: &TObj| Some(o.node.as_str())))
        .with("x", IndexFn::field(|o: &TObj| Some(o.node.as_str())));
    assert_eq!(w.add_indexers(twice), Err(Error::IndexExists("x".into())));
    assert_eq!(r.snapshot().index_names(), ["namespace", "node", "owner"]);
    let ns = Indexers::new().with("namespace", IndexFn::field(|o: &TObj| Some(o.node.as_str())));
    assert_eq!(
        StoreBuilder::new(access()).indexers(ns).build().unwrap_err(),
        Error::IndexExists("namespace".into())
    );
}

#[test]
fn add_indexers_after_items_exist_indexes_them() {
    let (mut w, r) = StoreBuilder::new(access()).build().unwrap();
    for i in 0..100 {
        w.add(Arc::new(pod(&format!("p{i}"), &format!("n{}", i % 4), i))).unwrap();
    }
    w.add_indexers(Indexers::new().with("node", IndexFn::field(|o: &TObj| Some(o.node.as_str()))))
        .unwrap();
    let snap = r.snapshot();
    assert_eq!(snap.index_values("node").unwrap().len(), 4);
    assert_eq!(snap.by_index("node", "n1").unwrap().len(), 25);
}

#[test]
fn moving_between_buckets_updates_the_index_and_removes_empty_buckets() {
    let (mut w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    w.add(Arc::new(pod("a", "n1", 1))).unwrap();
    w.update(Arc::new(pod("a", "n2", 2))).unwrap();
    let snap = r.snapshot();
    assert_eq!(snap.index_values("node").unwrap().iter().map(|v| &**v).collect::<Vec<_>>(), ["n2"]);
    assert_eq!(
        snap.index_keys("node", "n2").unwrap().iter().map(|v| &**v).collect::<Vec<_>>(),
        ["default/a"]
    );
    w.delete_key("default/a");
    assert!(r.snapshot().index_values("node").unwrap().is_empty());
    assert!(r.snapshot().index_values("namespace").unwrap().is_empty());
}

#[test]
fn batch_is_invisible_until_committed_then_published_once() {
    let (mut w, r) = StoreBuilder::new(access()).build().unwrap();
    let start = r.snapshot().publication();
    let mut batch = w.batch();
    for i in 0..1000 {
        batch.upsert(Arc::new(pod(&format!("p{i}"), "n", i))).unwrap();
    }
    batch.set_resource_version("5000");
    assert_eq!(batch.get_by_key("default/p10").unwrap().rv, "10");
    assert!(r.snapshot().is_empty(), "nothing visible before commit");
    batch.commit();
    let snap = r.snapshot();
    assert_eq!(snap.len(), 1000);
    assert_eq!(snap.publication(), start + 1);
    assert_eq!(snap.sequence(), 1000);
    assert_eq!(snap.resource_version(), Some("5000"));
}

#[test]
fn a_dropped_batch_is_invisible_to_readers_and_to_the_writers_next_batch() {
    let (mut w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    w.add(Arc::new(pod("kept", "n1", 1))).unwrap();
    let before = r.snapshot();
    {
        let mut batch = w.batch();
        batch.upsert(Arc::new(pod("a", "n2", 2))).unwrap();
        batch.upsert(Arc::new(pod("kept", "n3", 3))).unwrap();
        batch.set_resource_version("99");
        assert!(batch.delete_key("default/kept").is_some());
        assert_eq!(batch.len(), 4);
    } // dropped without a commit
    let snap = r.snapshot();
    assert_eq!(snap.publication(), before.publication(), "nothing published");
    assert_eq!(snap.list_keys(), before.list_keys());
    assert_eq!(w.snapshot().publication(), before.publication());
    // The next batch starts from the last published version, indexes included.
    let mut batch = w.batch();
    assert!(batch.is_empty());
    assert!(batch.get_by_key("default/a").is_none());
    assert_eq!(batch.get_by_key("default/kept").unwrap().rv, "1");
    batch.upsert(Arc::new(pod("b", "n1", 4))).unwrap();
    batch.commit();
    let snap = r.snapshot();
    assert_eq!(snap.publication(), before.publication() + 1);
    assert_eq!(snap.sequence(), before.sequence() + 1, "only the committed change counts");
    assert_eq!(snap.resource_version(), Some("4"));
    let mut keys: Vec<String> = snap.list_keys().iter().map(|k| k.to_string()).collect();
    keys.sort();
    assert_eq!(keys, ["default/b", "default/kept"]);
    assert!(snap.index_keys("node", "n2").unwrap().is_empty(), "no index entry leaked");
    assert!(snap.index_keys("node", "n3").unwrap().is_empty());
    assert_eq!(snap.index_keys("node", "n1").unwrap().len(), 2);
}

/// Stages `objs` in one batch with `?`, then commits.
fn upsert_all(w: &mut snapinformer_store::Writer<TObj>, objs: &[TObj]) -> Result<(), Error> {
    let mut batch = w.batch();
    for o in objs {
        batch.upsert(Arc::new(o.clone()))?;
    }
    batch.commit();
    Ok(())
}

#[test]
fn an_error_in_the_middle_of_a_batch_publishes_and_keeps_nothing() {
    let (mut w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    let before = r.snapshot();
    let err = upsert_all(&mut w, &[pod("a", "n1", 1), pod("", "n1", 2), pod("c", "n1", 3)]);
    assert_eq!(err, Err(Error::MissingName { namespace: Some("default".into()) }));
    assert_eq!(r.snapshot().publication(), before.publication());
    assert!(r.snapshot().is_empty(), "`a`, staged before the error, is not visible");
    upsert_all(&mut w, &[pod("d", "n1", 4)]).unwrap();
    let snap = r.snapshot();
    assert_eq!(snap.list_keys().iter().map(|k| k.to_string()).collect::<Vec<_>>(), ["default/d"]);
    assert_eq!(snap.by_index("node", "n1").unwrap().len(), 1);
}

#[test]
fn a_committed_batch_publishes_once_and_an_empty_one_not_at_all() {
    let (mut w, r) = StoreBuilder::new(access()).build().unwrap();
    let start = r.snapshot().publication();
    w.batch().commit();
    assert_eq!(r.snapshot().publication(), start, "an empty batch publishes nothing");
    upsert_all(&mut w, &[pod("a", "n", 1), pod("b", "n", 2), pod("c", "n", 3)]).unwrap();
    assert_eq!(r.snapshot().publication(), start + 1);
    assert_eq!(r.snapshot().len(), 3);
}

#[test]
fn apply_reports_rejected_changes_and_applies_the_rest() {
    let (mut w, r) = StoreBuilder::new(access()).build().unwrap();
    let outcome = w.apply(vec![
        Change::Upsert(Arc::new(pod("a", "n", 1))),
        Change::Upsert(Arc::new(pod("", "n", 2))),
        Change::Upsert(Arc::new(pod("b", "n", 3))),
        Change::DeleteKey("default/a".into()),
    ]);
    assert_eq!(outcome.applied, 3);
    assert_eq!(outcome.rejected.len(), 1);
    assert_eq!(outcome.rejected[0].0, 1);
    let keys: Vec<String> = r.snapshot().list_keys().iter().map(|k| k.to_string()).collect();
    assert_eq!(keys, ["default/b"]);
}

#[test]
fn replace_sets_the_list_resource_version_and_drops_missing_keys() {
    let (mut w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    w.add(Arc::new(pod("gone", "n1", 1))).unwrap();
    w.replace(vec![Arc::new(pod("kept", "n2", 7))], "42").unwrap();
    let snap = r.snapshot();
    assert!(snap.get_by_key("default/gone").is_none());
    assert_eq!(snap.resource_version(), Some("42"));
    assert!(snap.by_index("node", "n1").unwrap().is_empty());
    assert_eq!(snap.by_index("node", "n2").unwrap().len(), 1);
}

#[test]
fn multi_valued_index_puts_an_object_in_every_bucket_once() {
    let (mut w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    let mut o = pod("a", "n1", 1);
    o.owners = vec!["u1".into(), "u2".into(), "u1".into()];
    w.add(Arc::new(o.clone())).unwrap();
    let snap = r.snapshot();
    assert_eq!(snap.by_index("owner", "u1").unwrap().len(), 1);
    assert_eq!(snap.by_index("owner", "u2").unwrap().len(), 1);
    assert_eq!(snap.index("owner", &o).unwrap().len(), 1, "Index deduplicates across values");
    o.owners = vec!["u2".into()];
    w.update(Arc::new(o)).unwrap();
    assert_eq!(
        r.snapshot().index_values("owner").unwrap().iter().map(|v| &**v).collect::<Vec<_>>(),
        ["u2"]
    );
}

#[test]
fn resync_changes_nothing() {
    let (mut w, r) = StoreBuilder::new(access()).build().unwrap();
    w.add(Arc::new(pod("a", "n", 1))).unwrap();
    let before = r.snapshot();
    w.resync().unwrap();
    assert_eq!(r.snapshot().publication(), before.publication());
}

fn held_snapshot_survives_100000_changes<B: snapinformer_store::Backend>() {
    let (mut w, r) =
        StoreBuilder::new(access()).backend::<B>().indexers(base_indexers()).build().unwrap();
    let mut batch = w.batch();
    for i in 0..2000 {
        batch.upsert(Arc::new(pod(&format!("p{i}"), &format!("n{}", i % 10), i))).unwrap();
    }
    batch.commit();
    let held = r.snapshot();
    let expected: Vec<(String, String)> = {
        let mut v: Vec<_> = held.iter().map(|o| (o.key(), o.rv.clone())).collect();
        v.sort();
        v
    };
    let (done_tx, done_rx) = mpsc::channel();
    let writer = thread::spawn(move || {
        for i in 0..100_000u64 {
            let name = format!("p{}", i % 3000);
            if i % 7 == 0 {
                w.delete_key(&format!("default/{name}"));
            } else {
                w.update(Arc::new(pod(&name, &format!("n{}", i % 13), 10_000 + i))).unwrap();
            }
        }
        done_tx.send(w.snapshot().sequence()).unwrap();
    });
    // The writer must finish while the snapshot is held; the deadline only catches a deadlock.
    let applied = done_rx
        .recv_timeout(Duration::from_secs(300))
        .expect("writer finished while a snapshot was held");
    writer.join().unwrap();
    assert_eq!(applied, 2000 + 100_000, "every change applied");
    let mut now: Vec<_> = held.iter().map(|o| (o.key(), o.rv.clone())).collect();
    now.sort();
    assert_eq!(now, expected, "held snapshot unchanged");
    assert_eq!(held.by_index("node", "n3").unwrap().len(), 200);
    assert_ne!(r.snapshot().sequence(), held.sequence());
}

#[test]
fn hamt_held_snapshot_is_unchanged_while_the_writer_applies_100000_changes() {
    held_snapshot_survives_100000_changes::<Hamt>();
}

#[test]
fn chunked_held_snapshot_is_unchanged_while_the_writer_applies_100000_changes() {
    held_snapshot_survives_100000_changes::<Chunked>();
}

#[test]
fn concurrent_readers_always_see_internally_consistent_snapshots() {
    let (mut w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let r = r.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut checked = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let snap = r.snapshot();
                    // Every object has exactly one node: the node buckets partition the items.
                    let total: usize = snap
                        .index_values("node")
                        .unwrap()
                        .iter()
                        .map(|v| snap.by_index("node", v).unwrap().len())
                        .sum();
                    assert_eq!(total, snap.len());
                    assert_eq!(snap.list_namespace("default").len(), snap.len());
                    checked += 1;
                }
                checked
            })
        })
        .collect();
    for i in 0..20_000u64 {
        let name = format!("p{}", i % 500);
        if i % 5 == 0 {
            w.delete_key(&format!("default/{name}"));
        } else {
            let mut b = w.batch();
            b.upsert(Arc::new(pod(&name, &format!("n{}", i % 7), i))).unwrap();
            b.upsert(Arc::new(pod(&format!("q{}", i % 300), &format!("n{}", i % 3), i))).unwrap();
            b.commit();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in readers {
        assert!(h.join().unwrap() > 0);
    }
}

#[test]
fn covering_index_returns_the_latest_version_after_an_update() {
    let (mut w, r) = StoreBuilder::new(access()).indexers(base_indexers()).build().unwrap();
    w.add(Arc::new(pod("a", "n1", 1))).unwrap();
    w.update(Arc::new(pod("a", "n1", 2))).unwrap();
    let snap = r.snapshot();
    assert_eq!(snap.by_index("owner", "uid-a").unwrap()[0].rv, "2");
    assert_eq!(snap.by_index("node", "n1").unwrap()[0].rv, "2");
}

#[test]
fn background_reclaim_frees_superseded_versions_off_the_writer() {
    let (mut w, r) = StoreBuilder::new(access())
        .indexers(base_indexers())
        .background_reclaim(true)
        .build()
        .unwrap();
    let first = Arc::new(pod("a", "n1", 1));
    let weak = Arc::downgrade(&first);
    w.add(first).unwrap();
    let held = r.snapshot();
    w.update(Arc::new(pod("a", "n2", 2))).unwrap();
    w.update(Arc::new(pod("a", "n3", 3))).unwrap();
    // A reader still holds the first version: it must stay intact.
    assert_eq!(held.get_by_key("default/a").unwrap().rv, "1");
    assert!(weak.upgrade().is_some());
    drop(held);
    // Once nobody holds it, the reclaimer drops it (polled: it runs on another thread).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while weak.upgrade().is_some() {
        assert!(std::time::Instant::now() < deadline, "superseded version was never reclaimed");
        w.update(Arc::new(pod("b", "n1", 4))).unwrap();
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(r.snapshot().get_by_key("default/a").unwrap().rv, "3");
}

#[test]
fn dropping_the_writer_ends_the_reclaimer_after_it_drops_everything_handed_over() {
    let (mut w, r) = StoreBuilder::new(access()).background_reclaim(true).build().unwrap();
    let mut weaks = Vec::new();
    for i in 0..1000 {
        let o = Arc::new(pod("a", "n", i));
        weaks.push(Arc::downgrade(&o));
        w.add(o).unwrap();
    }
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        drop(w); // joins the reclaimer thread
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("writer drop returned");
    drop(r);
    assert_eq!(weaks.iter().filter(|w| w.upgrade().is_some()).count(), 0);
}

#[test]
fn chunked_held_snapshot_is_unchanged_with_background_reclaim() {
    let (mut w, r) = StoreBuilder::new(access())
        .indexers(base_indexers())
        .background_reclaim(true)
        .build()
        .unwrap();
    for i in 0..500 {
        w.add(Arc::new(pod(&format!("p{i}"), "n1", i))).unwrap();
    }
    let held = r.snapshot();
    for i in 0..20_000u64 {
        w.update(Arc::new(pod(&format!("p{}", i % 500), "n2", 1000 + i))).unwrap();
    }
    assert!(held.iter().all(|o| o.node == "n1" && o.rv.parse::<u64>().unwrap() < 500));
    assert_eq!(held.by_index("node", "n1").unwrap().len(), 500);
    assert_eq!(r.snapshot().by_index("node", "n2").unwrap().len(), 500);
}

/// Which object was dropped on which thread (by thread name).
type DropLog = Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// An object whose drop, on the reclaimer thread, waits until a gate opens, and which records
/// the thread that dropped it.
struct Gated {
    name: String,
    gate: Option<Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>>,
    dropped_on: DropLog,
}

impl snapinformer_store::Object for Gated {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        Some("default")
    }
    fn resource_version(&self) -> Option<&str> {
        None
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        let thread = thread::current().name().map(str::to_owned);
        if let Some(gate) = &self.gate
            && thread.as_deref() == Some("snapinformer-reclaim")
        {
            let (open, cv) = &**gate;
            let mut open = open.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
        }
        self.dropped_on.lock().unwrap().push((self.name.clone(), thread));
    }
}

#[test]
fn a_stalled_reclaimer_makes_the_writer_free_inline_beyond_the_backlog_bound() {
    use snapinformer_store::{ObjectAccess, RECLAIM_BACKLOG_MIN};
    let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let dropped_on: DropLog = Arc::default();
    let obj = {
        let (gate, dropped_on) = (gate.clone(), dropped_on.clone());
        move |name: &str, gated: bool| {
            Arc::new(Gated {
                name: name.into(),
                gate: gated.then(|| gate.clone()),
                dropped_on: dropped_on.clone(),
            })
        }
    };
    // The default store reclaims in the background.
    let (mut w, r) = StoreBuilder::new(ObjectAccess::<Gated>::of()).build().unwrap();
    w.add(obj("blocker", true)).unwrap();
    // Supersedes the blocker: the reclaimer takes that version and stalls dropping it.
    w.update(obj("blocker", false)).unwrap();
    let extra = 20;
    let updates = RECLAIM_BACKLOG_MIN + 1 + extra;
    let (done_tx, done_rx) = mpsc::channel();
    let mut writer_thread = {
        let obj = obj.clone();
        Some(thread::spawn(move || {
            for _ in 0..updates {
                w.update(obj("x", false)).unwrap();
            }
            done_tx.send(()).unwrap();
            w
        }))
    };
    // The writer is not held up by the stalled reclaimer.
    done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the writer blocked behind a stalled reclaimer");
    let w = writer_thread.take().unwrap().join().unwrap();
    // Opens the gate when dropped, also when an assertion below fails (dropping the writer
    // joins the reclaimer, which would otherwise wait forever).
    struct OpenOnDrop(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);
    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            *self.0.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.0.1.notify_all();
        }
    }
    let opener = OpenOnDrop(gate.clone());
    let inline = |d: &[(String, Option<String>)]| {
        d.iter().filter(|(n, t)| n == "x" && t.as_deref() != Some("snapinformer-reclaim")).count()
    };
    {
        let d = dropped_on.lock().unwrap();
        assert!(
            !d.iter().any(|(_, t)| t.as_deref() == Some("snapinformer-reclaim")),
            "the reclaimer dropped something while stalled: {d:?}"
        );
        // At most RECLAIM_BACKLOG_MIN changes wait for the reclaimer (the store is small);
        // everything beyond was freed by the writer.
        assert!(inline(&d) >= extra, "only {} freed inline: {d:?}", inline(&d));
    }
    // Open the gate: the reclaimer drains its backlog, and dropping the writer joins it.
    drop(opener);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        drop(w);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("writer drop returned");
    assert_eq!(r.snapshot().get_by_key("default/x").map(|o| o.name.clone()).as_deref(), Some("x"));
    drop(r);
    let d = dropped_on.lock().unwrap();
    assert_eq!(d.len(), 2 + updates, "every object was dropped exactly once: {d:?}");
    assert!(d.iter().any(|(n, t)| n == "blocker" && t.as_deref() == Some("snapinformer-reclaim")));
}

#[test]
fn inline_reclamation_frees_a_superseded_object_before_the_update_returns() {
    let (mut w, _r) = StoreBuilder::new(access()).background_reclaim(false).build().unwrap();
    let first = Arc::new(pod("a", "n1", 1));
    let weak = Arc::downgrade(&first);
    w.add(first).unwrap();
    w.update(Arc::new(pod("a", "n1", 2))).unwrap();
    assert!(weak.upgrade().is_none());
}

/// Polls until `weak` is gone (the reclaimer runs on its own thread), without any further
/// write: a hand-over the reclaimer missed would leave it alive.
fn freed_without_more_writes(weak: &std::sync::Weak<TObj>, what: &str) {
    common::wait_until(&format!("{what} reclaimed"), || weak.upgrade().is_none());
}

#[test]
fn a_sleeping_reclaimer_is_woken_by_the_first_version_handed_to_it() {
    let (mut w, _r) = StoreBuilder::new(access()).background_reclaim(true).build().unwrap();
    w.add(Arc::new(pod("a", "n", 1))).unwrap();
    // Pauses short and long, so that hand-overs meet the thread busy, asleep and on its way to
    // sleep.
    for (i, pause_us) in
        [0u64, 1, 10, 50, 500, 4000, 5000, 6000, 20_000].iter().cycle().take(120).enumerate()
    {
        let rv = i as u64 + 2;
        let weak = {
            let snap = w.reader().snapshot();
            Arc::downgrade(snap.get_by_key("default/a").unwrap())
        };
        thread::sleep(Duration::from_micros(*pause_us));
        w.update(Arc::new(pod("a", "n", rv))).unwrap();
        freed_without_more_writes(
            &weak,
            &format!("version {} after a {pause_us} us pause", rv - 1),
        );
    }
}

#[test]
fn a_reclaimer_frees_a_burst_without_further_writes() {
    let (mut w, _r) = StoreBuilder::new(access()).background_reclaim(true).build().unwrap();
    let mut weaks = Vec::new();
    for rv in 1..=300 {
        let o = Arc::new(pod("a", "n", rv));
        weaks.push(Arc::downgrade(&o));
        w.add(o).unwrap();
    }
    // Every version but the current one was handed over: the thread frees them all, with no
    // write after the burst to push it.
    for (i, weak) in weaks.iter().enumerate().take(299) {
        freed_without_more_writes(weak, &format!("version {}", i + 1));
    }
    assert!(weaks[299].upgrade().is_some(), "the published version stays");
}
