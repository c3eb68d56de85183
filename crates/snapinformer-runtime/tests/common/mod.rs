//! A cluster without a server and a cache that lags on purpose, for the runtime's tests.
#![allow(dead_code, unreachable_pub)]

use std::{
    collections::BTreeMap,
    fmt::Debug,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use k8s_openapi::{
    api::{apps::v1::StatefulSet, core::v1::Pod},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{
    Resource,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    core::Status,
};
use serde::{Serialize, de::DeserializeOwned};
use snapinformer_runtime::{
    Deleted, Handle, ObjectKey, VersionedCache, VisibleVersion, Writes,
    cache::{BoxFuture, Error as CacheError},
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What happened in the cluster, in order, with the object as stored.
#[derive(Debug, Clone)]
pub enum Event<K> {
    Added(K),
    Modified(K),
    Deleted(K),
}

impl<K: Resource> Event<K> {
    pub fn object(&self) -> &K {
        match self {
            Event::Added(o) | Event::Modified(o) | Event::Deleted(o) => o,
        }
    }
}

#[derive(Debug)]
struct ClusterState<K> {
    objects: BTreeMap<String, K>,
    log: Vec<(u64, Event<K>)>,
    creates: usize,
    conflicts: usize,
    fail_next: usize,
}

/// An in-memory cluster of one kind of object: one global resource version that every write
/// advances (as etcd's), 409 AlreadyExists on a create of an existing name, 404 on a missing
/// one, and an event log a test delivers to caches when it chooses.
#[derive(Debug)]
pub struct MemoryCluster<K> {
    rv: Arc<Mutex<u64>>,
    state: Mutex<ClusterState<K>>,
}

fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(Box::new(Status::failure(message, reason).with_code(code)))
}

impl<K: Resource + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static>
    MemoryCluster<K>
{
    /// A cluster sharing the version counter `rv` with others (one etcd for every kind).
    pub fn new(rv: Arc<Mutex<u64>>) -> Arc<Self> {
        Arc::new(MemoryCluster {
            rv,
            state: Mutex::new(ClusterState {
                objects: BTreeMap::new(),
                log: Vec::new(),
                creates: 0,
                conflicts: 0,
                fail_next: 0,
            }),
        })
    }

    fn next_rv(&self) -> u64 {
        let mut rv = lock(&self.rv);
        *rv += 1;
        *rv
    }

    /// Writes for `namespace` (`None`: cluster-scoped).
    pub fn scoped(self: &Arc<Self>, namespace: Option<&str>) -> Scoped<K> {
        Scoped { cluster: self.clone(), namespace: namespace.map(str::to_owned) }
    }

    /// Makes the next `n` writes fail with a 500.
    pub fn fail_next(&self, n: usize) {
        lock(&self.state).fail_next = n;
    }

    /// Successful creates so far.
    pub fn creates(&self) -> usize {
        lock(&self.state).creates
    }

    /// Creates answered 409 AlreadyExists so far.
    pub fn conflicts(&self) -> usize {
        lock(&self.state).conflicts
    }

    /// The objects stored now, by key.
    pub fn objects(&self) -> BTreeMap<String, K> {
        lock(&self.state).objects.clone()
    }

    /// Events with a version above `after`.
    pub fn events_after(&self, after: u64) -> Vec<(u64, Event<K>)> {
        lock(&self.state).log.iter().filter(|(rv, _)| *rv > after).cloned().collect()
    }

    /// Stores `obj` directly (as another client would), returning it as stored.
    pub fn insert(&self, mut obj: K) -> K {
        let rv = self.next_rv();
        obj.meta_mut().resource_version = Some(rv.to_string());
        let key = ObjectKey::of(&obj).unwrap().to_string();
        let mut st = lock(&self.state);
        let ev = if st.objects.contains_key(&key) {
            Event::Modified(obj.clone())
        } else {
            Event::Added(obj.clone())
        };
        st.objects.insert(key, obj.clone());
        st.log.push((rv, ev));
        obj
    }

    fn check_failure(&self) -> kube::Result<()> {
        let mut st = lock(&self.state);
        if st.fail_next > 0 {
            st.fail_next -= 1;
            return Err(api_error(500, "InternalError", "injected failure"));
        }
        Ok(())
    }

    fn key(ns: &Option<String>, name: &str) -> String {
        ObjectKey::new(ns.as_deref(), name).to_string()
    }
}

/// The writes of a [`MemoryCluster`] in one namespace.
#[derive(Debug, Clone)]
pub struct Scoped<K> {
    cluster: Arc<MemoryCluster<K>>,
    namespace: Option<String>,
}

impl<K> Writes<K> for Scoped<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    async fn create(&self, _pp: &PostParams, obj: &K) -> kube::Result<K> {
        self.cluster.check_failure()?;
        let mut obj = obj.clone();
        obj.meta_mut().namespace.clone_from(&self.namespace);
        let name = obj.meta().name.clone().expect("a name");
        let key = MemoryCluster::<K>::key(&self.namespace, &name);
        let mut st = lock(&self.cluster.state);
        if st.objects.contains_key(&key) {
            st.conflicts += 1;
            return Err(api_error(409, "AlreadyExists", &format!("{key} already exists")));
        }
        let rv = self.cluster.next_rv();
        obj.meta_mut().resource_version = Some(rv.to_string());
        obj.meta_mut().uid = Some(format!("uid-{rv}"));
        st.objects.insert(key, obj.clone());
        st.log.push((rv, Event::Added(obj.clone())));
        st.creates += 1;
        Ok(obj)
    }

    async fn replace(&self, name: &str, _pp: &PostParams, obj: &K) -> kube::Result<K> {
        self.cluster.check_failure()?;
        let key = MemoryCluster::<K>::key(&self.namespace, name);
        let mut st = lock(&self.cluster.state);
        let Some(current) = st.objects.get(&key) else {
            return Err(api_error(404, "NotFound", &key));
        };
        if obj.meta().resource_version.is_some()
            && obj.meta().resource_version != current.meta().resource_version
        {
            return Err(api_error(409, "Conflict", "the object has been modified"));
        }
        let mut obj = obj.clone();
        let rv = self.cluster.next_rv();
        obj.meta_mut().resource_version = Some(rv.to_string());
        st.objects.insert(key, obj.clone());
        st.log.push((rv, Event::Modified(obj.clone())));
        Ok(obj)
    }

    async fn replace_status(&self, name: &str, pp: &PostParams, obj: &K) -> kube::Result<K> {
        self.replace(name, pp, obj).await
    }

    async fn patch<P: Serialize + Debug + Send + Sync>(
        &self,
        name: &str,
        _pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<K> {
        self.cluster.check_failure()?;
        let Patch::Merge(p) = patch else {
            panic!("the memory cluster applies merge patches only")
        };
        let key = MemoryCluster::<K>::key(&self.namespace, name);
        let mut st = lock(&self.cluster.state);
        let Some(current) = st.objects.get(&key) else {
            return Err(api_error(404, "NotFound", &key));
        };
        let mut doc = serde_json::to_value(current).unwrap();
        json_patch::merge(&mut doc, &serde_json::to_value(p).unwrap());
        let mut obj: K = serde_json::from_value(doc).unwrap();
        let rv = self.cluster.next_rv();
        obj.meta_mut().resource_version = Some(rv.to_string());
        st.objects.insert(key, obj.clone());
        st.log.push((rv, Event::Modified(obj.clone())));
        Ok(obj)
    }

    async fn patch_status<P: Serialize + Debug + Send + Sync>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<K> {
        self.patch(name, pp, patch).await
    }

    async fn delete(&self, name: &str, _dp: &DeleteParams) -> kube::Result<Deleted<K>> {
        self.cluster.check_failure()?;
        let key = MemoryCluster::<K>::key(&self.namespace, name);
        let mut st = lock(&self.cluster.state);
        let Some(mut obj) = st.objects.remove(&key) else {
            return Err(api_error(404, "NotFound", &key));
        };
        let rv = self.cluster.next_rv();
        obj.meta_mut().resource_version = Some(rv.to_string());
        st.log.push((rv, Event::Deleted(obj.clone())));
        Ok(Deleted::Object(obj))
    }
}

/// A cache that shows exactly what the test delivered to it, at the version of the last event
/// delivered: it lags the cluster for as long as the test wants.
#[derive(Debug)]
pub struct LaggingCache<K> {
    objects: Mutex<BTreeMap<String, Arc<K>>>,
    version: VisibleVersion,
}

impl<K: Resource + Clone + Send + Sync + 'static> LaggingCache<K> {
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(LaggingCache {
            objects: Mutex::new(BTreeMap::new()),
            version: VisibleVersion::new(name),
        })
    }

    /// Applies one cluster event and shows its version.
    pub fn apply(&self, rv: u64, event: &Event<K>) {
        let key = ObjectKey::of(event.object()).unwrap().to_string();
        {
            let mut objects = lock(&self.objects);
            match event {
                Event::Added(o) | Event::Modified(o) => {
                    objects.insert(key, Arc::new(o.clone()));
                }
                Event::Deleted(_) => {
                    objects.remove(&key);
                }
            }
        }
        self.version.advance(rv);
    }

    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        lock(&self.objects).get(key).cloned()
    }

    pub fn list(&self) -> Vec<Arc<K>> {
        lock(&self.objects).values().cloned().collect()
    }

    pub fn version(&self) -> u64 {
        self.version.visible_version().unwrap_or(0)
    }
}

impl<K: Send + Sync + 'static> VersionedCache for LaggingCache<K> {
    fn name(&self) -> &str {
        self.version.name()
    }

    fn visible_version(&self) -> Option<u64> {
        self.version.visible_version()
    }

    fn wait_for_version(
        &self,
        version: u64,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<(), CacheError>> {
        self.version.wait_for_version(version, timeout)
    }
}

/// Delivers the pod events after `*delivered` to `cache` and, as a custom event source, to the
/// controller behind `handle`; returns how many were delivered.
pub fn deliver<P>(
    cluster: &MemoryCluster<Pod>,
    cache: &LaggingCache<Pod>,
    handle: &Handle<P>,
    delivered: &mut u64,
) -> usize {
    let events = cluster.events_after(*delivered);
    for (rv, ev) in &events {
        let old = ObjectKey::of(ev.object()).and_then(|k| cache.get(k.as_str()));
        cache.apply(*rv, ev);
        match (ev, old) {
            (Event::Added(p), _) => handle.owned_added(p),
            (Event::Modified(p), Some(old)) => handle.owned_updated(&*old, p),
            (Event::Modified(p), None) => handle.owned_added(p),
            (Event::Deleted(p), _) => handle.owned_deleted(p),
        }
        *delivered = *rv;
    }
    events.len()
}

/// A StatefulSet `ns/name` with `replicas`, as stored (uid `uid-<name>`).
pub fn statefulset(ns: &str, name: &str, replicas: i32) -> StatefulSet {
    StatefulSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(k8s_openapi::api::apps::v1::StatefulSetSpec {
            replicas: Some(replicas),
            ..Default::default()
        }),
        status: None,
    }
}

/// A pod `ns/name` controlled by the object of `kind` named `owner` (or by nobody).
pub fn pod(ns: &str, name: &str, owner: Option<(&str, &str)>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            owner_references: owner.map(|(kind, owner)| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: kind.into(),
                    name: owner.into(),
                    uid: format!("uid-{owner}"),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The ordinal of a pod named `<set>-<n>`.
pub fn ordinal(pod: &Pod, set: &str) -> Option<usize> {
    pod.metadata.name.as_deref()?.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

/// Fails the test if `fut` does not finish within 20 s of real time (a deadlock).
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 20 s"))
}
