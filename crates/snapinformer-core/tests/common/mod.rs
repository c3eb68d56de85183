//! Test objects and helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use snapinformer_store::{Object, ObjectAccess, Reader, StoreBuilder, Writer};

/// A namespaced test object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obj {
    pub ns: String,
    pub name: String,
    pub rv: String,
    pub labels: BTreeMap<String, String>,
}

impl Object for Obj {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        Some(&self.ns)
    }
    fn resource_version(&self) -> Option<&str> {
        Some(&self.rv)
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        Some(&self.labels)
    }
}

pub fn access() -> ObjectAccess<Obj> {
    ObjectAccess::of()
}

/// `default/<name>` at resource version `rv`.
pub fn obj(name: &str, rv: u64) -> Arc<Obj> {
    Arc::new(Obj {
        ns: "default".into(),
        name: name.into(),
        rv: rv.to_string(),
        labels: BTreeMap::new(),
    })
}

/// Same, with labels.
pub fn labeled(name: &str, rv: u64, labels: &[(&str, &str)]) -> Arc<Obj> {
    Arc::new(Obj {
        ns: "default".into(),
        name: name.into(),
        rv: rv.to_string(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    })
}

pub fn key(name: &str) -> String {
    format!("default/{name}")
}

/// A store holding `names` (resource version 1), to serve as the queue's known objects.
pub fn known_store(names: &[&str]) -> (Writer<Obj>, Reader<Obj>) {
    let (mut w, r) = StoreBuilder::new(access()).build().unwrap();
    for n in names {
        w.add(obj(n, 1)).unwrap();
    }
    (w, r)
}

/// Yields to the runtime (without advancing a paused clock) until `cond` holds; panics after
/// two seconds of real time.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(5), "timed out waiting for: {what}");
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_micros(200));
    }
}
