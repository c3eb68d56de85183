//! The object store: one global, strictly increasing resourceVersion (as etcd's revision), one
//! persistent ordered map per kind (so a list takes an O(1) snapshot), and a bounded history of
//! events that feeds every watch and lets lists be served at an older exact resourceVersion.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use imbl::OrdMap;
use serde_json::Value;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::resource::{ResourceKind, field_values, labels_of};
use crate::selector::{FieldSelector, LabelSelector};

/// Namespace and name of an object (`""` namespace for cluster-scoped kinds).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ObjKey {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl ObjKey {
    pub(crate) fn new(namespace: &str, name: &str) -> Self {
        Self { namespace: namespace.to_owned(), name: name.to_owned() }
    }
}

/// One stored object: its JSON encoded once, plus what selectors need.
#[derive(Debug)]
pub(crate) struct StoredObject {
    pub(crate) key: ObjKey,
    pub(crate) rv: u64,
    pub(crate) uid: String,
    pub(crate) json: Bytes,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) fields: Box<[String]>,
    /// The object's protobuf message (no envelope), encoded at most once, when a protobuf
    /// watcher first needs it.
    pub(crate) proto: std::sync::OnceLock<Option<Bytes>>,
}

impl StoredObject {
    /// Stamps `rv` into `metadata.resourceVersion` and encodes the object.
    fn build(kind: ResourceKind, key: ObjKey, mut value: Value, rv: u64) -> Result<Self, ApiError> {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let uid = value.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_owned();
        let labels = labels_of(&value);
        let fields = field_values(kind, &value);
        let json = serde_json::to_vec(&value).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(Self {
            key,
            rv,
            uid,
            json: Bytes::from(json),
            labels,
            fields,
            proto: std::sync::OnceLock::new(),
        })
    }

    /// The object as an enveloped protobuf object of `kind` (`None` if it does not encode,
    /// which a stored object always does).
    pub(crate) fn protobuf(&self, kind: ResourceKind) -> Option<Vec<u8>> {
        let raw = self.proto.get_or_init(|| {
            crate::protobuf::encode_message(&crate::protobuf::message_of(kind), &self.value())
                .ok()
                .map(Bytes::from)
        });
        raw.as_ref().map(|raw| crate::protobuf::envelope(kind.api_version(), kind.kind(), raw))
    }

    /// The object decoded again.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// Whether the object passes a watch/list filter.
    pub(crate) fn matches(&self, filter: &Filter) -> bool {
        if let Some(ns) = &filter.namespace
            && *ns != self.key.namespace
        {
            return false;
        }
        filter.labels.matches(&self.labels)
            && filter.fields.matches(&self.key.name, &self.key.namespace, &self.fields)
    }
}

/// Namespace, label and field restrictions of a list or watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
}

/// Watch event types stored in the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change. `prev` is the object before the change (for undo and for selector
/// transitions); for deletions `obj` is the last state stamped with the deletion's version.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) kind: ResourceKind,
    pub(crate) etype: EventType,
    pub(crate) obj: Arc<StoredObject>,
    pub(crate) prev: Option<Arc<StoredObject>>,
}

/// A persistent ordered map of one kind's objects.
pub(crate) type ObjectMap = OrdMap<ObjKey, Arc<StoredObject>>;

/// Why a snapshot at a given version cannot be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VersionError {
    /// Older than the history; carries the oldest version still available.
    TooOld(u64),
    /// Newer than the store; carries the current version.
    TooLarge(u64),
}

/// Why a compare-and-swap replace failed.
#[derive(Debug)]
pub(crate) enum ReplaceError {
    NotFound,
    Stale,
    Api(ApiError),
}

struct Inner {
    rv: u64,
    maps: [ObjectMap; ResourceKind::ALL.len()],
    history: VecDeque<Arc<Event>>,
    /// Version of `history[0]`; `rv + 1` when the history is empty.
    history_start: u64,
    capacity: usize,
    /// Recently served or rebuilt past snapshots (for the pages of a paginated list), newest
    /// last. Only used while their version is still inside the history.
    snapshots: VecDeque<(ResourceKind, u64, ObjectMap)>,
}

/// Past snapshots kept for continue tokens.
const SNAPSHOT_CACHE: usize = 16;

impl Inner {
    fn remember(&mut self, kind: ResourceKind, rv: u64, map: ObjectMap) {
        if self.snapshots.iter().any(|(k, v, _)| *k == kind && *v == rv) {
            return;
        }
        if self.snapshots.len() == SNAPSHOT_CACHE {
            self.snapshots.pop_front();
        }
        self.snapshots.push_back((kind, rv, map));
    }

    fn push(&mut self, event: Event) {
        if self.history.is_empty() {
            self.history_start = event.rv;
        }
        self.history.push_back(Arc::new(event));
        while self.history.len() > self.capacity {
            self.history.pop_front();
            self.history_start += 1;
        }
    }

    fn commit(
        &mut self,
        kind: ResourceKind,
        key: ObjKey,
        value: Value,
        etype: EventType,
        prev: Option<Arc<StoredObject>>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let rv = self.rv + 1;
        let obj = Arc::new(StoredObject::build(kind, key.clone(), value, rv)?);
        self.rv = rv;
        let map = &mut self.maps[kind.index()];
        if etype == EventType::Deleted {
            map.remove(&key);
        } else {
            map.insert(key, obj.clone());
        }
        self.push(Event { rv, kind, etype, obj: obj.clone(), prev });
        Ok(obj)
    }

    fn namespace_exists(&self, namespace: &str) -> bool {
        self.maps[ResourceKind::Namespace.index()].contains_key(&ObjKey::new("", namespace))
    }
}

/// The shared store.
pub(crate) struct Store {
    inner: Mutex<Inner>,
    rv_tx: watch::Sender<u64>,
    epoch_tx: watch::Sender<u64>,
}

/// Namespaces every cluster has from the start.
pub(crate) const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

impl Store {
    /// An empty store keeping `capacity` events of history, holding the initial namespaces.
    pub(crate) fn new(capacity: usize) -> Self {
        let inner = Inner {
            rv: 0,
            maps: Default::default(),
            history: VecDeque::new(),
            history_start: 1,
            capacity: capacity.max(1),
            snapshots: VecDeque::new(),
        };
        let store = Self {
            inner: Mutex::new(inner),
            rv_tx: watch::channel(0).0,
            epoch_tx: watch::channel(0).0,
        };
        for ns in INITIAL_NAMESPACES {
            let value = crate::objects::new_namespace_value(ns);
            // Fresh store: cannot fail.
            let _ = store.create(ResourceKind::Namespace, value);
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn publish(&self, rv: u64) {
        self.rv_tx.send_replace(rv);
    }

    /// The current (latest committed) resourceVersion.
    pub(crate) fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Receivers of the latest version and of the restart epoch.
    pub(crate) fn subscribe(&self) -> (watch::Receiver<u64>, watch::Receiver<u64>) {
        (self.rv_tx.subscribe(), self.epoch_tx.subscribe())
    }

    /// Reads one object.
    pub(crate) fn get(&self, kind: ResourceKind, key: &ObjKey) -> Option<Arc<StoredObject>> {
        self.lock().maps[kind.index()].get(key).cloned()
    }

    /// O(1) snapshot of a kind at the current version.
    pub(crate) fn snapshot(&self, kind: ResourceKind) -> (ObjectMap, u64) {
        let inner = self.lock();
        (inner.maps[kind.index()].clone(), inner.rv)
    }

    /// Snapshot of a kind as it was at exactly `rv`, rebuilt by undoing later history.
    pub(crate) fn snapshot_at(
        &self,
        kind: ResourceKind,
        rv: u64,
    ) -> Result<ObjectMap, VersionError> {
        let (mut map, events) = {
            let inner = self.lock();
            if rv > inner.rv {
                return Err(VersionError::TooLarge(inner.rv));
            }
            if rv + 1 < inner.history_start {
                return Err(VersionError::TooOld(inner.history_start - 1));
            }
            if rv == inner.rv {
                return Ok(inner.maps[kind.index()].clone());
            }
            if let Some((_, _, map)) =
                inner.snapshots.iter().find(|(k, v, _)| *k == kind && *v == rv)
            {
                return Ok(map.clone());
            }
            let skip = (rv + 1 - inner.history_start) as usize;
            let events: Vec<Arc<Event>> =
                inner.history.range(skip..).filter(|e| e.kind == kind).cloned().collect();
            (inner.maps[kind.index()].clone(), events)
        };
        for event in events.iter().rev() {
            match (&event.etype, &event.prev) {
                (EventType::Added, _) | (_, None) => {
                    map.remove(&event.obj.key);
                }
                (_, Some(prev)) => {
                    map.insert(prev.key.clone(), prev.clone());
                }
            }
        }
        self.lock().remember(kind, rv, map.clone());
        Ok(map)
    }

    /// Keeps `map` as the snapshot of `kind` at `rv`, so that the next pages of a paginated
    /// list are served from it in O(1) instead of being rebuilt from history.
    pub(crate) fn remember_snapshot(&self, kind: ResourceKind, rv: u64, map: ObjectMap) {
        self.lock().remember(kind, rv, map);
    }

    /// Waits until the store reaches `rv`, for at most `timeout`.
    pub(crate) async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> bool {
        let mut rx = self.rv_tx.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|current| *current >= rv)).await.is_ok()
    }

    /// History events after `cursor`, at most `max`; `Err(oldest)` when `cursor` is compacted.
    pub(crate) fn events_after(&self, cursor: u64, max: usize) -> Result<Vec<Arc<Event>>, u64> {
        let inner = self.lock();
        if cursor + 1 < inner.history_start {
            return Err(inner.history_start - 1);
        }
        let skip = (cursor + 1 - inner.history_start) as usize;
        let end = (skip + max).min(inner.history.len());
        Ok(inner.history.range(skip.min(end)..end).cloned().collect())
    }

    /// Creates an object; its key comes from `metadata`. 409 if it exists, 404 if its
    /// namespace does not.
    pub(crate) fn create(
        &self,
        kind: ResourceKind,
        value: Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let key = key_of(kind, &value);
        let obj = {
            let mut inner = self.lock();
            if kind.namespaced() && !inner.namespace_exists(&key.namespace) {
                return Err(ApiError::not_found("", "namespaces", &key.namespace));
            }
            if inner.maps[kind.index()].contains_key(&key) {
                return Err(ApiError::already_exists(kind.group(), kind.plural(), &key.name));
            }
            inner.commit(kind, key, value, EventType::Added, None)?
        };
        self.publish(obj.rv);
        Ok(obj)
    }

    /// Creates many objects under one lock. All or nothing: if any key exists (or appears
    /// twice) nothing is written. Missing namespaces are created first.
    pub(crate) fn bulk_create(
        &self,
        kind: ResourceKind,
        values: Vec<Value>,
    ) -> Result<u64, ApiError> {
        let keyed: Vec<(ObjKey, Value)> =
            values.into_iter().map(|v| (key_of(kind, &v), v)).collect();
        let rv = {
            let mut inner = self.lock();
            let map = &inner.maps[kind.index()];
            let mut seen = std::collections::HashSet::with_capacity(keyed.len());
            for (key, _) in &keyed {
                if key.name.is_empty() {
                    return Err(ApiError::invalid(
                        kind.kind(),
                        "",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    ));
                }
                if map.contains_key(key) || !seen.insert(key) {
                    return Err(ApiError::already_exists(kind.group(), kind.plural(), &key.name));
                }
            }
            if kind.namespaced() {
                let missing: std::collections::BTreeSet<String> = keyed
                    .iter()
                    .filter(|(k, _)| !inner.namespace_exists(&k.namespace))
                    .map(|(k, _)| k.namespace.clone())
                    .collect();
                for ns in missing {
                    let value = crate::objects::new_namespace_value(&ns);
                    inner.commit(
                        ResourceKind::Namespace,
                        ObjKey::new("", &ns),
                        value,
                        EventType::Added,
                        None,
                    )?;
                }
            }
            for (key, value) in keyed {
                inner.commit(kind, key, value, EventType::Added, None)?;
            }
            inner.rv
        };
        self.publish(rv);
        Ok(rv)
    }

    /// Replaces the object at `key` if its stored version is still `expected_rv`.
    pub(crate) fn replace(
        &self,
        kind: ResourceKind,
        key: &ObjKey,
        expected_rv: u64,
        value: Value,
    ) -> Result<Arc<StoredObject>, ReplaceError> {
        let obj = {
            let mut inner = self.lock();
            let Some(prev) = inner.maps[kind.index()].get(key).cloned() else {
                return Err(ReplaceError::NotFound);
            };
            if prev.rv != expected_rv {
                return Err(ReplaceError::Stale);
            }
            inner
                .commit(kind, key.clone(), value, EventType::Modified, Some(prev))
                .map_err(ReplaceError::Api)?
        };
        self.publish(obj.rv);
        Ok(obj)
    }

    /// Deletes an object at once. `precondition` holds an expected uid and/or resourceVersion.
    /// Deleting a namespace deletes everything in it.
    pub(crate) fn delete(
        &self,
        kind: ResourceKind,
        key: &ObjKey,
        uid: Option<&str>,
        rv: Option<u64>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let obj = {
            let mut inner = self.lock();
            let Some(prev) = inner.maps[kind.index()].get(key).cloned() else {
                return Err(ApiError::not_found(kind.group(), kind.plural(), &key.name));
            };
            if let Some(uid) = uid
                && uid != prev.uid
            {
                return Err(ApiError::conflict(
                    kind.group(),
                    kind.plural(),
                    &key.name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        prev.uid
                    ),
                ));
            }
            if let Some(rv) = rv
                && rv != prev.rv
            {
                return Err(ApiError::conflict(
                    kind.group(),
                    kind.plural(),
                    &key.name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        prev.rv
                    ),
                ));
            }
            if kind == ResourceKind::Namespace {
                for child in ResourceKind::ALL.into_iter().filter(|k| k.namespaced()) {
                    let victims: Vec<Arc<StoredObject>> = inner.maps[child.index()]
                        .range(ObjKey::new(&key.name, "")..)
                        .take_while(|(k, _)| k.namespace == key.name)
                        .map(|(_, v)| v.clone())
                        .collect();
                    for victim in victims {
                        inner.commit(
                            child,
                            victim.key.clone(),
                            victim.value(),
                            EventType::Deleted,
                            Some(victim.clone()),
                        )?;
                    }
                }
            }
            inner.commit(kind, key.clone(), prev.value(), EventType::Deleted, Some(prev))?
        };
        self.publish(obj.rv);
        Ok(obj)
    }

    /// Drops the whole history (a restart onto a compacted etcd): watches from any earlier
    /// version now get 410, and every open watch stream is ended.
    pub(crate) fn compact(&self) {
        {
            let mut inner = self.lock();
            inner.history.clear();
            inner.snapshots.clear();
            inner.history_start = inner.rv + 1;
        }
        self.epoch_tx.send_modify(|epoch| *epoch += 1);
    }

    /// Ends every open watch stream without touching the data (server shutdown).
    pub(crate) fn end_watches(&self) {
        self.epoch_tx.send_modify(|epoch| *epoch += 1);
    }
}

/// The key of an object value (namespace only for namespaced kinds).
pub(crate) fn key_of(kind: ResourceKind, value: &Value) -> ObjKey {
    let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let namespace = if kind.namespaced() {
        value.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("")
    } else {
        ""
    };
    ObjKey::new(namespace, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "default", "uid": name}})
    }

    #[test]
    fn every_write_gets_the_next_resource_version() {
        let store = Store::new(100);
        let start = store.current_rv();
        let a = store.create(ResourceKind::Pod, pod("a")).unwrap();
        let b = store.create(ResourceKind::Pod, pod("b")).unwrap();
        assert_eq!(a.rv, start + 1);
        assert_eq!(b.rv, start + 2);
        let deleted = store.delete(ResourceKind::Pod, &a.key, None, None).unwrap();
        assert_eq!(deleted.rv, start + 3);
        assert_eq!(deleted.value()["metadata"]["resourceVersion"], json!((start + 3).to_string()));
    }

    #[test]
    fn snapshot_at_an_older_version_undoes_later_changes() {
        let store = Store::new(100);
        let a = store.create(ResourceKind::Pod, pod("a")).unwrap();
        let at = a.rv;
        store.create(ResourceKind::Pod, pod("b")).unwrap();
        store.delete(ResourceKind::Pod, &a.key, None, None).unwrap();
        let old = store.snapshot_at(ResourceKind::Pod, at).unwrap();
        assert_eq!(old.keys().map(|k| k.name.as_str()).collect::<Vec<_>>(), vec!["a"]);
        assert_eq!(
            store.snapshot_at(ResourceKind::Pod, at + 100).unwrap_err(),
            VersionError::TooLarge(at + 2)
        );
    }

    #[test]
    fn history_is_bounded_and_older_cursors_are_refused() {
        let store = Store::new(3);
        for i in 0..10 {
            store.create(ResourceKind::Pod, pod(&format!("p{i}"))).unwrap();
        }
        let current = store.current_rv();
        assert_eq!(store.events_after(current - 3, 10).unwrap().len(), 3);
        assert_eq!(store.events_after(current - 4, 10).unwrap_err(), current - 3);
        store.compact();
        assert!(store.events_after(current, 10).unwrap().is_empty());
        assert!(store.events_after(current - 1, 10).is_err());
    }

    #[test]
    fn bulk_create_writes_nothing_when_one_object_exists() {
        let store = Store::new(100);
        store.create(ResourceKind::Pod, pod("b")).unwrap();
        let before = store.current_rv();
        let err = store.bulk_create(ResourceKind::Pod, vec![pod("a"), pod("b")]).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(store.current_rv(), before);
    }

    #[test]
    fn deleting_a_namespace_deletes_its_objects() {
        let store = Store::new(100);
        store.create(ResourceKind::Pod, pod("a")).unwrap();
        store.delete(ResourceKind::Namespace, &ObjKey::new("", "default"), None, None).unwrap();
        assert!(store.snapshot(ResourceKind::Pod).0.is_empty());
        let err = store.create(ResourceKind::Pod, pod("c")).unwrap_err();
        assert_eq!(err.code, 404);
    }
}
