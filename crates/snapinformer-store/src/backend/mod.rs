//! Persistent maps the store can be built on, behind one trait so they can be measured side by side.
//!
//! A [`Backend`] supplies a persistent (copy-on-write) map from string keys to values. The store
//! uses it for the primary map (key to object) and for every index (index value to a set of keys).
//! Cloning a persistent map is O(1) or close to it and the clone is unaffected by later writes to the
//! original: that clone is what a published snapshot holds.

use std::sync::Arc;

mod chunked;
mod hamt;

pub use chunked::{Chunked, ChunkedMap};
pub use hamt::{Hamt, HamtMap};

/// The hasher used by every backend (and by the benchmark's locked baseline, for fairness).
pub type KeyHasher = foldhash::fast::FixedState;

/// A persistent map from `Arc<str>` keys to `V`: clones share structure, writes copy what they touch.
pub trait PersistentMap<V>: Clone + Default
where
    V: Clone,
{
    /// Number of entries.
    fn len(&self) -> usize;
    /// Whether there are no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The value under `key`.
    fn get(&self, key: &str) -> Option<&V>;
    /// The stored key and value under `key` (the stored key is shared, not copied).
    fn get_key_value(&self, key: &str) -> Option<(&Arc<str>, &V)>;
    /// A mutable reference to the value under `key`, copying whatever is shared on the way.
    fn get_mut(&mut self, key: &str) -> Option<&mut V>;
    /// Inserts or replaces the value under `key`; allocates a key only when it is new.
    /// Returns the previous value.
    fn upsert(&mut self, key: &str, value: V) -> Option<V>;
    /// Inserts or replaces using an existing shared key. Returns the previous value.
    fn insert(&mut self, key: Arc<str>, value: V) -> Option<V>;
    /// Removes `key`, returning the stored key and value.
    fn remove(&mut self, key: &str) -> Option<(Arc<str>, V)>;
    /// All entries, in no particular order.
    fn iter<'a>(&'a self) -> impl Iterator<Item = (&'a Arc<str>, &'a V)> + 'a
    where
        V: 'a;
}

/// A family of persistent maps: which data structure a store is built on.
pub trait Backend: Send + Sync + 'static {
    /// The map type for values of type `V`.
    type Map<V: Clone + Send + Sync + 'static>: PersistentMap<V> + Send + Sync + 'static;
    /// Short name for reports (`hamt`, `chunked`).
    const NAME: &'static str;
}
