//! Backend on a copy-on-write hash table of small chunks under a two-level directory.

use std::{hash::BuildHasher, sync::Arc};

use super::{Backend, KeyHasher, PersistentMap, Shared};

/// Average entries per chunk above which the table doubles its chunk count (so chunks hold 6 to
/// 12 entries on average). Small chunks keep the copy made by a write short: a write copies one
/// chunk, and each copied entry costs two reference-count increments now and two decrements when
/// the old version is dropped.
const MAX_AVG_CHUNK: usize = 12;
/// Fan-out of the tree above the chunks (log2): 16 pointers per inner node.
const FANOUT_BITS: u32 = 4;
/// Keys that [`ChunkedMap::resolve`] walks down the tree together: enough independent walks for
/// the processor to overlap their cache misses, few enough that the group's state stays in L1.
const RESOLVE_GROUP: usize = 64;

/// Copy-on-write hash table: small unsorted chunks of `(hash, key, value)` scanned linearly,
/// under a radix tree of 16-way nodes indexed by the top bits of the hash. The first write to a
/// chunk after a publication copies the chunk (6-12 entries) and the inner nodes on its path (16
/// pointers each); later writes in the same batch reuse those copies. A single-change
/// publication therefore copies a few dozen pointers whatever the size, and a batch of 1000
/// changes copies about 20 pointers and one chunk per change at 200,000 entries. Dense chunks make
/// iteration and memory cheap (about 32 bytes per entry plus a pointer per 6-12 entries).
///
/// Each pointer copied is a reference count written, usually in memory no cache holds. A copy
/// (and the drop of a superseded node, on whichever thread drops it) first reads all the counts
/// it will write ([`Shared::warm`]), so that their misses overlap: at 200,000 small pods in
/// batches of 1000 this took the writer's time per update from 5.4 to 4.6 µs and the
/// reclaimer's from 2.5 to 1.9 µs (BENCHMARKS.md, "Reading the counts before writing them").
#[derive(Debug, Clone, Copy, Default)]
pub struct Chunked;

impl Backend for Chunked {
    type Map<V: Shared> = ChunkedMap<V>;
    const NAME: &'static str = "chunked";

    fn resolve<'a, V: Shared, W: Shared>(
        map: &'a ChunkedMap<V>,
        keys: &'a ChunkedMap<W>,
    ) -> impl Iterator<Item = &'a V> + 'a {
        map.resolve(keys)
    }
}

struct Chunk<V: Shared> {
    entries: Vec<(u64, Arc<str>, V)>,
}

impl<V: Shared> Chunk<V> {
    /// Reads every reference count a copy or a drop of this chunk writes, so that their misses
    /// overlap instead of coming one per atomic write (see [`Shared`]).
    fn warm(&self) {
        let mut sum = 0usize;
        for (_, k, v) in &self.entries {
            sum = sum.wrapping_add(Arc::strong_count(k)).wrapping_add(v.warm());
        }
        std::hint::black_box(sum);
    }

    fn find(&self, hash: u64, key: &str) -> Option<usize> {
        self.entries.iter().position(|(h, k, _)| *h == hash && &**k == key)
    }
}

impl<V: Shared> Clone for Chunk<V> {
    fn clone(&self) -> Self {
        self.warm();
        // Room for one more entry, so that the write that caused the copy does not reallocate.
        let mut entries = Vec::with_capacity(self.entries.len() + 1);
        entries.extend(self.entries.iter().cloned());
        Chunk { entries }
    }
}

impl<V: Shared> Default for Chunk<V> {
    fn default() -> Self {
        Chunk { entries: Vec::new() }
    }
}

/// A node of the tree: inner nodes point to 2^k children (16 below the top), leaves are chunks.
enum Node<V: Shared> {
    Inner(Vec<Arc<Node<V>>>),
    Leaf(Chunk<V>),
}

impl<V: Shared> Clone for Node<V> {
    fn clone(&self) -> Self {
        match self {
            Node::Inner(children) => {
                warm_children(children);
                Node::Inner(children.clone())
            }
            Node::Leaf(chunk) => Node::Leaf(chunk.clone()),
        }
    }
}

/// Reads the reference counts of an inner node's children, which copying or dropping the node
/// writes (see [`Chunk::warm`]).
fn warm_children<V: Shared>(children: &[Arc<Node<V>>]) {
    let sum = children.iter().fold(0usize, |s, c| s.wrapping_add(Arc::strong_count(c)));
    std::hint::black_box(sum);
}

impl<V: Shared> Drop for Node<V> {
    fn drop(&mut self) {
        // Dropping the fields next writes every count read here: read them all first, so their
        // misses overlap (see `Chunk::warm`).
        match self {
            Node::Inner(children) => warm_children(children),
            Node::Leaf(chunk) => chunk.warm(),
        }
    }
}

/// [`PersistentMap`] of the [`Chunked`] backend.
pub struct ChunkedMap<V: Shared> {
    root: Arc<Node<V>>,
    /// log2 of the chunk count.
    bits: u32,
    len: usize,
}

impl<V: Shared> Clone for ChunkedMap<V> {
    fn clone(&self) -> Self {
        ChunkedMap { root: self.root.clone(), bits: self.bits, len: self.len }
    }
}

impl<V: Shared> Default for ChunkedMap<V> {
    fn default() -> Self {
        ChunkedMap { root: Arc::new(Node::Leaf(Chunk::default())), bits: 0, len: 0 }
    }
}

fn hash_of(key: &str) -> u64 {
    KeyHasher::default().hash_one(key)
}

/// Bits consumed by each inner level from the top for `bits` chunk bits: the top takes the
/// remainder, every level below takes [`FANOUT_BITS`].
fn level_bits(bits: u32) -> impl Iterator<Item = u32> {
    let levels = bits.div_ceil(FANOUT_BITS);
    let top = bits - FANOUT_BITS * levels.saturating_sub(1);
    (0..levels).map(move |i| if i == 0 { top } else { FANOUT_BITS })
}

/// Builds the tree over `chunks` (in chunk-index order) for `bits` chunk bits.
fn build<V: Shared>(chunks: Vec<Chunk<V>>, bits: u32) -> Arc<Node<V>> {
    let mut nodes: Vec<Arc<Node<V>>> =
        chunks.into_iter().map(|c| Arc::new(Node::Leaf(c))).collect();
    let widths: Vec<u32> = level_bits(bits).collect();
    for &w in widths.iter().rev() {
        let per = 1usize << w;
        let mut parents = Vec::with_capacity(nodes.len() / per);
        let mut it = nodes.into_iter();
        loop {
            let group: Vec<Arc<Node<V>>> = it.by_ref().take(per).collect();
            if group.is_empty() {
                break;
            }
            parents.push(Arc::new(Node::Inner(group)));
        }
        nodes = parents;
    }
    nodes.pop().unwrap_or_else(|| Arc::new(Node::Leaf(Chunk::default())))
}

impl<V: Shared> ChunkedMap<V> {
    /// Chunk index of a hash: its top `bits` bits.
    fn chunk_index(&self, hash: u64) -> u64 {
        if self.bits == 0 { 0 } else { hash >> (64 - self.bits) }
    }

    fn chunk(&self, hash: u64) -> &Chunk<V> {
        let index = self.chunk_index(hash);
        let mut node = &*self.root;
        let mut shift = self.bits;
        for w in level_bits(self.bits) {
            shift -= w;
            let slot = ((index >> shift) & ((1 << w) - 1)) as usize;
            node = match node {
                Node::Inner(children) => &children[slot],
                Node::Leaf(_) => unreachable!("tree depth follows `bits`"),
            };
        }
        match node {
            Node::Leaf(chunk) => chunk,
            Node::Inner(_) => unreachable!("tree depth follows `bits`"),
        }
    }

    /// The chunk for `hash`, copying every shared node on the way (copy-on-write).
    fn chunk_mut(&mut self, hash: u64) -> &mut Chunk<V> {
        let index = self.chunk_index(hash);
        let mut node = &mut self.root;
        let mut shift = self.bits;
        for w in level_bits(self.bits) {
            shift -= w;
            let slot = ((index >> shift) & ((1 << w) - 1)) as usize;
            node = match Arc::make_mut(node) {
                Node::Inner(children) => &mut children[slot],
                Node::Leaf(_) => unreachable!("tree depth follows `bits`"),
            };
        }
        match Arc::make_mut(node) {
            Node::Leaf(chunk) => chunk,
            Node::Inner(_) => unreachable!("tree depth follows `bits`"),
        }
    }

    /// Doubles the chunk count when chunks get too full on average, and rebuilds the tree. Each
    /// entry moves to the chunk its top `bits + 1` hash bits name; entries are cloned (shared keys
    /// and values: only reference counts).
    fn grow_if_needed(&mut self) {
        if self.len <= MAX_AVG_CHUNK << self.bits {
            return;
        }
        let new_bits = self.bits + 1;
        let mut chunks: Vec<Chunk<V>> = (0..1usize << new_bits).map(|_| Chunk::default()).collect();
        for (h, k, v) in Iter::new(&self.root) {
            chunks[(h >> (64 - new_bits)) as usize].entries.push((*h, k.clone(), v.clone()));
        }
        self.root = build(chunks, new_bits);
        self.bits = new_bits;
    }

    fn insert_hashed(
        &mut self,
        hash: u64,
        key: &str,
        make_key: impl FnOnce() -> Arc<str>,
        value: V,
    ) -> Option<V> {
        match self.chunk(hash).find(hash, key) {
            Some(i) => Some(std::mem::replace(&mut self.chunk_mut(hash).entries[i].2, value)),
            None => {
                self.chunk_mut(hash).entries.push((hash, make_key(), value));
                self.len += 1;
                self.grow_if_needed();
                None
            }
        }
    }
}

impl<V: Shared> ChunkedMap<V> {
    /// The values this map holds under the keys of `keys` (another map of this backend, such as
    /// an index bucket of keys), in `keys`' order of iteration; keys this map lacks are skipped.
    ///
    /// It gives what `keys.iter().filter_map(|(k, _)| self.get(k))` gives, faster. Each lookup
    /// walks four to six nodes down the tree at 200,000 to 1,000,000 entries, and each node is
    /// usually a cache miss; one lookup after another, the misses come one at a time. Here the
    /// keys go down in groups of 64, one tree level for the whole group at a time, so the walks
    /// of different keys are independent loads that the processor overlaps. The hash each key
    /// already has in `keys` is used instead of hashing it again, and a stored key that is the
    /// same allocation as the wanted one (the store shares its keys with the index buckets)
    /// matches without reading its bytes. At a million entries, 1,000 keys took 203 µs this way
    /// against 756 µs one get at a time (BENCHMARKS.md, "Key lookups in groups").
    pub fn resolve<'a, W: Shared>(&'a self, keys: &'a ChunkedMap<W>) -> Resolve<'a, V, W> {
        Resolve {
            map: self,
            keys: Iter::new(&keys.root),
            found: [None; RESOLVE_GROUP],
            next: 0,
            len: 0,
        }
    }
}

/// Iterator of [`ChunkedMap::resolve`].
pub struct Resolve<'a, V: Shared, W: Shared> {
    map: &'a ChunkedMap<V>,
    keys: Iter<'a, W>,
    /// The current group's values, `found[next..len]` not yet returned.
    found: [Option<&'a V>; RESOLVE_GROUP],
    next: usize,
    len: usize,
}

impl<V: Shared, W: Shared> std::fmt::Debug for Resolve<'_, V, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolve").field("buffered", &(self.len - self.next)).finish()
    }
}

impl<'a, V: Shared, W: Shared> Resolve<'a, V, W> {
    /// Looks up the next group of keys. Returns false when `keys` is exhausted.
    fn refill(&mut self) -> bool {
        let Some(first) = self.keys.next() else { return false };
        let mut group = [first; RESOLVE_GROUP];
        let mut n = 1;
        while n < RESOLVE_GROUP {
            match self.keys.next() {
                Some(entry) => {
                    group[n] = entry;
                    n += 1;
                }
                None => break,
            }
        }
        let map = self.map;
        let mut chunk_index = [0u64; RESOLVE_GROUP];
        for (ci, (hash, _, _)) in chunk_index.iter_mut().zip(&group[..n]) {
            *ci = map.chunk_index(*hash);
        }
        // One level of the tree for every key of the group, then the next level: the loads of
        // different keys do not depend on each other, so their misses overlap.
        let mut nodes: [&'a Node<V>; RESOLVE_GROUP] = [&*map.root; RESOLVE_GROUP];
        let mut shift = map.bits;
        for w in level_bits(map.bits) {
            shift -= w;
            let mask = (1u64 << w) - 1;
            for (node, ci) in nodes[..n].iter_mut().zip(&chunk_index) {
                let slot = ((ci >> shift) & mask) as usize;
                *node = match *node {
                    Node::Inner(children) => &children[slot],
                    Node::Leaf(_) => unreachable!("tree depth follows `bits`"),
                };
            }
        }
        self.next = 0;
        self.len = 0;
        for (node, (hash, key, _)) in nodes[..n].iter().zip(&group[..n]) {
            let Node::Leaf(chunk) = *node else { unreachable!("tree depth follows `bits`") };
            let found = chunk
                .entries
                .iter()
                .find(|(h, k, _)| h == hash && (Arc::ptr_eq(k, key) || **k == **key));
            if let Some((_, _, value)) = found {
                self.found[self.len] = Some(value);
                self.len += 1;
            }
        }
        // A caller that copies the values (an owned read) writes their reference counts, each
        // usually a miss, and an atomic write does not let the next one's miss start before it
        // ends: read them all first, so the misses overlap (see `Shared::warm`).
        let warmed =
            self.found[..self.len].iter().flatten().fold(0usize, |s, v| s.wrapping_add(v.warm()));
        std::hint::black_box(warmed);
        true
    }
}

impl<'a, V: Shared, W: Shared> Iterator for Resolve<'a, V, W> {
    type Item = &'a V;

    fn next(&mut self) -> Option<&'a V> {
        while self.next == self.len {
            if !self.refill() {
                return None;
            }
        }
        let value = self.found[self.next];
        self.next += 1;
        value
    }
}

/// Depth-first iteration over the entries of a tree.
struct Iter<'a, V: Shared> {
    stack: Vec<std::slice::Iter<'a, Arc<Node<V>>>>,
    leaf: std::slice::Iter<'a, (u64, Arc<str>, V)>,
}

impl<'a, V: Shared> Iter<'a, V> {
    fn new(root: &'a Node<V>) -> Self {
        match root {
            Node::Inner(children) => Iter { stack: vec![children.iter()], leaf: [].iter() },
            Node::Leaf(chunk) => Iter { stack: Vec::new(), leaf: chunk.entries.iter() },
        }
    }
}

impl<'a, V: Shared> Iterator for Iter<'a, V> {
    type Item = &'a (u64, Arc<str>, V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entry) = self.leaf.next() {
                return Some(entry);
            }
            let top = self.stack.last_mut()?;
            match top.next() {
                None => {
                    self.stack.pop();
                }
                Some(child) => match &**child {
                    Node::Inner(children) => self.stack.push(children.iter()),
                    Node::Leaf(chunk) => self.leaf = chunk.entries.iter(),
                },
            }
        }
    }
}

impl<V: Shared> PersistentMap<V> for ChunkedMap<V>
where
    V: Shared,
{
    fn warm(&self) -> usize {
        Arc::strong_count(&self.root)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, key: &str) -> Option<&V> {
        self.get_key_value(key).map(|(_, v)| v)
    }

    fn get_key_value(&self, key: &str) -> Option<(&Arc<str>, &V)> {
        let hash = hash_of(key);
        let chunk = self.chunk(hash);
        chunk.find(hash, key).map(|i| {
            let (_, k, v) = &chunk.entries[i];
            (k, v)
        })
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let hash = hash_of(key);
        let i = self.chunk(hash).find(hash, key)?;
        Some(&mut self.chunk_mut(hash).entries[i].2)
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
        let i = self.chunk(hash).find(hash, key)?;
        self.len -= 1;
        let chunk = self.chunk_mut(hash);
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
        Iter::new(&self.root).map(|(_, k, v)| (k, v))
    }
}
