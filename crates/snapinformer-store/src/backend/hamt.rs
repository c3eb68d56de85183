//! Backend on `imbl`'s hash array mapped trie.

use std::sync::Arc;

use imbl::shared_ptr::DefaultSharedPtr;

use super::{Backend, KeyHasher, PersistentMap, Shared};

/// Hash array mapped trie from the `imbl` crate: 32-way branch nodes over dense SIMD leaf nodes of
/// up to 16/32 entries. A write copies the root-to-leaf path the first time it touches it after a
/// publication; later writes in the same batch reuse the copies.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hamt;

impl Backend for Hamt {
    type Map<V: Shared> = HamtMap<V>;
    const NAME: &'static str = "hamt";
}

/// [`PersistentMap`] on `imbl::GenericHashMap`.
#[derive(Clone)]
pub struct HamtMap<V>(imbl::GenericHashMap<Arc<str>, V, KeyHasher, DefaultSharedPtr>);

impl<V: Clone> Default for HamtMap<V> {
    fn default() -> Self {
        HamtMap(imbl::GenericHashMap::with_hasher(KeyHasher::default()))
    }
}

impl<V> PersistentMap<V> for HamtMap<V>
where
    V: Clone,
{
    fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&self, key: &str) -> Option<&V> {
        self.0.get(key)
    }

    fn get_key_value(&self, key: &str) -> Option<(&Arc<str>, &V)> {
        self.0.get_key_value(key)
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.0.get_mut(key)
    }

    fn upsert(&mut self, key: &str, value: V) -> Option<V> {
        if let Some(slot) = self.0.get_mut(key) {
            return Some(std::mem::replace(slot, value));
        }
        self.0.insert(Arc::from(key), value);
        None
    }

    fn insert(&mut self, key: Arc<str>, value: V) -> Option<V> {
        self.0.insert(key, value)
    }

    fn remove(&mut self, key: &str) -> Option<(Arc<str>, V)> {
        self.0.remove_with_key(key)
    }

    fn iter<'a>(&'a self) -> impl Iterator<Item = (&'a Arc<str>, &'a V)> + 'a
    where
        V: 'a,
    {
        self.0.iter()
    }
}
