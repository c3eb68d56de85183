//! A small object type and naive model shared by the store's integration tests.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet},
};

use snapinformer_store::{Backend, IndexFn, Indexers, Object, ObjectAccess, OwnerUids, Snapshot};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TObj {
    pub name: String,
    pub ns: Option<String>,
    pub rv: String,
    pub node: String,
    pub owners: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

impl Object for TObj {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        self.ns.as_deref()
    }
    fn resource_version(&self) -> Option<&str> {
        Some(&self.rv)
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        Some(&self.labels)
    }
    fn owner_uids(&self) -> OwnerUids<'_> {
        self.owners.iter().map(String::as_str).collect()
    }
}

impl TObj {
    pub fn key(&self) -> String {
        match &self.ns {
            Some(ns) if !ns.is_empty() => format!("{ns}/{}", self.name),
            _ => self.name.clone(),
        }
    }
}

pub fn access() -> ObjectAccess<TObj> {
    ObjectAccess::of()
}

/// The indexes every test store has besides the namespace one.
pub fn base_indexers() -> Indexers<TObj> {
    Indexers::new()
        .with("node", IndexFn::field(|o: &TObj| Some(o.node.as_str())))
        .with_covering("owner", IndexFn::owner_uid(access()))
}

/// A multi-valued index added later in some tests: one bucket per label value and one per key.
pub fn label_indexers() -> Indexers<TObj> {
    Indexers::new().with("app", IndexFn::label(access(), "app")).with(
        "labelpairs",
        IndexFn::new(|o: &TObj| {
            o.labels.iter().map(|(k, v)| Cow::Owned(format!("{k}={v}"))).collect()
        }),
    )
}

/// Naive index values, written independently of the store's helpers.
pub fn model_values(index: &str, o: &TObj) -> Vec<String> {
    match index {
        "namespace" => vec![o.ns.clone().unwrap_or_default()],
        "node" => {
            if o.node.is_empty() {
                vec![]
            } else {
                vec![o.node.clone()]
            }
        }
        "owner" => o.owners.clone(),
        "app" => o.labels.get("app").cloned().into_iter().collect(),
        "labelpairs" => o.labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        other => panic!("unknown index {other}"),
    }
}

/// The naive model: a sorted map and the list of registered index names.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub items: BTreeMap<String, TObj>,
    pub indexes: Vec<String>,
    pub rv: Option<String>,
}

impl Model {
    pub fn new() -> Self {
        Model {
            items: BTreeMap::new(),
            indexes: vec!["namespace".into(), "node".into(), "owner".into()],
            rv: None,
        }
    }

    fn buckets(&self, index: &str) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (k, o) in &self.items {
            for v in model_values(index, o) {
                out.entry(v).or_default().insert(k.clone());
            }
        }
        out
    }
}

/// Asserts that `snap` answers every read exactly as the model does.
pub fn check<B: Backend>(snap: &Snapshot<TObj, B>, model: &Model) {
    assert_eq!(snap.len(), model.items.len(), "len");
    assert_eq!(snap.resource_version(), model.rv.as_deref(), "resource version");
    let mut keys: Vec<String> = snap.list_keys().iter().map(|k| k.to_string()).collect();
    keys.sort();
    assert_eq!(keys, model.items.keys().cloned().collect::<Vec<_>>(), "list_keys");
    for (k, o) in &model.items {
        assert_eq!(snap.get_by_key(k).map(|a| &**a), Some(o), "get_by_key {k}");
        assert_eq!(snap.get(o).unwrap().map(|a| &**a), Some(o), "get {k}");
    }
    assert_eq!(snap.list().len(), model.items.len());
    assert_eq!(snap.list_refs().len(), model.items.len());
    assert_eq!(snap.index_names(), model.indexes.iter().map(String::as_str).collect::<Vec<_>>());
    for index in &model.indexes {
        let buckets = model.buckets(index);
        let values: Vec<String> =
            snap.index_values(index).unwrap().iter().map(|v| v.to_string()).collect();
        assert_eq!(values, buckets.keys().cloned().collect::<Vec<_>>(), "index_values {index}");
        for (value, keys) in &buckets {
            let got: Vec<String> =
                snap.index_keys(index, value).unwrap().iter().map(|k| k.to_string()).collect();
            assert_eq!(got, keys.iter().cloned().collect::<Vec<_>>(), "index_keys {index}={value}");
            let objs = snap.by_index(index, value).unwrap();
            for o in &objs {
                let current = model.items.get(&o.key());
                assert_eq!(current, Some(&**o), "by_index {index}={value} returns current objects");
            }
            let mut objs: Vec<String> = objs.iter().map(|o| o.key()).collect();
            objs.sort();
            assert_eq!(objs, got, "by_index {index}={value}");
            assert_eq!(snap.by_index_refs(index, value).unwrap().len(), got.len());
        }
        assert!(snap.by_index(index, "no-such-value").unwrap().is_empty());
    }
    let namespaces: BTreeSet<&String> =
        model.items.values().filter_map(|o| o.ns.as_ref()).collect();
    for ns in namespaces {
        let objs = snap.list_namespace(ns);
        for o in &objs {
            assert_eq!(
                model.items.get(&o.key()),
                Some(&**o),
                "list_namespace {ns} returns current objects"
            );
        }
        let mut got: Vec<String> = objs.iter().map(|o| o.key()).collect();
        got.sort();
        let want: Vec<String> = model
            .items
            .iter()
            .filter(|(_, o)| o.ns.as_ref() == Some(ns))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(got, want, "list_namespace {ns}");
    }
    assert_eq!(snap.list_namespace("").len(), model.items.len(), "all namespaces");
    let objects: Vec<(&str, Option<&str>, &BTreeMap<String, String>)> =
        model.items.iter().map(|(k, o)| (k.as_str(), o.ns.as_deref(), &o.labels)).collect();
    snapinformer_store::fuzzing::check_selector_lists(snap, &objects, &[], TObj::key);
}

/// Polls `cond` every millisecond until it holds; fails after ten seconds, naming `what`.
pub fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
