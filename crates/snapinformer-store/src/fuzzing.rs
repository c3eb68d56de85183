//! Differential fuzzing support (cargo feature `fuzzing`, off by default; not a stable API).
//!
//! [`store_ops`] turns arbitrary bytes into a store configuration and a sequence of operations
//! (add, update, delete, delete_key, replace, batches, `apply`, `add_indexers`, holding and
//! dropping snapshots), runs them against a store and against a naive model (a `BTreeMap` with
//! indexes recomputed from scratch), and panics at the first difference. Every published
//! snapshot is checked, and so is every snapshot held across later writes when it is dropped.
//!
//! The same function is called by the libFuzzer target `store_ops` (in `fuzz/` at the
//! repository root) and by the smoke test `tests/fuzz_smoke.rs`, which enables this feature
//! through a dev-dependency of the crate on itself.

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use arbitrary::{Arbitrary, Unstructured};

use crate::{
    Backend, Change, Chunked, Error, Hamt, IndexFn, IndexValues, Indexers, NAMESPACE_INDEX, Object,
    ObjectAccess, OwnerUids, Snapshot, StoreBuilder,
};

/// The object type of the fuzzed store: every metadata field may be missing or empty.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FObj {
    name: Option<String>,
    ns: Option<String>,
    rv: Option<String>,
    node: String,
    owners: Vec<String>,
    labels: BTreeMap<String, String>,
}

impl Object for FObj {
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    fn namespace(&self) -> Option<&str> {
        self.ns.as_deref()
    }
    fn resource_version(&self) -> Option<&str> {
        self.rv.as_deref()
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        Some(&self.labels)
    }
    fn owner_uids(&self) -> OwnerUids<'_> {
        self.owners.iter().map(String::as_str).collect()
    }
}

/// A string drawn mostly from a small space (so keys and index values collide), sometimes empty,
/// with a slash, or arbitrary.
#[derive(Debug, Clone, Arbitrary)]
enum Text {
    Small(u8),
    Small2(u8),
    Empty,
    Slash(u8),
    Any(String),
}

impl Text {
    fn make(&self, prefix: &str) -> String {
        match self {
            Text::Small(n) | Text::Small2(n) => format!("{prefix}{}", n % 6),
            Text::Empty => String::new(),
            // The same for every field, so that a name can look like a namespaced key.
            Text::Slash(n) => format!("ns-{}/{}", n % 2, n % 3),
            Text::Any(s) => s.clone(),
        }
    }
}

#[derive(Debug, Clone, Arbitrary)]
struct ObjSpec {
    name: Option<Text>,
    ns: Option<Text>,
    rv: Option<Text>,
    node: Text,
    owners: Vec<Text>,
    labels: Vec<(Text, Text)>,
}

impl ObjSpec {
    fn make(&self) -> FObj {
        FObj {
            name: self.name.as_ref().map(|t| t.make("obj-")),
            ns: self.ns.as_ref().map(|t| t.make("ns-")),
            rv: self.rv.as_ref().map(|t| t.make("")),
            node: self.node.make("node-"),
            owners: self.owners.iter().take(4).map(|t| t.make("uid-")).collect(),
            labels: self
                .labels
                .iter()
                .take(4)
                .map(|(k, v)| {
                    let key = match k {
                        Text::Small(n) | Text::Small2(n) if n % 2 == 0 => "app".to_owned(),
                        other => other.make("l"),
                    };
                    (key, v.make("v"))
                })
                .collect(),
        }
    }
}

/// A key to delete: the key of an object the model holds, or any text.
#[derive(Debug, Clone, Arbitrary)]
enum KeySpec {
    Existing(u16),
    Text(Text),
}

/// The index functions a fuzzed store can register (all names are valid: the model knows them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
enum IndexKind {
    Namespace,
    Node,
    Owner,
    App,
    LabelPairs,
    Rv,
    NameInitial,
}

impl IndexKind {
    fn name(self) -> &'static str {
        match self {
            IndexKind::Namespace => NAMESPACE_INDEX,
            IndexKind::Node => "node",
            IndexKind::Owner => "owner",
            IndexKind::App => "app",
            IndexKind::LabelPairs => "labelpairs",
            IndexKind::Rv => "rv",
            IndexKind::NameInitial => "name-initial",
        }
    }

    fn index_fn(self) -> IndexFn<FObj> {
        let access = ObjectAccess::<FObj>::of();
        match self {
            IndexKind::Namespace => IndexFn::namespace(access),
            IndexKind::Node => IndexFn::field(|o: &FObj| Some(o.node.as_str())),
            IndexKind::Owner => IndexFn::owner_uid(access),
            IndexKind::App => IndexFn::label(access, "app"),
            IndexKind::LabelPairs => IndexFn::new(|o: &FObj| -> IndexValues<'_> {
                o.labels.iter().map(|(k, v)| Cow::Owned(format!("{k}={v}"))).collect()
            }),
            IndexKind::Rv => IndexFn::field(|o: &FObj| o.rv.as_deref()),
            IndexKind::NameInitial => IndexFn::new(|o: &FObj| -> IndexValues<'_> {
                let initial = o.name.as_deref().and_then(|n| n.chars().next());
                initial.map(|c| Cow::Owned(c.to_string())).into_iter().collect()
            }),
        }
    }

    /// Naive index values, written independently of the store's helpers.
    fn model_values(self, o: &FObj) -> Vec<String> {
        let non_empty = |s: Option<&String>| s.filter(|s| !s.is_empty()).cloned();
        match self {
            // client-go's `MetaNamespaceIndexFunc`: cluster-scoped objects are under "".
            IndexKind::Namespace => vec![o.ns.clone().unwrap_or_default()],
            IndexKind::Node => non_empty(Some(&o.node)).into_iter().collect(),
            IndexKind::Owner => o.owners.clone(),
            IndexKind::App => o.labels.get("app").cloned().into_iter().collect(),
            IndexKind::LabelPairs => o.labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            IndexKind::Rv => non_empty(o.rv.as_ref()).into_iter().collect(),
            IndexKind::NameInitial => {
                o.name.iter().filter_map(|n| n.chars().next()).map(String::from).collect()
            }
        }
    }
}

#[derive(Debug, Clone, Arbitrary)]
struct IndexSpec {
    kind: IndexKind,
    covering: bool,
}

#[derive(Debug, Clone, Arbitrary)]
enum BatchOp {
    Upsert(ObjSpec),
    Delete(ObjSpec),
    DeleteKey(KeySpec),
    SetRv(Text),
    Get(KeySpec),
}

#[derive(Debug, Clone, Arbitrary)]
enum ChangeSpec {
    Upsert(ObjSpec),
    Delete(ObjSpec),
    DeleteKey(KeySpec),
}

#[derive(Debug, Clone, Arbitrary)]
enum Op {
    Add(ObjSpec),
    Update(ObjSpec),
    /// Re-writes an object the model holds with a new resource version (the common update).
    Touch(u16, Text),
    Delete(ObjSpec),
    DeleteKey(KeySpec),
    Replace(Vec<ObjSpec>, Text),
    /// A batch, committed if the flag is set, dropped (discarded) otherwise.
    Batch(Vec<BatchOp>, bool),
    Apply(Vec<ChangeSpec>),
    AddIndexers(Vec<IndexSpec>),
    Resync,
    Hold,
    Release(u8),
    /// Reads an index that may not exist.
    Query(Text, Text),
}

#[derive(Debug, Arbitrary)]
struct Setup {
    hamt: bool,
    background_reclaim: bool,
    indexes: Vec<IndexSpec>,
}

/// The naive model: a sorted map, the registered indexes in order, and the counters a snapshot
/// reports.
#[derive(Debug, Clone)]
struct Model {
    items: BTreeMap<String, FObj>,
    indexes: Vec<IndexKind>,
    rv: Option<String>,
    sequence: u64,
    publication: u64,
}

fn model_key(o: &FObj) -> Result<String, Error> {
    let ns = o.ns.as_deref().filter(|n| !n.is_empty());
    match o.name.as_deref().filter(|n| !n.is_empty()) {
        None => Err(Error::MissingName { namespace: ns.map(str::to_owned) }),
        Some(name) => Ok(match ns {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_owned(),
        }),
    }
}

impl Model {
    fn key_of(&self, spec: &KeySpec) -> String {
        match spec {
            KeySpec::Existing(i) if !self.items.is_empty() => self
                .items
                .keys()
                .nth(usize::from(*i) % self.items.len())
                .cloned()
                .unwrap_or_default(),
            KeySpec::Existing(_) => "obj-0".to_owned(),
            KeySpec::Text(t) => t.make("obj-"),
        }
    }

    fn upsert(&mut self, o: &FObj) {
        let key = model_key(o).expect("named");
        self.items.insert(key, o.clone());
        self.sequence += 1;
    }

    fn remove(&mut self, key: &str) -> Option<FObj> {
        self.sequence += 1;
        self.items.remove(key)
    }

    fn buckets(&self, kind: IndexKind) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (k, o) in &self.items {
            for v in kind.model_values(o) {
                out.entry(v).or_default().insert(k.clone());
            }
        }
        out
    }
}

/// How the resource version of the next publication is decided, as documented: the version of
/// the last object written or deleted with its final state (if it has one), or the last one set
/// explicitly, whichever came last.
#[derive(Debug, Clone)]
enum PendingRv {
    Object(Option<String>),
    Explicit(String),
}

fn publish(model: &mut Model, pending: usize, rv: Option<PendingRv>) {
    if pending == 0 {
        return;
    }
    match rv {
        Some(PendingRv::Object(Some(rv))) if !rv.is_empty() => model.rv = Some(rv),
        Some(PendingRv::Explicit(rv)) => model.rv = Some(rv),
        _ => {}
    }
    model.publication += 1;
}

/// Runs the operation sequence encoded in `data` against a store and the naive model, checking
/// every published snapshot and every held snapshot. Panics on any difference.
pub fn store_ops(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(setup) = Setup::arbitrary(&mut u) else { return };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 256 {
        match Op::arbitrary(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    if setup.hamt {
        run::<Hamt>(&setup, ops);
    } else {
        run::<Chunked>(&setup, ops);
    }
}

fn run<B: Backend>(setup: &Setup, ops: Vec<Op>) {
    let mut builder = StoreBuilder::new(ObjectAccess::<FObj>::of())
        .backend::<B>()
        .background_reclaim(setup.background_reclaim);
    let mut want_indexes = vec![IndexKind::Namespace];
    let mut duplicate = None;
    for spec in setup.indexes.iter().take(8) {
        if want_indexes.contains(&spec.kind) && duplicate.is_none() {
            duplicate = Some(spec.kind.name());
        }
        want_indexes.push(spec.kind);
        builder = if spec.covering {
            builder.covering_index(spec.kind.name(), spec.kind.index_fn())
        } else {
            builder.index(spec.kind.name(), spec.kind.index_fn())
        };
    }
    let (mut writer, reader) = match (builder.build(), duplicate) {
        (Ok(store), None) => store,
        (Err(e), Some(name)) => {
            assert_eq!(e, Error::IndexExists(name.to_owned()), "build with a duplicate index");
            return;
        }
        (Ok(_), Some(name)) => panic!("build accepted the duplicate index {name:?}"),
        (Err(e), None) => panic!("build failed: {e}"),
    };
    let mut model = Model {
        items: BTreeMap::new(),
        indexes: want_indexes,
        rv: None,
        sequence: 0,
        publication: 0,
    };
    check(&reader.snapshot(), &model);
    let mut held: Vec<(Snapshot<FObj, B>, Model)> = Vec::new();
    for op in ops {
        match op {
            Op::Add(spec) | Op::Update(spec) => {
                let o = spec.make();
                let res = writer.add(Arc::new(o.clone()));
                match model_key(&o) {
                    Ok(_) => {
                        res.unwrap();
                        model.upsert(&o);
                        publish(&mut model, 1, Some(PendingRv::Object(o.rv.clone())));
                    }
                    Err(e) => assert_eq!(res, Err(e), "add without a name"),
                }
            }
            Op::Touch(i, rv) => {
                if model.items.is_empty() {
                    continue;
                }
                let old = model.items.values().nth(usize::from(i) % model.items.len()).unwrap();
                let o = FObj { rv: Some(rv.make("t")), ..old.clone() };
                writer.update(Arc::new(o.clone())).unwrap();
                model.upsert(&o);
                publish(&mut model, 1, Some(PendingRv::Object(o.rv.clone())));
            }
            Op::Delete(spec) => {
                let o = spec.make();
                let res = writer.delete(&o);
                match model_key(&o) {
                    Ok(key) => {
                        let removed = res.unwrap().map(|r| (*r).clone());
                        assert_eq!(
                            removed,
                            model.remove(&key),
                            "delete {key:?} returns the object"
                        );
                        // A delete with the final state reports its version, as an upsert does.
                        publish(&mut model, 1, Some(PendingRv::Object(o.rv.clone())));
                    }
                    Err(e) => assert_eq!(res.map(|_| ()), Err(e), "delete without a name"),
                }
            }
            Op::DeleteKey(k) => {
                let key = model.key_of(&k);
                let removed = writer.delete_key(&key).map(|r| (*r).clone());
                assert_eq!(removed, model.remove(&key), "delete_key {key:?} returns the object");
                publish(&mut model, 1, None);
            }
            Op::Replace(specs, rv) => {
                let objs: Vec<FObj> = specs.iter().take(64).map(ObjSpec::make).collect();
                let rv = rv.make("");
                let res = writer.replace(objs.iter().cloned().map(Arc::new), rv.as_str());
                match objs.iter().map(model_key).find_map(Result::err) {
                    Some(e) => assert_eq!(res, Err(e), "replace with a nameless object"),
                    None => {
                        res.unwrap();
                        model.items.clear();
                        let sequence = model.sequence;
                        for o in &objs {
                            model.upsert(o);
                        }
                        model.sequence = sequence + 1;
                        publish(&mut model, 1, Some(PendingRv::Explicit(rv)));
                    }
                }
            }
            Op::Batch(batch_ops, commit) => {
                let before = reader.snapshot();
                let saved = model.clone();
                let mut pending = 0;
                let mut rv = None;
                let mut batch = writer.batch();
                for bop in batch_ops.iter().take(64) {
                    match bop {
                        BatchOp::Upsert(spec) => {
                            let o = spec.make();
                            let res = batch.upsert(Arc::new(o.clone()));
                            match model_key(&o) {
                                Ok(_) => {
                                    res.unwrap();
                                    model.upsert(&o);
                                    pending += 1;
                                    rv = Some(PendingRv::Object(o.rv.clone()));
                                }
                                Err(e) => assert_eq!(res, Err(e), "batch upsert without a name"),
                            }
                        }
                        BatchOp::Delete(spec) => {
                            let o = spec.make();
                            let res = batch.delete(&o);
                            match model_key(&o) {
                                Ok(key) => {
                                    let removed = res.unwrap().map(|r| (*r).clone());
                                    assert_eq!(removed, model.remove(&key), "batch delete {key:?}");
                                    pending += 1;
                                    rv = Some(PendingRv::Object(o.rv.clone()));
                                }
                                Err(e) => {
                                    assert_eq!(res.map(|_| ()), Err(e), "batch delete without name")
                                }
                            }
                        }
                        BatchOp::DeleteKey(k) => {
                            let key = model.key_of(k);
                            let removed = batch.delete_key(&key).map(|r| (*r).clone());
                            assert_eq!(removed, model.remove(&key), "batch delete_key {key:?}");
                            pending += 1;
                        }
                        BatchOp::SetRv(t) => {
                            let v = t.make("");
                            batch.set_resource_version(v.as_str());
                            pending += 1;
                            rv = Some(PendingRv::Explicit(v));
                        }
                        BatchOp::Get(k) => {
                            let key = model.key_of(k);
                            let got = batch.get_by_key(&key).map(|o| (**o).clone());
                            assert_eq!(got.as_ref(), model.items.get(&key), "batch get {key:?}");
                        }
                    }
                    assert_eq!(batch.len(), pending, "batch len");
                    assert_eq!(batch.is_empty(), pending == 0);
                }
                // Nothing is visible before the batch ends.
                let during = reader.snapshot();
                assert_eq!(during.publication(), before.publication(), "batch published early");
                if commit {
                    batch.commit();
                    publish(&mut model, pending, rv);
                } else {
                    // Discarded: nothing published, nothing kept for the next write.
                    drop(batch);
                    model = saved;
                    let after = reader.snapshot();
                    assert_eq!(
                        after.publication(),
                        before.publication(),
                        "discarded batch published"
                    );
                }
            }
            Op::Apply(changes) => {
                let mut expect_rejected = Vec::new();
                let mut applied = 0;
                let mut rv = None;
                let mut list = Vec::new();
                for (i, c) in changes.iter().take(64).enumerate() {
                    let change = match c {
                        ChangeSpec::Upsert(spec) => {
                            let o = spec.make();
                            match model_key(&o) {
                                Ok(_) => {
                                    model.upsert(&o);
                                    applied += 1;
                                    rv = Some(PendingRv::Object(o.rv.clone()));
                                }
                                Err(e) => expect_rejected.push((i, e)),
                            }
                            Change::Upsert(Arc::new(o))
                        }
                        ChangeSpec::Delete(spec) => {
                            let o = spec.make();
                            match model_key(&o) {
                                Ok(key) => {
                                    model.remove(&key);
                                    applied += 1;
                                    rv = Some(PendingRv::Object(o.rv.clone()));
                                }
                                Err(e) => expect_rejected.push((i, e)),
                            }
                            Change::Delete(Arc::new(o))
                        }
                        ChangeSpec::DeleteKey(k) => {
                            let key = model.key_of(k);
                            model.remove(&key);
                            applied += 1;
                            Change::DeleteKey(key)
                        }
                    };
                    list.push(change);
                }
                let outcome = writer.apply(list);
                assert_eq!(outcome.applied, applied, "apply: applied");
                assert_eq!(outcome.rejected, expect_rejected, "apply: rejected");
                publish(&mut model, applied, rv);
            }
            Op::AddIndexers(specs) => {
                let mut indexers = Indexers::new();
                let mut duplicate = None;
                let mut names: Vec<IndexKind> = model.indexes.clone();
                for spec in specs.iter().take(8) {
                    if names.contains(&spec.kind) && duplicate.is_none() {
                        duplicate = Some(spec.kind.name());
                    }
                    names.push(spec.kind);
                    indexers = if spec.covering {
                        indexers.with_covering(spec.kind.name(), spec.kind.index_fn())
                    } else {
                        indexers.with(spec.kind.name(), spec.kind.index_fn())
                    };
                }
                let res = writer.add_indexers(indexers);
                match duplicate {
                    Some(name) => {
                        assert_eq!(res, Err(Error::IndexExists(name.to_owned())), "add_indexers");
                    }
                    None => {
                        res.unwrap();
                        model.indexes = names;
                        publish(&mut model, 1, None);
                    }
                }
            }
            Op::Resync => writer.resync().unwrap(),
            Op::Hold => {
                if held.len() < 8 {
                    held.push((reader.snapshot(), model.clone()));
                }
            }
            Op::Release(i) => {
                if !held.is_empty() {
                    let (snap, m) = held.remove(usize::from(i) % held.len());
                    check(&snap, &m);
                }
            }
            Op::Query(index, value) => {
                let snap = reader.snapshot();
                let index = index.make("index-");
                let value = value.make("");
                match model.indexes.iter().find(|k| k.name() == index) {
                    Some(kind) => {
                        let want = model.buckets(*kind).remove(&value).unwrap_or_default();
                        let got: BTreeSet<String> = snap
                            .index_keys(&index, &value)
                            .unwrap()
                            .iter()
                            .map(|k| k.to_string())
                            .collect();
                        assert_eq!(got, want, "index_keys {index}={value}");
                    }
                    None => {
                        let known = snap.index_names().join(", ");
                        let not_found = Error::IndexNotFound { name: index.clone(), known };
                        assert_eq!(snap.by_index(&index, &value).err(), Some(not_found.clone()));
                        assert_eq!(snap.index_keys(&index, &value).err(), Some(not_found.clone()));
                        assert_eq!(snap.index_values(&index).err(), Some(not_found));
                    }
                }
            }
        }
        check(&reader.snapshot(), &model);
        check(&writer.snapshot(), &model);
    }
    for (snap, m) in &held {
        check(snap, m);
    }
}

/// Asserts that `snap` answers every read exactly as the model does.
fn check<B: Backend>(snap: &Snapshot<FObj, B>, model: &Model) {
    assert_eq!(snap.len(), model.items.len(), "len");
    assert_eq!(snap.is_empty(), model.items.is_empty(), "is_empty");
    assert_eq!(snap.resource_version(), model.rv.as_deref(), "resource version");
    assert_eq!(snap.sequence(), model.sequence, "sequence");
    assert_eq!(snap.publication(), model.publication, "publication");
    let mut keys: Vec<String> = snap.list_keys().iter().map(|k| k.to_string()).collect();
    keys.sort();
    assert_eq!(keys, model.items.keys().cloned().collect::<Vec<_>>(), "list_keys");
    for (k, o) in &model.items {
        assert_eq!(snap.get_by_key(k).map(|a| &**a), Some(o), "get_by_key {k:?}");
        assert_eq!(snap.get(o).unwrap().map(|a| &**a), Some(o), "get {k:?}");
    }
    let mut entries: Vec<(String, FObj)> =
        snap.entries().map(|(k, v)| (k.to_string(), (**v).clone())).collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(entries.iter().map(|(k, v)| (k, v)).eq(model.items.iter()), "entries");
    assert_eq!(snap.list().len(), model.items.len(), "list");
    assert_eq!(snap.list_refs().len(), model.items.len(), "list_refs");
    assert_eq!(snap.iter().count(), model.items.len(), "iter");
    let names: Vec<&str> = model.indexes.iter().map(|k| k.name()).collect();
    assert_eq!(snap.index_names(), names, "index_names");
    for kind in &model.indexes {
        let index = kind.name();
        let buckets = model.buckets(*kind);
        let values: Vec<String> =
            snap.index_values(index).unwrap().iter().map(|v| v.to_string()).collect();
        assert_eq!(values, buckets.keys().cloned().collect::<Vec<_>>(), "index_values {index}");
        for (value, keys) in &buckets {
            let want: Vec<String> = keys.iter().cloned().collect();
            let got: Vec<String> =
                snap.index_keys(index, value).unwrap().iter().map(|k| k.to_string()).collect();
            assert_eq!(got, want, "index_keys {index}={value:?}");
            let objs = snap.by_index(index, value).unwrap();
            let mut got: Vec<String> = Vec::new();
            for o in &objs {
                let key = model_key(o).expect("stored objects have names");
                assert_eq!(
                    model.items.get(&key),
                    Some(&**o),
                    "by_index {index}={value:?}: current"
                );
                got.push(key);
            }
            got.sort();
            assert_eq!(got, want, "by_index {index}={value:?}");
            assert_eq!(snap.by_index_refs(index, value).unwrap().len(), want.len());
        }
        assert!(snap.by_index(index, "\u{0}no-such-value").unwrap().is_empty());
        // client-go `Index`: the objects sharing any value of a probe object.
        for o in model.items.values().take(4) {
            let mut want: BTreeSet<String> = BTreeSet::new();
            for v in kind.model_values(o) {
                want.extend(buckets.get(&v).into_iter().flatten().cloned());
            }
            let got: Vec<String> =
                snap.index(index, o).unwrap().iter().map(|o| model_key(o).unwrap()).collect();
            assert_eq!(got.len(), want.len(), "index {index}: no duplicates");
            assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want, "index {index}");
        }
    }
    let namespaces: BTreeSet<&str> = model
        .items
        .values()
        .filter_map(|o| o.ns.as_deref())
        .filter(|n| !n.is_empty())
        .chain(["ns-0", "obj-0"])
        .collect();
    for ns in namespaces {
        let mut got: Vec<String> =
            snap.list_namespace(ns).iter().map(|o| model_key(o).unwrap()).collect();
        got.sort();
        let want: Vec<String> = model
            .items
            .iter()
            .filter(|(_, o)| o.ns.as_deref() == Some(ns))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(got, want, "list_namespace {ns:?}");
    }
    assert_eq!(snap.list_namespace("").len(), model.items.len(), "all namespaces");
    let objects: Vec<(&str, Option<&str>, &BTreeMap<String, String>)> =
        model.items.iter().map(|(k, o)| (k.as_str(), o.ns.as_deref(), &o.labels)).collect();
    check_selector_lists(snap, &objects, &["ns-0"], |o| model_key(o).unwrap());
}

/// Asserts that [`Snapshot::list_selected`] and [`Snapshot::select`] answer exactly as a naive
/// filter over `objects` does, for selectors taken from the first objects' labels (each pair
/// alone, each two neighbouring pairs, all of an object's pairs at once), a pair nobody has and
/// the empty selector, in every namespace of `objects`, in `more_namespaces` and in all
/// namespaces at once. `objects` lists every stored object as (key, namespace, labels);
/// `key_of` gives the key of an object the snapshot returns. The store's model tests share it.
pub fn check_selector_lists<T: Send + Sync + 'static, B: Backend>(
    snap: &Snapshot<T, B>,
    objects: &[(&str, Option<&str>, &BTreeMap<String, String>)],
    more_namespaces: &[&str],
    key_of: impl Fn(&T) -> String,
) {
    let mut selectors: Vec<Vec<(&str, &str)>> = vec![vec![], vec![("app", "\u{0}nobody")]];
    for (_, _, labels) in objects.iter().take(6) {
        let pairs: Vec<(&str, &str)> =
            labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        selectors.extend(pairs.iter().map(|p| vec![*p]));
        selectors.extend(pairs.windows(2).map(<[_]>::to_vec));
        selectors.push(pairs);
    }
    let mut scopes: BTreeSet<&str> = objects.iter().filter_map(|(_, ns, _)| *ns).collect();
    scopes.extend(more_namespaces.iter().copied().chain([""]));
    for selector in &selectors {
        for ns in &scopes {
            let mut got: Vec<String> =
                snap.list_selected(ns, selector).iter().map(|o| key_of(o)).collect();
            got.sort();
            let mut want: Vec<String> = objects
                .iter()
                .filter(|(_, o_ns, _)| ns.is_empty() || *o_ns == Some(*ns))
                .filter(|(_, _, labels)| {
                    selector.iter().all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
                })
                .map(|(k, _, _)| (*k).to_owned())
                .collect();
            want.sort();
            assert_eq!(got, want, "list_selected {ns:?} {selector:?}");
            assert_eq!(snap.select(ns, selector).count(), want.len(), "select {ns:?} {selector:?}");
        }
    }
}
