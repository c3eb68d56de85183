//! Immutable snapshots: the read surface.

use std::{sync::Arc, time::Instant};

use crate::{
    Chunked, KeyFn, ObjectAccess, Result,
    backend::{Backend, PersistentMap},
    index::NAMESPACE_INDEX,
    labels::{Entry, LabelDigest, labels_match},
    state::{Bucket, State},
};

/// One published version of the store: the primary map and every index at the same point of the
/// write history. Taking it is O(1); holding it costs only the memory of what the writer has
/// replaced since (shared structure is never copied for a reader).
///
/// All reads are lock-free and never wait for the writer. Methods returning references borrow from
/// the snapshot; the owned variants clone `Arc`s, never objects.
pub struct Snapshot<T: Send + Sync + 'static, B: Backend = Chunked> {
    pub(crate) state: Arc<State<T, B>>,
    pub(crate) access: ObjectAccess<T>,
    pub(crate) key_fn: KeyFn<T>,
}

impl<T: Send + Sync + 'static, B: Backend> Clone for Snapshot<T, B> {
    fn clone(&self) -> Self {
        Snapshot { state: self.state.clone(), access: self.access, key_fn: self.key_fn.clone() }
    }
}

impl<T: Send + Sync + 'static, B: Backend> std::fmt::Debug for Snapshot<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("backend", &B::NAME)
            .field("len", &self.len())
            .field("resource_version", &self.resource_version())
            .field("sequence", &self.sequence())
            .field("publication", &self.publication())
            .finish()
    }
}

impl<T: Send + Sync + 'static, B: Backend> Snapshot<T, B> {
    /// Number of objects.
    pub fn len(&self) -> usize {
        self.state.items.len()
    }

    /// Whether there are no objects.
    pub fn is_empty(&self) -> bool {
        self.state.items.is_empty()
    }

    /// The resource version this snapshot includes (client-go's `LastStoreSyncResourceVersion`):
    /// the version of the last object written or deleted with its final state, or of the last
    /// `replace`/explicitly set version, whichever came last. A change whose object has no
    /// version leaves it unchanged; a delete by key too.
    pub fn resource_version(&self) -> Option<&str> {
        self.state.resource_version.as_deref()
    }

    /// Number of write operations (adds, updates, deletes, replaces) processed up to this snapshot,
    /// counting deletes of absent keys too: the informer compares it with the number of deltas it
    /// has queued to measure the writer's lag.
    pub fn sequence(&self) -> u64 {
        self.state.sequence
    }

    /// Number of publications up to and including this one (0 for the initial empty store).
    pub fn publication(&self) -> u64 {
        self.state.publication
    }

    /// When this snapshot was published.
    pub fn published_at(&self) -> Instant {
        self.state.published_at
    }

    /// The object with `obj`'s key (client-go `Get`). Fails only if `obj` has no key.
    pub fn get(&self, obj: &T) -> Result<Option<&Arc<T>>> {
        let key = self.key_fn.key(&self.access, obj)?;
        Ok(self.get_by_key(&key))
    }

    /// The object under `key` (`namespace/name` or `name`).
    #[doc(alias = "GetByKey")]
    pub fn get_by_key(&self, key: &str) -> Option<&Arc<T>> {
        self.state.items.get(key).map(|e| &e.obj)
    }

    /// Every object, borrowed, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<T>> + '_ {
        self.state.items.iter().map(|(_, e)| &e.obj)
    }

    /// Every key with its object, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&Arc<str>, &Arc<T>)> + '_ {
        self.state.items.iter().map(|(k, e)| (k, &e.obj))
    }

    /// Every object (client-go `List`): a vector of shared pointers.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.iter().cloned().collect()
    }

    /// Every key (client-go `ListKeys`), in no particular order.
    pub fn list_keys(&self) -> Vec<Arc<str>> {
        self.state.items.iter().map(|(k, _)| k.clone()).collect()
    }

    /// Every object as borrowed pointers (client-go `List` without touching a reference count:
    /// the snapshot keeps them alive). Much cheaper than [`Snapshot::list`] for large stores.
    pub fn list_refs(&self) -> Vec<&Arc<T>> {
        let mut out = Vec::with_capacity(self.len());
        out.extend(self.iter());
        out
    }

    /// Objects of one namespace. An empty `namespace` means all namespaces (client-go's
    /// `NamespaceAll`).
    ///
    /// When the namespace holds most of the store, the primary map is scanned by key prefix
    /// instead of resolving every key of the namespace bucket: one sequential pass instead of one
    /// random lookup per object.
    pub fn namespace<'s>(&'s self, namespace: &str) -> Box<dyn Iterator<Item = &'s Arc<T>> + 's> {
        self.select(namespace, &[])
    }

    /// Objects of one namespace as a vector (see [`Snapshot::namespace`]).
    #[doc(alias = "ListAllByNamespace")]
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<T>> {
        self.namespace(namespace).cloned().collect()
    }

    /// Objects of `namespace` (empty: all namespaces) that carry every `(key, value)` label of
    /// `selector` (an equality-based label selector; empty selects every object), borrowed.
    ///
    /// Every entry of the primary map keeps a 64-bit digest of its object's labels, so objects
    /// that cannot match are skipped without reading them; the candidates are then tested on
    /// their labels, so the result is exact. A list with a selector that few objects match
    /// costs a pass over the map's entries rather than a read of every object (see the
    /// `labels` module's notes).
    pub fn select<'s>(
        &'s self,
        namespace: &str,
        selector: &[(&str, &str)],
    ) -> Box<dyn Iterator<Item = &'s Arc<T>> + 's> {
        let mask = LabelDigest::mask(selector);
        let selector: Vec<(String, String)> =
            selector.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let access = self.access;
        // Whether a candidate the digest let through carries the selector.
        let confirm = move |obj: &T| labels_match(&access, obj, &selector);
        let candidate = move |e: &Entry<T>| e.labels.may_match(mask);
        if namespace.is_empty() {
            return Box::new(
                self.state
                    .items
                    .iter()
                    .filter(move |(_, e)| candidate(e))
                    .map(|(_, e)| &e.obj)
                    .filter(move |o| confirm(o)),
            );
        }
        let pos = self.state.index_pos(NAMESPACE_INDEX).expect("the namespace index always exists");
        let Some(bucket) = self.state.indexes[pos].get(namespace) else {
            return Box::new(std::iter::empty());
        };
        match bucket {
            Bucket::Keys(_)
                if bucket.len() * 2 >= self.len() && self.key_fn.is_meta_namespace() =>
            {
                // The key prefix alone is not enough: with a slash in a namespace or a name, the
                // key `a/b/c` may belong to namespace `a/b` or `a` (or be a cluster-scoped
                // `a/b/c`).
                let ns = namespace.to_owned();
                let object_ns = self.access.namespace;
                Box::new(
                    self.state
                        .items
                        .iter()
                        .filter(move |(_, e)| candidate(e))
                        .filter_map(move |(k, e)| {
                            let rest = k.strip_prefix(ns.as_str())?;
                            (rest.starts_with('/') && object_ns(&e.obj) == Some(ns.as_str()))
                                .then_some(&e.obj)
                        })
                        .filter(move |o| confirm(o)),
                )
            }
            Bucket::Keys(keys) => Box::new(
                B::resolve(&self.state.items, keys)
                    .filter(move |e| candidate(e))
                    .map(|e| &e.obj)
                    .filter(move |o| confirm(o)),
            ),
            Bucket::Objects(m) => Box::new(m.iter().map(|(_, v)| v).filter(move |o| confirm(o))),
        }
    }

    /// Objects of `namespace` carrying every label of `selector`, as a vector (see
    /// [`Snapshot::select`]).
    #[doc(alias = "List")]
    pub fn list_selected(&self, namespace: &str, selector: &[(&str, &str)]) -> Vec<Arc<T>> {
        self.select(namespace, selector).cloned().collect()
    }

    fn bucket_objects<'s>(
        &'s self,
        bucket: &'s Bucket<T, B>,
    ) -> Box<dyn Iterator<Item = &'s Arc<T>> + 's> {
        match bucket {
            Bucket::Objects(m) => Box::new(m.iter().map(|(_, v)| v)),
            Bucket::Keys(m) => Box::new(B::resolve(&self.state.items, m).map(|e| &e.obj)),
        }
    }

    /// Objects whose index `index` has `value` (client-go `ByIndex`), borrowed. On a covering
    /// index this reads the bucket alone; on a key index it resolves each key.
    pub fn by_index_iter<'s>(
        &'s self,
        index: &str,
        value: &str,
    ) -> Result<Box<dyn Iterator<Item = &'s Arc<T>> + 's>> {
        let pos = self.state.index_pos(index)?;
        Ok(self.objects_at(pos, value))
    }

    /// The objects in bucket `value` of the index at `pos`.
    fn objects_at<'s>(
        &'s self,
        pos: usize,
        value: &str,
    ) -> Box<dyn Iterator<Item = &'s Arc<T>> + 's> {
        match self.state.indexes[pos].get(value) {
            Some(bucket) => self.bucket_objects(bucket),
            None => Box::new(std::iter::empty()),
        }
    }

    /// Objects whose index `index` has `value` (client-go `ByIndex`).
    #[doc(alias = "ByIndex")]
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<T>>> {
        Ok(self.by_index_iter(index, value)?.cloned().collect())
    }

    /// Objects whose index `index` has `value`, as borrowed pointers (no reference counting).
    pub fn by_index_refs(&self, index: &str, value: &str) -> Result<Vec<&Arc<T>>> {
        Ok(self.by_index_iter(index, value)?.collect())
    }

    /// Objects that share any of `obj`'s values of index `index` (client-go `Index`), without
    /// duplicates.
    pub fn index(&self, index: &str, obj: &T) -> Result<Vec<Arc<T>>> {
        let pos = self.state.index_pos(index)?;
        let values = self.state.indexers.entries[pos].f.values(obj);
        if let [value] = values.as_slice() {
            // One bucket has no duplicates to remove.
            return Ok(self.objects_at(pos, value).cloned().collect());
        }
        let mut keys: Vec<&Arc<str>> = Vec::new();
        for value in &values {
            if let Some(bucket) = self.state.indexes[pos].get(value) {
                keys.extend(bucket.keys());
            }
        }
        if values.len() > 1 {
            keys.sort_unstable();
            keys.dedup();
        }
        Ok(keys
            .into_iter()
            .filter_map(|k| self.state.items.get(k).map(|e| e.obj.clone()))
            .collect())
    }

    /// Keys whose index `index` has `value`, sorted (client-go `IndexKeys`).
    #[doc(alias = "IndexKeys")]
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<Arc<str>>> {
        let pos = self.state.index_pos(index)?;
        let mut keys: Vec<Arc<str>> = match self.state.indexes[pos].get(value) {
            Some(bucket) => bucket.keys().cloned().collect(),
            None => Vec::new(),
        };
        keys.sort_unstable();
        Ok(keys)
    }

    /// The values (bucket names) index `index` currently has, sorted (client-go
    /// `ListIndexFuncValues`). Empty buckets are removed as soon as they empty.
    #[doc(alias = "ListIndexFuncValues")]
    pub fn index_values(&self, index: &str) -> Result<Vec<Arc<str>>> {
        let pos = self.state.index_pos(index)?;
        let mut values: Vec<Arc<str>> =
            self.state.indexes[pos].iter().map(|(k, _)| k.clone()).collect();
        values.sort_unstable();
        Ok(values)
    }

    /// Names of the registered indexes, the namespace index first.
    pub fn index_names(&self) -> Vec<&str> {
        self.state.indexers.entries.iter().map(|e| &*e.name).collect()
    }
}
