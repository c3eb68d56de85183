//! kube-rs' reflector store as a cache under test: the `kube-rs` row.
//!
//! `kube_runtime::reflector::Store` itself, fed through its `Writer` with `apply_watcher_event`
//! (which copies each object into its own `Arc` and write-locks per event) and read with
//! `state()` and `state_filter` (it has no index, so index lookups filter the full list).
//!
//! A kube-rs user's reflector receives each object decoded from the watch, owned, and
//! `apply_watcher_event` copies it once. Here the harness hands every object over uniquely owned
//! (the watch's copy), so moving it into the event costs nothing and the store's own copy is
//! the only one; a shared object would have to be copied first, which
//! [`CacheWriter::extra_copies`] counts.

use std::{
    any::Any,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{reflector, watcher};

use super::{CacheReader, CacheWriter, OnVisible, SimChange, label_is, owned_by};
use crate::pods::pod_node;

/// kube-rs' store writer.
pub struct KubeRsStore {
    writer: reflector::store::Writer<Pod>,
    extra_copies: AtomicU64,
}

impl KubeRsStore {
    /// An empty store.
    pub fn new() -> Self {
        KubeRsStore { writer: reflector::store::Writer::default(), extra_copies: AtomicU64::new(0) }
    }

    /// The object of `pod`, moved out when this is its only owner, copied (and counted)
    /// otherwise.
    fn owned(&self, pod: Arc<Pod>) -> Pod {
        Arc::try_unwrap(pod).unwrap_or_else(|shared| {
            self.extra_copies.fetch_add(1, Ordering::Relaxed);
            Pod::clone(&shared)
        })
    }
}

impl Default for KubeRsStore {
    fn default() -> Self {
        Self::new()
    }
}

impl CacheWriter for KubeRsStore {
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: OnVisible<'_>) {
        let mut done = 0;
        for change in changes {
            let event = match change {
                SimChange::Upsert(pod) => watcher::Event::Apply(self.owned(pod)),
                SimChange::Delete(key, last) => watcher::Event::Delete(match last {
                    Some(pod) => self.owned(pod),
                    None => pod_for_key(&key),
                }),
            };
            self.writer.apply_watcher_event(&event);
            done += 1;
            visible(done, Instant::now());
        }
    }

    fn reader(&self) -> Arc<dyn CacheReader> {
        Arc::new(KubeRsReader(self.writer.as_reader()))
    }

    fn extra_copies(&self) -> u64 {
        self.extra_copies.load(Ordering::Relaxed)
    }
}

/// A pod that carries only the name and namespace of `key` (`namespace/name`): what kube-rs'
/// store needs to delete an object whose last state is unknown.
fn pod_for_key(key: &str) -> Pod {
    let (ns, name) = key.split_once('/').map_or((None, key), |(ns, n)| (Some(ns), n));
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.namespace = ns.map(str::to_owned);
    pod
}

struct KubeRsReader(reflector::Store<Pod>);

impl CacheReader for KubeRsReader {
    fn list_all(&self) -> Vec<Arc<Pod>> {
        self.0.state()
    }
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        self.0.state_filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns) && label_is(p, key, value)
        })
    }
    fn by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.0.state_filter(|p| owned_by(p, uid))
    }
    fn by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.0.state_filter(|p| pod_node(p) == Some(node))
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        let (ns, name) = key.split_once('/').map_or((None, key), |(ns, n)| (Some(ns), n));
        let mut object_ref = reflector::ObjectRef::<Pod>::new(name);
        if let Some(ns) = ns {
            object_ref = object_ref.within(ns);
        }
        self.0.get(&object_ref)
    }
    fn hold(&self) -> Box<dyn Any + Send> {
        Box::new(self.0.state())
    }
}
