//! The immutable state a snapshot holds, and the writer's mutations of its private copy.

use std::{sync::Arc, time::Instant};

use crate::{
    Error, Result,
    backend::{Backend, PersistentMap},
    index::{IndexFn, Indexers},
};

/// Index buckets of one index: index value to the set of keys in that bucket.
pub(crate) type Buckets<B> = <B as Backend>::Map<<B as Backend>::Map<()>>;

/// Everything one published version holds. Cloning is O(number of indexes).
pub(crate) struct State<T: Send + Sync + 'static, B: Backend> {
    pub(crate) items: B::Map<Arc<T>>,
    /// Parallel to `indexers.entries`.
    pub(crate) indexes: Vec<Buckets<B>>,
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
    pub(crate) fn new(indexers: Indexers<T>) -> Result<Self> {
        let mut state = State {
            items: Default::default(),
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
        self.indexers.entries.iter().position(|(n, _)| &**n == name).ok_or_else(|| {
            Error::IndexNotFound {
                name: name.to_owned(),
                known: self
                    .indexers
                    .entries
                    .iter()
                    .map(|(n, _)| &**n)
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        })
    }

    /// Adds or replaces the object under `key`; returns the object it replaced.
    pub(crate) fn upsert(&mut self, key: &str, obj: Arc<T>) -> Option<Arc<T>> {
        let old = self.items.upsert(key, obj.clone());
        self.reindex(key, old.as_deref(), Some(&obj), None);
        self.sequence += 1;
        old
    }

    /// Removes the object under `key`; returns it.
    /// Counts as one operation even when the key is absent.
    pub(crate) fn remove(&mut self, key: &str) -> Option<Arc<T>> {
        self.sequence += 1;
        let (stored_key, old) = self.items.remove(key)?;
        self.reindex(key, Some(&old), None, Some(stored_key));
        Some(old)
    }

    /// Moves `key` between index buckets for every index whose values differ between `old` and
    /// `new`. Indexes whose values did not change (the common update) cost two function calls.
    fn reindex(
        &mut self,
        key: &str,
        old: Option<&T>,
        new: Option<&T>,
        mut shared_key: Option<Arc<str>>,
    ) {
        for (pos, (_, f)) in self.indexers.entries.iter().enumerate() {
            let old_values = old.map(|o| f.values(o)).unwrap_or_default();
            let new_values = new.map(|n| f.values(n)).unwrap_or_default();
            if old_values == new_values {
                continue;
            }
            let buckets = &mut self.indexes[pos];
            for value in old_values.iter().filter(|v| !new_values.contains(v)) {
                let now_empty = match buckets.get_mut(value) {
                    Some(bucket) => {
                        bucket.remove(key);
                        bucket.is_empty()
                    }
                    None => false,
                };
                if now_empty {
                    buckets.remove(value);
                }
            }
            for value in new_values.iter().filter(|v| !old_values.contains(v)) {
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
                    Some(bucket) => {
                        bucket.insert(k, ());
                    }
                    None => {
                        let mut bucket = <B::Map<()>>::default();
                        bucket.insert(k, ());
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
        for (i, (name, _)) in new.entries.iter().enumerate() {
            let dup_existing = self.indexers.entries.iter().any(|(n, _)| n == name);
            let dup_new = new.entries[..i].iter().any(|(n, _)| n == name);
            if dup_existing || dup_new {
                return Err(Error::IndexExists(name.to_string()));
            }
        }
        for (name, f) in new.entries {
            let buckets = build_index::<T, B>(&self.items, &f);
            Arc::make_mut(&mut self.indexers).entries.push((name, f));
            self.indexes.push(buckets);
        }
        Ok(())
    }
}

fn build_index<T: Send + Sync + 'static, B: Backend>(
    items: &B::Map<Arc<T>>,
    f: &IndexFn<T>,
) -> Buckets<B> {
    let mut buckets: Buckets<B> = Default::default();
    for (key, obj) in items.iter() {
        for value in f.values(obj) {
            match buckets.get_mut(&value) {
                Some(bucket) => {
                    bucket.insert(key.clone(), ());
                }
                None => {
                    let mut bucket = <B::Map<()>>::default();
                    bucket.insert(key.clone(), ());
                    buckets.upsert(&value, bucket);
                }
            }
        }
    }
    buckets
}
