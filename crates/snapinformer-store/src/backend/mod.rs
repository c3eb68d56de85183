//! Persistent maps the store can be built on, behind one trait so they can be measured side by side.
//!
//! A [`Backend`] supplies a persistent (copy-on-write) map from string keys to values. The store
//! uses it for the primary map (key to object) and for every index (index value to a set of keys).
//! Cloning a persistent map is O(1) or close to it and the clone is unaffected by later writes to the
//! original: that clone is what a published snapshot holds.

use std::sync::Arc;

mod chunked;
mod hamt;

pub use chunked::{Chunked, ChunkedMap, Resolve};
pub use hamt::{Hamt, HamtMap};

/// The hasher used by every backend (and by the benchmark's locked baseline, for fairness).
pub type KeyHasher = foldhash::fast::FixedState;

/// A value a persistent map holds: cloned whenever the chunk holding it is copied, and dropped
/// when the last version holding that chunk goes.
///
/// A copy of a chunk clones every value in it, and for a shared value (an `Arc`) each clone
/// writes a reference count in memory that is usually not in the cache: a miss per value. One
/// after another, the atomic increments wait for their misses one at a time. A map first reads
/// every count it is about to write ([`warm`](Shared::warm)), with plain loads the processor
/// overlaps, and then writes them, cached. Values that share nothing keep the default, which
/// reads nothing.
pub trait Shared: Clone + Send + Sync + 'static {
    /// Reads the memory a clone or a drop of this value writes, and returns what it read (so the
    /// read is not optimised away). Its result means nothing else.
    #[inline]
    fn warm(&self) -> usize {
        0
    }
}

impl<T: ?Sized + Send + Sync + 'static> Shared for Arc<T> {
    #[inline]
    fn warm(&self) -> usize {
        Arc::strong_count(self)
    }
}

impl Shared for () {}
impl Shared for u64 {}

/// A persistent map from `Arc<str>` keys to `V`: clones share structure, writes copy what they touch.
pub trait PersistentMap<V>: Clone + Default
where
    V: Clone,
{
    /// Reads the reference count that cloning or dropping this map writes (see [`Shared::warm`]).
    #[inline]
    fn warm(&self) -> usize {
        0
    }
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
    type Map<V: Shared>: PersistentMap<V> + Send + Sync + 'static;
    /// Short name for reports (`hamt`, `chunked`).
    const NAME: &'static str;

    /// The values `map` holds under the keys of `keys` (such as an index bucket of keys), in
    /// `keys`' order of iteration, skipping keys `map` lacks. A key index's lookups go through
    /// here; a backend may resolve several keys at once (the chunked backend does, see
    /// [`ChunkedMap::resolve`]). The default looks each key up in turn.
    fn resolve<'a, V: Shared, W: Shared>(
        map: &'a Self::Map<V>,
        keys: &'a Self::Map<W>,
    ) -> impl Iterator<Item = &'a V> + 'a {
        keys.iter().filter_map(move |(k, _)| map.get(k))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::{Rng, SeedableRng, rngs::StdRng};

    use super::*;

    /// Differential test: random inserts, replaces and removes against `std::HashMap`, large
    /// enough to grow the chunked table through several directory groups, with clones taken along
    /// the way and checked after later writes (a clone is what a snapshot holds).
    fn matches_std_hashmap<M: PersistentMap<u64>>() {
        let mut map = M::default();
        let mut model: HashMap<String, u64> = HashMap::new();
        let mut held: Vec<(M, HashMap<String, u64>)> = Vec::new();
        let mut rng = StdRng::seed_from_u64(0x2545_f491_4f6c_dd1d);
        for step in 0..60_000u64 {
            let key = format!("ns-{}/pod-{}", rng.random_range(0..3), rng.random_range(0..20_000));
            match rng.random_range(0..10) {
                0..=5 => assert_eq!(map.upsert(&key, step), model.insert(key.clone(), step)),
                6 => assert_eq!(map.insert(Arc::from(key.as_str()), step), model.insert(key, step)),
                7 => {
                    if let Some(v) = map.get_mut(&key) {
                        *v += 1;
                    }
                    if let Some(v) = model.get_mut(&key) {
                        *v += 1;
                    }
                }
                _ => assert_eq!(
                    map.remove(&key).map(|(k, v)| (k.to_string(), v)),
                    model.remove_entry(&key)
                ),
            }
            if step % 7_919 == 0 {
                held.push((map.clone(), model.clone()));
            }
        }
        held.push((map, model));
        for (map, model) in held {
            assert_eq!(map.len(), model.len());
            let mut seen = 0;
            for (k, v) in map.iter() {
                assert_eq!(model.get(&**k), Some(v), "{k}");
                seen += 1;
            }
            assert_eq!(seen, model.len(), "iteration visits every entry once");
            for (k, v) in &model {
                assert_eq!(map.get(k), Some(v));
                assert_eq!(map.get_key_value(k).map(|(k, _)| k.to_string()).as_ref(), Some(k));
            }
        }
    }

    /// `resolve` against one `get` per key: every size from an empty map to a tree of several
    /// levels, keys that are the map's own allocations and keys that are only equal strings,
    /// keys the map lacks (including whole groups of them), and a map written after the keys
    /// were taken.
    fn resolve_matches_one_lookup_per_key<B: Backend>() {
        let mut rng = StdRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
        for size in [0usize, 1, 5, 13, 200, 5_000, 60_000] {
            let mut map = B::Map::<u64>::default();
            for i in 0..size {
                map.upsert(&format!("ns/pod-{i}"), i as u64);
            }
            let mut keys = B::Map::<()>::default();
            for i in 0..size + 100 {
                match rng.random_range(0..4) {
                    // The map's own key allocation, as the store's index buckets hold.
                    0 | 1 => match map.get_key_value(&format!("ns/pod-{i}")) {
                        Some((k, _)) => drop(keys.insert(k.clone(), ())),
                        None => drop(keys.upsert(&format!("ns/pod-{i}"), ())),
                    },
                    // An equal string in an allocation of its own.
                    2 => drop(keys.upsert(&format!("ns/pod-{i}"), ())),
                    _ => {}
                }
            }
            // A run of absent keys longer than a group.
            for i in 0..40 {
                keys.upsert(&format!("other/pod-{i}"), ());
            }
            let check = |map: &B::Map<u64>| {
                let want: Vec<u64> = keys.iter().filter_map(|(k, _)| map.get(k)).copied().collect();
                let got: Vec<u64> = B::resolve(map, &keys).copied().collect();
                assert_eq!(got, want, "{} at {size} entries", B::NAME);
            };
            check(&map);
            let held = map.clone();
            for i in (0..size).step_by(3) {
                map.remove(&format!("ns/pod-{i}"));
            }
            for i in (1..size).step_by(3) {
                map.upsert(&format!("ns/pod-{i}"), 7);
            }
            check(&map);
            check(&held);
        }
    }

    #[test]
    fn chunked_resolve_finds_what_one_lookup_per_key_finds() {
        resolve_matches_one_lookup_per_key::<Chunked>();
    }

    #[test]
    fn hamt_resolve_finds_what_one_lookup_per_key_finds() {
        resolve_matches_one_lookup_per_key::<Hamt>();
    }

    #[test]
    fn chunked_map_matches_std_hashmap_through_growth_and_held_clones() {
        matches_std_hashmap::<ChunkedMap<u64>>();
    }

    #[test]
    fn hamt_map_matches_std_hashmap_through_growth_and_held_clones() {
        matches_std_hashmap::<HamtMap<u64>>();
    }
}
