//! Conformance: client-go v0.37.2 `tools/cache/thread_safe_store_test.go`, `index_test.go` and
//! `store_test.go`, case by case, on our store (v0.34.0 has a subset of these cases and none that
//! v0.37.2 dropped).
//!
//! Each test is named `test_<client-go test>[_<case>]`. Translation rules: client-go's
//! `ThreadSafeStore` takes explicit keys, its `cache`/`Indexer` a key function; here a store is
//! built with a custom key function (`StoreBuilder::key_fn`) that reads the key the test chose.
//! client-go's index maps are read through `index_keys` and `index_values`; its
//! `LastStoreSyncResourceVersion` is `Snapshot::resource_version` (`None` for client-go's `""`);
//! its `Transaction` is `Writer::apply`.
//!
//! Not ported: `TestFIFOCache` (client-go's plain `FIFO` used as a store: we have no such type),
//! `TestUndeltaStore` (no `UndeltaStore`) and `TestWithStoreMetricsDefaulting` (no per-store
//! metrics option: the informer owns the metrics).

use std::{
    borrow::Cow,
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use snapinformer_store::{
    Change, Error, IndexFn, IndexValues, Indexers, KeyFn, NAMESPACE_INDEX, Object, ObjectAccess,
    Reader, StoreBuilder, TransformFn, Writer,
};

/// A test object: the key the test chose, a value indexes read, a namespace and a version.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SObj {
    key: String,
    val: String,
    ns: Option<String>,
    rv: Option<String>,
}

impl Object for SObj {
    fn name(&self) -> Option<&str> {
        Some(&self.key)
    }
    fn namespace(&self) -> Option<&str> {
        self.ns.as_deref()
    }
    fn resource_version(&self) -> Option<&str> {
        self.rv.as_deref()
    }
}

fn o(key: &str, val: &str) -> Arc<SObj> {
    Arc::new(SObj { key: key.into(), val: val.into(), ns: None, rv: None })
}

fn with_rv(key: &str, rv: &str) -> Arc<SObj> {
    Arc::new(SObj { key: key.into(), val: String::new(), ns: None, rv: Some(rv.into()) })
}

fn key_fn() -> KeyFn<SObj> {
    KeyFn::new(|o: &SObj| Ok(o.key.clone()))
}

/// An index on the value split at commas (one value without a comma).
fn split_index() -> IndexFn<SObj> {
    IndexFn::new(|o: &SObj| o.val.split(',').map(Cow::Borrowed).collect::<IndexValues<'_>>())
}

fn store(indexes: &[(&str, IndexFn<SObj>)]) -> (Writer<SObj>, Reader<SObj>) {
    let mut b = StoreBuilder::new(ObjectAccess::of()).key_fn(key_fn());
    for (name, f) in indexes {
        b = b.index(*name, f.clone());
    }
    b.build().unwrap()
}

fn keys(r: &Reader<SObj>, index: &str, value: &str) -> Vec<String> {
    r.snapshot().index_keys(index, value).unwrap().iter().map(|k| k.to_string()).collect()
}

fn values(r: &Reader<SObj>, index: &str) -> Vec<String> {
    r.snapshot().index_values(index).unwrap().iter().map(|k| k.to_string()).collect()
}

// ---- thread_safe_store_test.go

#[test]
fn test_thread_safe_store_delete_removes_empty_sets_from_index() {
    let (mut w, r) = store(&[("testIndexer", split_index())]);
    w.add(o("testKey", "testKey")).unwrap();
    assert_eq!(keys(&r, "testIndexer", "testKey"), ["testKey"]);
    w.delete_key("testKey");
    assert!(!values(&r, "testIndexer").contains(&"testKey".to_owned()), "empty bucket removed");
}

#[test]
fn test_thread_safe_store_add_keeps_non_empty_set_post_delete_from_index() {
    let constant = IndexFn::new(|_: &SObj| IndexValues::from_iter([Cow::Borrowed("testIndex")]));
    let (mut w, r) = store(&[("testIndexer", constant)]);
    w.add(o("retain", "retain")).unwrap();
    w.add(o("delete", "delete")).unwrap();
    assert_eq!(keys(&r, "testIndexer", "testIndex"), ["delete", "retain"]);
    w.delete_key("delete");
    assert_eq!(values(&r, "testIndexer"), ["testIndex"], "the bucket stays");
    assert_eq!(keys(&r, "testIndexer", "testIndex"), ["retain"]);
}

#[test]
fn test_thread_safe_store_indexing_functions_with_multiple_values() {
    let (mut w, r) = store(&[("testIndexer", split_index())]);
    let check = |foo: &[&str], bar: &[&str], baz: &[&str]| {
        assert_eq!(keys(&r, "testIndexer", "foo"), foo, "foo");
        assert_eq!(keys(&r, "testIndexer", "bar"), bar, "bar");
        assert_eq!(keys(&r, "testIndexer", "baz"), baz, "baz");
    };
    w.add(o("key1", "foo")).unwrap();
    w.add(o("key2", "bar")).unwrap();
    check(&["key1"], &["key2"], &[]);
    w.update(o("key2", "foo,bar")).unwrap();
    check(&["key1", "key2"], &["key2"], &[]);
    w.update(o("key1", "foo,bar")).unwrap();
    check(&["key1", "key2"], &["key1", "key2"], &[]);
    w.add(o("key3", "foo,bar,baz")).unwrap();
    check(&["key1", "key2", "key3"], &["key1", "key2", "key3"], &["key3"]);
    w.update(o("key1", "foo")).unwrap();
    check(&["key1", "key2", "key3"], &["key2", "key3"], &["key3"]);
    w.update(o("key2", "bar")).unwrap();
    check(&["key1", "key3"], &["key2", "key3"], &["key3"]);
    w.delete_key("key1");
    check(&["key3"], &["key2", "key3"], &["key3"]);
    w.delete_key("key3");
    check(&[], &["key2"], &[]);
}

fn rv_of(r: &Reader<SObj>) -> Option<String> {
    r.snapshot().resource_version().map(str::to_owned)
}

#[test]
fn test_thread_safe_store_rv_initial_state() {
    let (_w, r) = store(&[]);
    assert_eq!(rv_of(&r), None);
}

#[test]
fn test_thread_safe_store_rv_add_update_and_delete() {
    let (mut w, r) = store(&[]);
    w.add(with_rv("key1", "10")).unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("10"));
    w.add(with_rv("key3", "10")).unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("10"), "same version");
    w.add(with_rv("key4", "20")).unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("20"));
    // A delete with the object's final state reports that state's version.
    w.delete(&with_rv("key4", "30")).unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("30"), "after deletion");
    // An object without a version (client-go: not a meta object) changes nothing.
    w.add(o("key5", "just a string")).unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("30"));
    w.add(with_rv("key6", "40")).unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("40"));
    // A delete by key alone (client-go's nil object) changes nothing.
    w.delete_key("key6");
    assert_eq!(rv_of(&r).as_deref(), Some("40"), "after delete by key");
    // A transaction reports the version of its last object, not the highest.
    let outcome = w.apply([
        Change::Upsert(with_rv("key9", "40")),
        Change::Upsert(with_rv("key10", "30")),
        Change::Upsert(with_rv("key11", "50")),
    ]);
    assert_eq!(outcome.applied, 3);
    assert_eq!(rv_of(&r).as_deref(), Some("50"), "after transaction");
    let _ =
        w.apply([Change::Upsert(with_rv("key12", "70")), Change::Upsert(with_rv("key13", "60"))]);
    assert_eq!(rv_of(&r).as_deref(), Some("60"), "the last object's version");
}

#[test]
fn test_thread_safe_store_rv_replace() {
    let (mut w, r) = store(&[]);
    w.add(with_rv("key1", "10")).unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("10"));
    w.replace([with_rv("key3", "40"), with_rv("key2", "30")], "50").unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("50"));
}

#[test]
fn test_thread_safe_store_rv_delete() {
    let (mut w, r) = store(&[]);
    w.add(with_rv("key1", "10")).unwrap();
    w.delete(&with_rv("key1", "20")).unwrap();
    assert_eq!(rv_of(&r).as_deref(), Some("20"));
}

// ---- index_test.go

/// A pod-like object: name, labels and annotations (client-go's test uses `v1.Pod`).
#[derive(Debug, Clone)]
struct Pod {
    name: String,
    foo_label: Option<String>,
    users: String,
}

impl Object for Pod {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn resource_version(&self) -> Option<&str> {
        None
    }
}

fn pod(name: &str, foo_label: Option<&str>, users: &str) -> Arc<Pod> {
    Arc::new(Pod {
        name: name.into(),
        foo_label: foo_label.map(str::to_owned),
        users: users.into(),
    })
}

#[test]
fn test_get_index_func_values() {
    // client-go's testIndexFunc: the `foo` label, "" when absent.
    let modes = IndexFn::new(|p: &Pod| {
        IndexValues::from_iter([Cow::Borrowed(p.foo_label.as_deref().unwrap_or(""))])
    });
    let (mut w, r) =
        StoreBuilder::new(ObjectAccess::of()).index("testmodes", modes).build().unwrap();
    w.add(pod("one", Some("bar"), "")).unwrap();
    w.add(pod("two", Some("bar"), "")).unwrap();
    w.add(pod("tre", Some("biz"), "")).unwrap();
    let got: Vec<String> =
        r.snapshot().index_values("testmodes").unwrap().iter().map(|v| v.to_string()).collect();
    assert_eq!(got, ["bar", "biz"]);
}

#[test]
fn test_multi_index_keys() {
    let by_user = IndexFn::new(|p: &Pod| p.users.split(',').map(Cow::Borrowed).collect());
    let (mut w, r) =
        StoreBuilder::new(ObjectAccess::of()).index("byUser", by_user).build().unwrap();
    let (one, two, tre) = (
        pod("one", None, "ernie,bert"),
        pod("two", None, "bert,oscar"),
        pod("tre", None, "ernie,elmo"),
    );
    w.add(one).unwrap();
    w.add(two.clone()).unwrap();
    w.add(tre.clone()).unwrap();
    let names = |user: &str| -> BTreeSet<String> {
        r.snapshot().by_index("byUser", user).unwrap().iter().map(|p| p.name.clone()).collect()
    };
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(names("ernie"), set(&["one", "tre"]));
    assert_eq!(names("bert"), set(&["one", "two"]));
    assert_eq!(names("elmo"), set(&["tre"]));
    assert_eq!(names("oscar"), set(&["two"]));
    assert_eq!(
        names("elmo1"),
        set(&[]),
        "an unknown value of a known index is empty, not an error"
    );

    w.delete(&tre).unwrap();
    assert_eq!(names("ernie"), set(&["one"]));
    assert_eq!(names("elmo"), set(&[]));

    // Values that change on update: the old entries go.
    w.update(Arc::new(Pod { users: "oscar".into(), ..(*two).clone() })).unwrap();
    assert_eq!(names("bert"), set(&["one"]));
    assert_eq!(names("oscar"), set(&["two"]));
}

// ---- store_test.go

/// client-go's `doTestStore`.
fn do_test_store(mut w: Writer<SObj>, r: &Reader<SObj>) {
    w.add(o("foo", "bar")).unwrap();
    assert_eq!(
        r.snapshot().get(&o("foo", "")).unwrap().map(|x| x.val.clone()).as_deref(),
        Some("bar")
    );
    w.update(o("foo", "baz")).unwrap();
    assert_eq!(
        r.snapshot().get(&o("foo", "")).unwrap().map(|x| x.val.clone()).as_deref(),
        Some("baz")
    );
    w.delete(&o("foo", "")).unwrap();
    assert!(r.snapshot().get(&o("foo", "")).unwrap().is_none(), "found deleted item");

    w.add(o("a", "b")).unwrap();
    w.add(o("c", "d")).unwrap();
    w.add(o("e", "e")).unwrap();
    let vals = |r: &Reader<SObj>| -> BTreeSet<String> {
        r.snapshot().list().iter().map(|x| x.val.clone()).collect()
    };
    assert_eq!(vals(r), ["b", "d", "e"].map(str::to_owned).into());
    assert_eq!(r.snapshot().len(), 3, "no extra items");

    w.replace([o("foo", "foo"), o("bar", "bar")], "0").unwrap();
    assert_eq!(vals(r), ["bar", "foo"].map(str::to_owned).into());
    assert_eq!(r.snapshot().len(), 2, "no extra items");
}

#[test]
fn test_cache() {
    let (w, r) = store(&[]);
    do_test_store(w, &r);
}

#[test]
fn test_cache_with_transformer() {
    let called = Arc::new(AtomicBool::new(false));
    let flag = called.clone();
    let (w, r) = StoreBuilder::new(ObjectAccess::of())
        .key_fn(key_fn())
        .transform(TransformFn::new(move |x: Arc<SObj>| {
            flag.store(true, Ordering::SeqCst);
            Ok(x)
        }))
        .build()
        .unwrap();
    do_test_store(w, &r);
    assert!(called.load(Ordering::SeqCst), "the transform was called");
}

#[test]
fn test_index() {
    let by_val = IndexFn::new(|x: &SObj| IndexValues::from_iter([Cow::Borrowed(x.val.as_str())]));
    let (mut w, r) = store(&[("by_val", by_val)]);
    w.add(o("a", "b")).unwrap();
    w.add(o("c", "b")).unwrap();
    w.add(o("e", "f")).unwrap();
    w.add(o("g", "h")).unwrap();
    for (value, want) in [("b", vec!["a", "c"]), ("f", vec!["e"]), ("h", vec!["g"])] {
        let mut found: Vec<String> = r
            .snapshot()
            .index("by_val", &o("", value))
            .unwrap()
            .iter()
            .map(|x| x.key.clone())
            .collect();
        found.sort();
        assert_eq!(found, want, "index {value}");
    }
}

#[derive(Debug, thiserror::Error)]
#[error("error")]
struct TestError;

#[test]
fn test_key_error() {
    // client-go: KeyError unwraps to the key function's error, also when nested.
    let failing = KeyFn::new(|_: &SObj| Err(Box::new(TestError)));
    let (mut w, _r) = StoreBuilder::new(ObjectAccess::of()).key_fn(failing).build().unwrap();
    let err = w.add(o("x", "")).unwrap_err();
    let Error::KeyFn(user) = &err else { panic!("a key function error: {err:?}") };
    assert!(user.downcast_ref::<TestError>().is_some(), "unwraps to the function's error");
    let mut source = std::error::Error::source(&err);
    let mut found = false;
    while let Some(e) = source {
        found |= e.downcast_ref::<TestError>().is_some();
        source = e.source();
    }
    assert!(found, "the error chain reaches the function's error");
    assert_eq!(err.to_string(), "key function failed: error");
}

fn txn_store() -> (Writer<SObj>, Reader<SObj>) {
    // client-go's test key function: "" for the good objects, an error for the others.
    let kf = KeyFn::new(
        |x: &SObj| {
            if x.val == "ok" { Ok(String::new()) } else { Err("test error".into()) }
        },
    );
    StoreBuilder::new(ObjectAccess::of()).key_fn(kf).build().unwrap()
}

fn txn(objs: &[&str]) -> Vec<usize> {
    let (mut w, _r) = txn_store();
    let outcome =
        w.apply(objs.iter().enumerate().map(|(i, v)| Change::Upsert(o(&i.to_string(), v))));
    assert!(outcome.rejected.iter().all(|(_, e)| matches!(e, Error::KeyFn(_))));
    let rejected: BTreeSet<usize> = outcome.rejected.iter().map(|(i, _)| *i).collect();
    assert_eq!(outcome.applied + rejected.len(), objs.len());
    (0..objs.len()).filter(|i| !rejected.contains(i)).collect()
}

#[test]
fn test_cache_transaction_should_index_errors_txn_all_success_objects_should_work() {
    assert_eq!(txn(&["ok", "ok"]), [0, 1]);
}

#[test]
fn test_cache_transaction_should_index_errors_txn_all_fail_objects_should_work() {
    assert_eq!(txn(&["bad", "bad"]), Vec::<usize>::new());
}

#[test]
fn test_cache_transaction_should_index_errors_txn_mix_success_and_fail_objects_should_work() {
    assert_eq!(txn(&["ok", "bad", "ok", "bad"]), [0, 2]);
}

// ---- Beyond the upstream files: the indexer rules the brief names.

#[test]
fn test_indexer_unknown_index_names_are_errors() {
    let (mut w, r) = store(&[("by", split_index())]);
    w.add(o("a", "x")).unwrap();
    let s = r.snapshot();
    // As client-go: Index, ByIndex and IndexKeys fail on an unknown index.
    assert!(matches!(s.index("nope", &o("", "x")), Err(Error::IndexNotFound { .. })));
    assert!(matches!(s.by_index("nope", "x"), Err(Error::IndexNotFound { .. })));
    assert!(matches!(s.index_keys("nope", "x"), Err(Error::IndexNotFound { .. })));
    // client-go's ListIndexFuncValues returns an empty list here; we report the mistake.
    assert!(matches!(s.index_values("nope"), Err(Error::IndexNotFound { .. })));
}

#[test]
fn test_indexer_add_indexers_after_items_exist_indexes_them() {
    let (mut w, r) = store(&[("by", split_index())]);
    w.add(o("a", "x,y")).unwrap();
    w.add(o("b", "y")).unwrap();
    let second =
        IndexFn::new(|x: &SObj| IndexValues::from_iter([Cow::Owned(x.val.len().to_string())]));
    w.add_indexers(Indexers::new().with("len", second)).unwrap();
    assert_eq!(keys(&r, "len", "3"), ["a"]);
    assert_eq!(keys(&r, "len", "1"), ["b"]);
    // A name already registered is a conflict, and nothing changes.
    let dup = Indexers::new().with("other", split_index()).with("by", split_index());
    assert_eq!(w.add_indexers(dup), Err(Error::IndexExists("by".into())));
    assert!(r.snapshot().index_keys("other", "x").is_err(), "no partial registration");
}

#[test]
fn test_indexer_replace_rebuilds_indexes() {
    let (mut w, r) = store(&[("by", split_index())]);
    w.add(o("a", "x")).unwrap();
    w.add(o("b", "y")).unwrap();
    w.replace([o("b", "x"), o("c", "z")], "9").unwrap();
    assert_eq!(keys(&r, "by", "x"), ["b"]);
    assert_eq!(keys(&r, "by", "z"), ["c"]);
    assert_eq!(values(&r, "by"), ["x", "z"], "no bucket left from before the replace");
}

#[test]
fn test_indexer_empty_index_values_are_indexed() {
    // client-go indexes whatever values the function returns, "" included.
    let (mut w, r) = store(&[("by", split_index())]);
    w.add(o("a", "")).unwrap();
    assert_eq!(keys(&r, "by", ""), ["a"]);
    // The namespace index (client-go's MetaNamespaceIndexFunc) puts cluster-scoped objects
    // under "".
    let cluster = Arc::new(SObj { key: "n1".into(), val: "v".into(), ns: None, rv: None });
    let namespaced =
        Arc::new(SObj { key: "ns/p".into(), val: "v".into(), ns: Some("ns".into()), rv: None });
    w.add(cluster).unwrap();
    w.add(namespaced).unwrap();
    assert_eq!(keys(&r, NAMESPACE_INDEX, ""), ["a", "n1"]);
    assert_eq!(keys(&r, NAMESPACE_INDEX, "ns"), ["ns/p"]);
    assert_eq!(values(&r, NAMESPACE_INDEX), ["", "ns"]);
}

#[test]
fn test_store_custom_keys_and_namespace_lists() {
    // With a custom key function the namespace listing cannot use key prefixes.
    let (mut w, r) = store(&[]);
    for i in 0..4 {
        let x = SObj { key: format!("k{i}"), val: String::new(), ns: Some("ns".into()), rv: None };
        w.add(Arc::new(x)).unwrap();
    }
    assert_eq!(r.snapshot().list_namespace("ns").len(), 4);
    assert!(r.snapshot().get_by_key("k0").is_some());
}

#[test]
fn test_store_transform_is_not_applied_to_deletes_and_errors_lose_nothing() {
    let (mut w, r) = StoreBuilder::new(ObjectAccess::of())
        .key_fn(key_fn())
        .transform(TransformFn::new(|x: Arc<SObj>| {
            if x.val == "bad" {
                return Err("refused".into());
            }
            Ok(Arc::new(SObj { val: format!("{}!", x.val), ..(*x).clone() }))
        }))
        .build()
        .unwrap();
    w.add(o("a", "x")).unwrap();
    assert_eq!(r.snapshot().get_by_key("a").unwrap().val, "x!");
    assert!(matches!(w.add(o("b", "bad")), Err(Error::Transform(_))));
    assert!(matches!(w.replace([o("c", "y"), o("d", "bad")], "1"), Err(Error::Transform(_))));
    assert_eq!(r.snapshot().len(), 1, "a refused replace changes nothing");
    // A delete is not transformed: "bad" here would be refused if it were.
    w.delete(&o("a", "bad")).unwrap();
    assert!(r.snapshot().is_empty());
}
