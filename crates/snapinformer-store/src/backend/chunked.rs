//! Backend on a copy-on-write hash table of small chunks under a two-level directory.

use std::{hash::BuildHasher, sync::Arc};

use super::{Backend, KeyHasher, PersistentMap};

/// Average entries per chunk above which the table doubles its chunk count (so chunks hold 6 to
/// 12 entries on average). Small chunks keep the copy made by a write short: a write copies one
/// chunk, and each copied entry costs two reference-count increments now and two decrements when
/// the old version is dropped.
const MAX_AVG_CHUNK: usize = 12;
/// Chunks per directory group (log2).
const GROUP_BITS: u32 = 6;

/// Copy-on-write hash table: a directory of groups, each group up to 64 chunk pointers, each chunk
/// a small unsorted array of `(hash, key, value)` scanned linearly. The first write to a chunk
/// after a publication copies the directory (one pointer per 64 chunks), the group (64 pointers)
/// and the chunk (6-12 entries); later writes in the same batch reuse those copies. Dense chunks
/// make iteration and memory cheap (about 32 bytes per entry plus a pointer per 6-12 entries).
#[derive(Debug, Clone, Copy, Default)]
pub struct Chunked;

impl Backend for Chunked {
    type Map<V: Clone + Send + Sync + 'static> = ChunkedMap<V>;
    const NAME: &'static str = "chunked";
}

struct Chunk<V> {
    entries: Vec<(u64, Arc<str>, V)>,
}

impl<V: Clone> Clone for Chunk<V> {
    fn clone(&self) -> Self {
        // Room for one more entry, so that the write that caused the copy does not reallocate.
        let mut entries = Vec::with_capacity(self.entries.len() + 1);
        entries.extend(self.entries.iter().cloned());
        Chunk { entries }
    }
}

impl<V> Default for Chunk<V> {
    fn default() -> Self {
        Chunk { entries: Vec::new() }
    }
}

impl<V> Chunk<V> {
    fn find(&self, hash: u64, key: &str) -> Option<usize> {
        self.entries.iter().position(|(h, k, _)| *h == hash && &**k == key)
    }
}

type Group<V> = Vec<Arc<Chunk<V>>>;

/// [`PersistentMap`] of the [`Chunked`] backend.
pub struct ChunkedMap<V> {
    groups: Arc<Vec<Arc<Group<V>>>>,
    /// log2 of the chunk count.
    bits: u32,
    len: usize,
}

impl<V> Clone for ChunkedMap<V> {
    fn clone(&self) -> Self {
        ChunkedMap { groups: self.groups.clone(), bits: self.bits, len: self.len }
    }
}

impl<V> Default for ChunkedMap<V> {
    fn default() -> Self {
        ChunkedMap {
            groups: Arc::new(vec![Arc::new(vec![Arc::new(Chunk::default())])]),
            bits: 0,
            len: 0,
        }
    }
}

fn hash_of(key: &str) -> u64 {
    KeyHasher::default().hash_one(key)
}

impl<V: Clone> ChunkedMap<V> {
    /// Group and chunk position of a hash: the top `bits` bits pick the chunk.
    fn slot(&self, hash: u64) -> (usize, usize) {
        let chunk = if self.bits == 0 { 0 } else { (hash >> (64 - self.bits)) as usize };
        (chunk >> GROUP_BITS, chunk & ((1 << GROUP_BITS) - 1))
    }

    fn chunk(&self, (g, c): (usize, usize)) -> &Chunk<V> {
        &self.groups[g][c]
    }

    fn chunk_mut(&mut self, (g, c): (usize, usize)) -> &mut Chunk<V> {
        let group = &mut Arc::make_mut(&mut self.groups)[g];
        Arc::make_mut(&mut Arc::make_mut(group)[c])
    }

    /// Doubles the chunk count when chunks get too full on average. Each old chunk splits into two
    /// by the next hash bit; entries are cloned (shared keys and values: only reference counts).
    fn grow_if_needed(&mut self) {
        if self.len <= MAX_AVG_CHUNK << self.bits {
            return;
        }
        let new_bits = self.bits + 1;
        let per_group = 1usize << GROUP_BITS.min(new_bits);
        let mut groups: Vec<Arc<Group<V>>> =
            Vec::with_capacity((1usize << new_bits).div_ceil(per_group));
        let mut current: Group<V> = Vec::with_capacity(per_group);
        for chunk in self.groups.iter().flat_map(|g| g.iter()) {
            let (mut lo, mut hi) = (Chunk::default(), Chunk::default());
            for (h, k, v) in &chunk.entries {
                let dest = if (h >> (63 - self.bits)) & 1 == 0 { &mut lo } else { &mut hi };
                dest.entries.push((*h, k.clone(), v.clone()));
            }
            for half in [lo, hi] {
                current.push(Arc::new(half));
                if current.len() == per_group {
                    groups.push(Arc::new(std::mem::replace(
                        &mut current,
                        Vec::with_capacity(per_group),
                    )));
                }
            }
        }
        debug_assert!(current.is_empty());
        self.groups = Arc::new(groups);
        self.bits = new_bits;
    }

    fn insert_hashed(
        &mut self,
        hash: u64,
        key: &str,
        make_key: impl FnOnce() -> Arc<str>,
        value: V,
    ) -> Option<V> {
        let slot = self.slot(hash);
        match self.chunk(slot).find(hash, key) {
            Some(i) => Some(std::mem::replace(&mut self.chunk_mut(slot).entries[i].2, value)),
            None => {
                self.chunk_mut(slot).entries.push((hash, make_key(), value));
                self.len += 1;
                self.grow_if_needed();
                None
            }
        }
    }
}

impl<V> PersistentMap<V> for ChunkedMap<V>
where
    V: Clone,
{
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, key: &str) -> Option<&V> {
        self.get_key_value(key).map(|(_, v)| v)
    }

    fn get_key_value(&self, key: &str) -> Option<(&Arc<str>, &V)> {
        let hash = hash_of(key);
        let chunk = self.chunk(self.slot(hash));
        chunk.find(hash, key).map(|i| {
            let (_, k, v) = &chunk.entries[i];
            (k, v)
        })
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let hash = hash_of(key);
        let slot = self.slot(hash);
        let i = self.chunk(slot).find(hash, key)?;
        Some(&mut self.chunk_mut(slot).entries[i].2)
    }

    fn upsert(&mut self, key: &str, value: V) -> Option<V> {
        self.insert_hashed(hash_of(key), key, || Arc::from(key), value)
    }

    fn insert(&mut self, key: Arc<str>, value: V) -> Option<V> {
        let hash = hash_of(&key);
        let k = key.clone();
        self.insert_hashed(hash, &key, move || k, value)
    }

    fn remove(&mut self, key: &str) -> Option<(Arc<str>, V)> {
        let hash = hash_of(key);
        let slot = self.slot(hash);
        let i = self.chunk(slot).find(hash, key)?;
        self.len -= 1;
        let chunk = self.chunk_mut(slot);
        let (_, k, v) = chunk.entries.swap_remove(i);
        if chunk.entries.capacity() > 8 && chunk.entries.len() < chunk.entries.capacity() / 4 {
            chunk.entries.shrink_to_fit();
        }
        Some((k, v))
    }

    fn iter<'a>(&'a self) -> impl Iterator<Item = (&'a Arc<str>, &'a V)> + 'a
    where
        V: 'a,
    {
        self.groups
            .iter()
            .flat_map(|g| g.iter())
            .flat_map(|c| c.entries.iter().map(|(_, k, v)| (k, v)))
    }
}
