//! Backend on a two-level copy-on-write table with wide chunks.

use std::{hash::BuildHasher, sync::Arc};

use super::{Backend, KeyHasher, PersistentMap};

/// Average entries per chunk above which the table doubles its chunk count.
const MAX_AVG_CHUNK: usize = 32;

/// Two-level copy-on-write hash table: a flat array of chunk pointers, each chunk a small unsorted
/// table (hashes in one array, entries in another, scanned linearly). A write copies the chunk
/// array and the chunk it touches at most once per publication; everything else is shared with
/// published snapshots. Dense chunks make iteration and memory cheap; the price is that every
/// publication after a write copies the whole chunk array (one pointer per ~24 entries).
#[derive(Debug, Clone, Copy, Default)]
pub struct Chunked;

impl Backend for Chunked {
    type Map<V: Clone + Send + Sync + 'static> = ChunkedMap<V>;
    const NAME: &'static str = "chunked";
}

#[derive(Clone)]
struct Chunk<V> {
    hashes: Vec<u64>,
    entries: Vec<(Arc<str>, V)>,
}

impl<V> Default for Chunk<V> {
    fn default() -> Self {
        Chunk { hashes: Vec::new(), entries: Vec::new() }
    }
}

impl<V> Chunk<V> {
    fn find(&self, hash: u64, key: &str) -> Option<usize> {
        self.hashes
            .iter()
            .enumerate()
            .filter(|&(_, &h)| h == hash)
            .map(|(i, _)| i)
            .find(|&i| &*self.entries[i].0 == key)
    }

    fn push(&mut self, hash: u64, key: Arc<str>, value: V) {
        if self.entries.len() == self.entries.capacity() {
            // Grow by a quarter rather than doubling: chunks are many and small.
            let extra = (self.entries.len() / 4).max(4);
            self.entries.reserve_exact(extra);
            self.hashes.reserve_exact(extra);
        }
        self.hashes.push(hash);
        self.entries.push((key, value));
    }

    fn swap_remove(&mut self, i: usize) -> (Arc<str>, V) {
        self.hashes.swap_remove(i);
        let out = self.entries.swap_remove(i);
        if self.entries.capacity() > 8 && self.entries.len() < self.entries.capacity() / 4 {
            self.entries.shrink_to_fit();
            self.hashes.shrink_to_fit();
        }
        out
    }
}

/// [`PersistentMap`] of the [`Chunked`] backend.
pub struct ChunkedMap<V> {
    chunks: Arc<Vec<Arc<Chunk<V>>>>,
    /// log2 of the chunk count.
    bits: u32,
    len: usize,
}

impl<V> Clone for ChunkedMap<V> {
    fn clone(&self) -> Self {
        ChunkedMap { chunks: self.chunks.clone(), bits: self.bits, len: self.len }
    }
}

impl<V> Default for ChunkedMap<V> {
    fn default() -> Self {
        ChunkedMap { chunks: Arc::new(vec![Arc::new(Chunk::default())]), bits: 0, len: 0 }
    }
}

fn hash_of(key: &str) -> u64 {
    KeyHasher::default().hash_one(key)
}

impl<V: Clone> ChunkedMap<V> {
    fn slot(&self, hash: u64) -> usize {
        if self.bits == 0 { 0 } else { (hash >> (64 - self.bits)) as usize }
    }

    fn chunk_mut(&mut self, slot: usize) -> &mut Chunk<V> {
        Arc::make_mut(&mut Arc::make_mut(&mut self.chunks)[slot])
    }

    /// Doubles the chunk count when chunks get too full on average. Each old chunk splits into two
    /// by the next hash bit; entries are cloned (shared keys and values, so only reference counts).
    fn grow_if_needed(&mut self) {
        if self.len <= MAX_AVG_CHUNK << self.bits {
            return;
        }
        let new_bits = self.bits + 1;
        let mut out = Vec::with_capacity(1 << new_bits);
        for chunk in self.chunks.iter() {
            let (mut lo, mut hi) = (Chunk::default(), Chunk::default());
            for (h, (k, v)) in chunk.hashes.iter().zip(chunk.entries.iter()) {
                let bit = (h >> (64 - new_bits)) & 1;
                let dest = if bit == 0 { &mut lo } else { &mut hi };
                dest.push(*h, k.clone(), v.clone());
            }
            out.push(Arc::new(lo));
            out.push(Arc::new(hi));
        }
        self.chunks = Arc::new(out);
        self.bits = new_bits;
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
        let chunk = &self.chunks[self.slot(hash)];
        chunk.find(hash, key).map(|i| {
            let (k, v) = &chunk.entries[i];
            (k, v)
        })
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let hash = hash_of(key);
        let slot = self.slot(hash);
        let i = self.chunks[slot].find(hash, key)?;
        Some(&mut self.chunk_mut(slot).entries[i].1)
    }

    fn upsert(&mut self, key: &str, value: V) -> Option<V> {
        let hash = hash_of(key);
        let slot = self.slot(hash);
        match self.chunks[slot].find(hash, key) {
            Some(i) => Some(std::mem::replace(&mut self.chunk_mut(slot).entries[i].1, value)),
            None => {
                self.chunk_mut(slot).push(hash, Arc::from(key), value);
                self.len += 1;
                self.grow_if_needed();
                None
            }
        }
    }

    fn insert(&mut self, key: Arc<str>, value: V) -> Option<V> {
        let hash = hash_of(&key);
        let slot = self.slot(hash);
        match self.chunks[slot].find(hash, &key) {
            Some(i) => Some(std::mem::replace(&mut self.chunk_mut(slot).entries[i].1, value)),
            None => {
                self.chunk_mut(slot).push(hash, key, value);
                self.len += 1;
                self.grow_if_needed();
                None
            }
        }
    }

    fn remove(&mut self, key: &str) -> Option<(Arc<str>, V)> {
        let hash = hash_of(key);
        let slot = self.slot(hash);
        let i = self.chunks[slot].find(hash, key)?;
        self.len -= 1;
        Some(self.chunk_mut(slot).swap_remove(i))
    }

    fn iter<'a>(&'a self) -> impl Iterator<Item = (&'a Arc<str>, &'a V)> + 'a
    where
        V: 'a,
    {
        self.chunks.iter().flat_map(|c| c.entries.iter().map(|(k, v)| (k, v)))
    }
}
