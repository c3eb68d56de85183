//! The immutable state a snapshot holds, and the writer's mutations of its private copy.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use crate::{
    Error, Result,
    backend::{Backend, PersistentMap, Shared},
    index::{IndexEntry, Indexers},
    labels::{Entry, LabelDigest},
};

/// How the state reads an object's labels (for the label digests of the primary map).
pub(crate) type LabelsFn<T> = fn(&T) -> Option<&BTreeMap<String, String>>;

/// One index bucket: the keys whose objects have one index value, and for a covering index the
/// objects themselves.
pub(crate) enum Bucket<T: Send + Sync + 'static, B: Backend> {
    Keys(B::Map<()>),
    Objects(B::Map<Arc<T>>),
}

impl<T: Send + Sync + 'static, B: Backend> Clone for Bucket<T, B> {
    fn clone(&self) -> Self {
        match self {
            Bucket::Keys(m) => Bucket::Keys(m.clone()),
            Bucket::Objects(m) => Bucket::Objects(m.clone()),
        }
    }
}

impl<T: Send + Sync + 'static, B: Backend> Shared for Bucket<T, B> {
    fn warm(&self) -> usize {
        match self {
            Bucket::Keys(m) => m.warm(),
            Bucket::Objects(m) => m.warm(),
        }
    }
}

impl<T: Send + Sync + 'static, B: Backend> Bucket<T, B> {
    fn new(covering: bool) -> Self {
        if covering {
            Bucket::Objects(Default::default())
        } else {
            Bucket::Keys(Default::default())
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Bucket::Keys(m) => m.len(),
            Bucket::Objects(m) => m.len(),
        }
    }

    fn insert(&mut self, key: Arc<str>, obj: &Arc<T>) {
        match self {
            Bucket::Keys(m) => {
                m.insert(key, ());
            }
            Bucket::Objects(m) => {
                m.insert(key, obj.clone());
            }
        }
    }

    fn remove(&mut self, key: &str) {
        match self {
            Bucket::Keys(m) => drop(m.remove(key)),
            Bucket::Objects(m) => drop(m.remove(key)),
        }
    }

    /// Replaces the object held for `key` in a covering bucket.
    fn refresh(&mut self, key: &str, obj: &Arc<T>) {
        if let Bucket::Objects(m) = self
            && let Some(slot) = m.get_mut(key)
        {
            *slot = obj.clone();
        }
    }

    pub(crate) fn keys(&self) -> Box<dyn Iterator<Item = &Arc<str>> + '_> {
        match self {
            Bucket::Keys(m) => Box::new(m.iter().map(|(k, _)| k)),
            Bucket::Objects(m) => Box::new(m.iter().map(|(k, _)| k)),
        }
    }
}

/// Index buckets of one index: index value to bucket.
pub(crate) type Buckets<T, B> = <B as Backend>::Map<Bucket<T, B>>;

/// Everything one published version holds. Cloning is O(number of indexes).
pub(crate) struct State<T: Send + Sync + 'static, B: Backend> {
    /// Key to object, each with the digest of its labels.
    pub(crate) items: B::Map<Entry<T>>,
    /// How to read labels for the digests; `None`: no digests (every entry a candidate).
    labels: Option<LabelsFn<T>>,
    /// Parallel to `indexers.entries`.
    pub(crate) indexes: Vec<Buckets<T, B>>,
    pub(crate) indexers: Arc<Indexers<T>>,
    pub(crate) resource_version: Option<Arc<str>>,
    pub(crate) sequence: u64,
    pub(crate) publication: u64,
    pub(crate) published_at: Instant,
}

impl<T: Send + Sync + 'static, B: Backend> Clone for State<T, B> {
    fn clone(&self) -> Self {
        State {
            items: self.items.clone(),
            labels: self.labels,
            indexes: self.indexes.clone(),
            indexers: self.indexers.clone(),
            resource_version: self.resource_version.clone(),
            sequence: self.sequence,
            publication: self.publication,
            published_at: self.published_at,
        }
    }
}

impl<T: Send + Sync + 'static, B: Backend> State<T, B> {
    pub(crate) fn new(indexers: Indexers<T>, labels: Option<LabelsFn<T>>) -> Result<Self> {
        let mut state = State {
            items: Default::default(),
            labels,
            indexes: Vec::new(),
            indexers: Arc::new(Indexers::new()),
            resource_version: None,
            sequence: 0,
            publication: 0,
            published_at: Instant::now(),
        };
        state.add_indexers(indexers)?;
        Ok(state)
    }

    pub(crate) fn index_pos(&self, name: &str) -> Result<usize> {
        self.indexers.entries.iter().position(|e| &*e.name == name).ok_or_else(|| {
            Error::IndexNotFound {
                name: name.to_owned(),
                known: self
                    .indexers
                    .entries
                    .iter()
                    .map(|e| &*e.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        })
    }

    /// Adds or replaces the object under `key`; returns the object it replaced.
    pub(crate) fn upsert(&mut self, key: &str, obj: Arc<T>) -> Option<Arc<T>> {
        let labels = self.labels.map_or(LabelDigest::ANY, |f| LabelDigest::of(f(&obj)));
        let old = self.items.upsert(key, Entry { obj: obj.clone(), labels }).map(|e| e.obj);
        self.reindex(key, old.as_deref(), Some(&obj), None);
        self.sequence += 1;
        old
    }

    /// Removes the object under `key`; returns it. Counts as one operation even when the key is
    /// absent.
    pub(crate) fn remove(&mut self, key: &str) -> Option<Arc<T>> {
        self.sequence += 1;
        let (stored_key, Entry { obj: old, .. }) = self.items.remove(key)?;
        self.reindex(key, Some(&old), None, Some(stored_key));
        Some(old)
    }

    /// Moves `key` between index buckets for every index whose values differ between `old` and
    /// `new`. A key index whose values did not change (the common update) costs two function
    /// calls; a covering index also swaps the object it holds.
    fn reindex(
        &mut self,
        key: &str,
        old: Option<&T>,
        new: Option<&Arc<T>>,
        mut shared_key: Option<Arc<str>>,
    ) {
        for (pos, entry) in self.indexers.entries.iter().enumerate() {
            let old_values = old.map(|o| entry.f.values(o)).unwrap_or_default();
            let new_values = new.map(|n| entry.f.values(n)).unwrap_or_default();
            let buckets = &mut self.indexes[pos];
            if old_values == new_values {
                if let (true, Some(new)) = (entry.covering, new) {
                    for value in &new_values {
                        if let Some(bucket) = buckets.get_mut(value) {
                            bucket.refresh(key, new);
                        }
                    }
                }
                continue;
            }
            for value in old_values.iter().filter(|v| !new_values.contains(v)) {
                let now_empty = match buckets.get_mut(value) {
                    Some(bucket) => {
                        bucket.remove(key);
                        bucket.len() == 0
                    }
                    None => false,
                };
                if now_empty {
                    buckets.remove(value);
                }
            }
            let Some(new) = new else { continue };
            for value in &new_values {
                if old_values.contains(value) {
                    if entry.covering
                        && let Some(bucket) = buckets.get_mut(value)
                    {
                        bucket.refresh(key, new);
                    }
                    continue;
                }
                let k = shared_key
                    .get_or_insert_with(|| {
                        // The object was just inserted, so its stored key exists; share it.
                        self.items
                            .get_key_value(key)
                            .map(|(k, _)| k.clone())
                            .unwrap_or_else(|| key.into())
                    })
                    .clone();
                match buckets.get_mut(value) {
                    Some(bucket) => bucket.insert(k, new),
                    None => {
                        let mut bucket = Bucket::new(entry.covering);
                        bucket.insert(k, new);
                        buckets.upsert(value, bucket);
                    }
                }
            }
        }
    }

    /// Replaces all items (client-go `Replace`): the maps and indexes are rebuilt from `objs`.
    pub(crate) fn replace(&mut self, objs: impl IntoIterator<Item = (String, Arc<T>)>) {
        self.items = Default::default();
        self.indexes = self.indexers.entries.iter().map(|_| Default::default()).collect();
        let sequence = self.sequence;
        for (key, obj) in objs {
            self.upsert(&key, obj);
        }
        self.sequence = sequence + 1;
    }

    /// Registers more index functions and indexes every existing item with them.
    pub(crate) fn add_indexers(&mut self, new: Indexers<T>) -> Result<()> {
        for (i, e) in new.entries.iter().enumerate() {
            let dup_existing = self.indexers.entries.iter().any(|x| x.name == e.name);
            let dup_new = new.entries[..i].iter().any(|x| x.name == e.name);
            if dup_existing || dup_new {
                return Err(Error::IndexExists(e.name.to_string()));
            }
        }
        for entry in new.entries {
            let buckets = build_index::<T, B>(&self.items, &entry);
            Arc::make_mut(&mut self.indexers).entries.push(entry);
            self.indexes.push(buckets);
        }
        Ok(())
    }
}

fn build_index<T: Send + Sync + 'static, B: Backend>(
    items: &B::Map<Entry<T>>,
    entry: &IndexEntry<T>,
) -> Buckets<T, B> {
    let mut buckets: Buckets<T, B> = Default::default();
    for (key, Entry { obj, .. }) in items.iter() {
        for value in entry.f.values(obj) {
            match buckets.get_mut(&value) {
                Some(bucket) => bucket.insert(key.clone(), obj),
                None => {
                    let mut bucket = Bucket::new(entry.covering);
                    bucket.insert(key.clone(), obj);
                    buckets.upsert(&value, bucket);
                }
            }
        }
    }
    buckets
}
