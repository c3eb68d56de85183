//! The interning table: one copy of every distinct string, array, object and label map that
//! someone still holds.

use std::{
    collections::BTreeMap,
    hash::{BuildHasher, Hasher},
    sync::{Arc, Mutex, OnceLock},
};

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use crate::value::{Array, Key, Object, Str, Value, dedup_keys, keys_distinct};

/// Slots in the cache of keys given as `&'static str` (struct field names).
const STATIC_KEYS: usize = 512;

/// Shards per table: a sweep visits one shard, so its pause is a 1/256th of the table.
const SHARDS: usize = 256;

/// A shard is swept when it has grown by a quarter since its last sweep...
const GROWTH_NUM: usize = 5;
const GROWTH_DEN: usize = 4;
/// ... and holds at least this many entries.
const MIN_SWEEP: usize = 8;

/// The shard a hash belongs to: bits 32-39 of it. Each shard's `HashTable` takes its bucket
/// from the hash's low bits and its one-byte tag (the filter it compares sixteen slots with at
/// once) from the top seven, so the shard must come from neither: taken from the top byte, as
/// it once was, every entry of a shard had the same tag, and every lookup compared the key
/// with each entry of its probe group, one cache miss apiece.
fn shard_of(hash: u64) -> usize {
    (hash >> 32) as usize % SHARDS
}

/// One kind of interned node (strings, arrays, objects, label maps), split into shards.
struct Table<T> {
    shards: Box<[Shard<T>]>,
}

struct Shard<T> {
    table: HashTable<T>,
    /// Sweep when the shard reaches this many entries.
    sweep_at: usize,
}

impl<T> Table<T> {
    fn new() -> Self {
        Table {
            shards: (0..SHARDS)
                .map(|_| Shard { table: HashTable::new(), sweep_at: MIN_SWEEP })
                .collect(),
        }
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.table.len()).sum()
    }

    /// The node equal to the one `hash` and `eq` describe, or the one `make` builds (then
    /// stored). Sweeps the shard first if it has grown enough.
    #[allow(clippy::too_many_arguments)]
    fn intern<K>(
        &mut self,
        hash: u64,
        key: K,
        eq: impl Fn(&T, &K) -> bool,
        make: impl FnOnce(K) -> T,
        rehash: impl Fn(&T) -> u64,
        strong: impl Fn(&T) -> usize,
        stats: &mut Counters,
    ) -> T
    where
        T: Clone,
    {
        let shard = &mut self.shards[shard_of(hash)];
        if let Some(found) = shard.table.find(hash, |x| eq(x, &key)) {
            stats.hits += 1;
            return found.clone();
        }
        if shard.table.len() >= shard.sweep_at {
            let before = shard.table.len();
            shard.table.retain(|n| strong(n) > 1);
            let after = shard.table.len();
            stats.sweeps += 1;
            stats.swept += (before - after) as u64;
            shard.sweep_at = (after * GROWTH_NUM / GROWTH_DEN).max(after + MIN_SWEEP);
            if shard.table.capacity() > 4 * (after + MIN_SWEEP) {
                shard.table.shrink_to(after * GROWTH_NUM / GROWTH_DEN + MIN_SWEEP, &rehash);
            }
        }
        stats.misses += 1;
        let node = make(key);
        shard.table.insert_unique(hash, node.clone(), rehash);
        node
    }

    /// Drops every entry nobody else holds; returns how many.
    fn sweep_all(&mut self, strong: impl Fn(&T) -> usize, rehash: impl Fn(&T) -> u64) -> usize {
        let mut swept = 0;
        for shard in self.shards.iter_mut() {
            let before = shard.table.len();
            shard.table.retain(|n| strong(n) > 1);
            let after = shard.table.len();
            swept += before - after;
            shard.sweep_at = (after * GROWTH_NUM / GROWTH_DEN).max(after + MIN_SWEEP);
            shard.table.shrink_to(after, &rehash);
        }
        swept
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    hits: u64,
    misses: u64,
    sweeps: u64,
    swept: u64,
}

/// What an [`Interner`] holds and has done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InternerStats {
    /// Distinct long strings held (keys included).
    pub strings: usize,
    /// Distinct arrays held.
    pub arrays: usize,
    /// Distinct objects held.
    pub objects: usize,
    /// Distinct label maps held.
    pub label_maps: usize,
    /// Lookups that found an existing node.
    pub hits: u64,
    /// Lookups that stored a new node.
    pub misses: u64,
    /// Shard sweeps run.
    pub sweeps: u64,
    /// Entries those sweeps dropped because no one else held them.
    pub swept: u64,
}

impl InternerStats {
    /// All entries held.
    pub fn entries(&self) -> usize {
        self.strings + self.arrays + self.objects + self.label_maps
    }
}

/// The hash-consing table behind compact objects.
///
/// Every long string (more than [`INLINE_MAX`](crate::INLINE_MAX) bytes), array, object and
/// label map decoded through an interner is looked up here first: an equal one that is still
/// held by some object is reused (one more reference, no allocation), so the thousand pods of
/// one StatefulSet share one container list, one set of volumes, one owner reference, one copy
/// of every image name.
///
/// # Forgetting
///
/// The table holds a strong reference to each node. A node whose only holder is the table is
/// garbage: a shard is swept (its garbage dropped) when it has grown by a quarter since its last
/// sweep, so each shard holds at most about 1.25 times its live entries plus a small constant,
/// and the work of sweeping is a few entry checks per insertion. Dropping a node releases its
/// children, which become garbage in their own shards and go at those shards' next sweeps.
/// Nodes are compared shallowly (children by pointer), which is exact because children are
/// interned first.
///
/// # Threads
///
/// An interner is used by one thread at a time (`&mut self`); objects built from it are
/// `Send + Sync` and may be dropped anywhere. [`Interner::global`] is the process-wide one that
/// [`CompactPod`](crate::CompactPod)'s `Deserialize` uses.
pub struct Interner {
    state: FixedState,
    strings: Table<Arc<str>>,
    arrays: Table<Arc<[Value]>>,
    objects: Table<Arc<[(Key, Value)]>>,
    labels: Table<Arc<BTreeMap<String, String>>>,
    /// Keys by the address and length of a `&'static str` (the field names a `Serialize`
    /// struct gives the encoder): direct-mapped, a slot replaced on collision. A hit costs no
    /// hashing of the text and no comparing it with the table's copy.
    static_keys: Box<[Option<(usize, usize, Key)>]>,
    /// The elements of the arrays being built, innermost last: the decoder and the encoder push
    /// each element here and take an array's off the top when it ends, so that building a node
    /// allocates nothing when an equal one is already interned.
    items: Vec<Value>,
    /// The same for the entries of the objects being built.
    entries: Vec<(Key, Value)>,
    counters: Counters,
}

impl Default for Interner {
    fn default() -> Self {
        Interner::new()
    }
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interner").field("stats", &self.stats()).finish()
    }
}

fn hash_value<H: Hasher>(v: &Value, h: &mut H) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
        Value::U64(n) => {
            h.write_u8(3);
            h.write_u64(*n);
        }
        Value::I64(n) => {
            h.write_u8(4);
            h.write_i64(*n);
        }
        Value::F64(n) => {
            h.write_u8(5);
            h.write_u64(n.to_bits());
        }
        Value::String(s) => match s.arc() {
            Some(a) => {
                h.write_u8(6);
                h.write_usize(Arc::as_ptr(a) as *const u8 as usize);
            }
            None => {
                h.write_u8(7);
                h.write(s.as_bytes());
            }
        },
        Value::Array(a) => {
            h.write_u8(8);
            h.write_usize(Arc::as_ptr(&a.0) as *const u8 as usize);
        }
        Value::Object(o) => {
            h.write_u8(9);
            h.write_usize(Arc::as_ptr(&o.0) as *const u8 as usize);
        }
    }
}

/// Shallow equality: children (long strings, arrays, objects) by pointer. Implies equality.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => match (x.arc(), y.arc()) {
            (Some(x), Some(y)) => Arc::ptr_eq(x, y),
            (None, None) => x.as_bytes() == y.as_bytes(),
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => x.ptr_eq(y),
        (Value::Object(x), Value::Object(y)) => x.ptr_eq(y),
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn hash_items(state: &FixedState, items: &[Value]) -> u64 {
    let mut h = state.build_hasher();
    h.write_usize(items.len());
    for v in items {
        hash_value(v, &mut h);
    }
    h.finish()
}

fn hash_entries(state: &FixedState, entries: &[(Key, Value)]) -> u64 {
    let mut h = state.build_hasher();
    h.write_usize(entries.len());
    for (k, v) in entries {
        h.write_usize(Arc::as_ptr(k) as *const u8 as usize);
        hash_value(v, &mut h);
    }
    h.finish()
}

fn hash_labels(state: &FixedState, map: &BTreeMap<String, String>) -> u64 {
    state.hash_one(map)
}

impl Interner {
    /// An empty interner.
    pub fn new() -> Interner {
        Interner {
            state: FixedState::with_seed(0x5eed_c0de_1234_5678),
            strings: Table::new(),
            arrays: Table::new(),
            objects: Table::new(),
            labels: Table::new(),
            static_keys: vec![None; STATIC_KEYS].into_boxed_slice(),
            items: Vec::new(),
            entries: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// The process-wide interner that [`CompactPod`](crate::CompactPod)'s `Deserialize` (and so
    /// the compact informer's reflector) decodes through. Locked once per decoded object.
    pub fn global() -> &'static Mutex<Interner> {
        static GLOBAL: OnceLock<Mutex<Interner>> = OnceLock::new();
        GLOBAL.get_or_init(|| Mutex::new(Interner::new()))
    }

    /// An interned shared string (the same allocation for the same text).
    pub fn shared_str(&mut self, s: &str) -> Arc<str> {
        let state = self.state.clone();
        let hash = state.hash_one(s);
        self.strings.intern(
            hash,
            s,
            |x, s| &**x == *s,
            Arc::from,
            |x| state.hash_one(&**x),
            Arc::strong_count,
            &mut self.counters,
        )
    }

    /// A string: inline if short, else interned.
    pub fn str(&mut self, s: &str) -> Str {
        Str::inline(s).unwrap_or_else(|| Str::shared(self.shared_str(s)))
    }

    /// An object key (always interned).
    pub fn key(&mut self, s: &str) -> Key {
        self.shared_str(s)
    }

    /// An object key given as a `&'static str`: the same key as [`key`](Interner::key), found
    /// by the text's address when it was seen before.
    pub(crate) fn static_key(&mut self, s: &'static str) -> Key {
        let (addr, len) = (s.as_ptr() as usize, s.len());
        let slot = ((addr >> 3) ^ (addr >> 12) ^ len) % STATIC_KEYS;
        if let Some((a, l, key)) = &self.static_keys[slot]
            && (*a, *l) == (addr, len)
        {
            self.counters.hits += 1;
            return key.clone();
        }
        let key = self.key(s);
        self.static_keys[slot] = Some((addr, len, key.clone()));
        key
    }

    /// An interned array of already interned values.
    pub fn array(&mut self, items: Vec<Value>) -> Array {
        self.array_of(items, true)
    }

    /// An interned object of already interned keys and values (later duplicate keys win).
    pub fn object(&mut self, entries: Vec<(Key, Value)>) -> Object {
        self.object_of(entries, true)
    }

    /// The array of `items`, through the stack as [`finish_array`](Self::finish_array) builds it.
    pub(crate) fn array_of(&mut self, items: Vec<Value>, interned: bool) -> Array {
        let mark = self.items.len();
        self.items.extend(items);
        self.finish_array(mark, interned)
    }

    /// The object of `entries`, through the stack as [`finish_object`](Self::finish_object)
    /// builds it.
    pub(crate) fn object_of(&mut self, entries: Vec<(Key, Value)>, interned: bool) -> Object {
        let mark = self.entries.len();
        self.entries.extend(entries);
        self.finish_object(mark, interned)
    }

    /// Forgets the nodes under construction: called where a whole value starts, when none can
    /// be (what is left is from a decode or encode that failed half-way).
    pub(crate) fn start_value(&mut self) {
        self.items.clear();
        self.entries.clear();
    }

    /// Where the elements of an array begun now will start.
    pub(crate) fn items_mark(&self) -> usize {
        self.items.len()
    }

    /// Adds an element to the innermost array being built.
    pub(crate) fn push_item(&mut self, v: Value) {
        self.items.push(v);
    }

    /// The array of the elements pushed since `mark` (taken off the stack): interned, or a new
    /// unshared one.
    pub(crate) fn finish_array(&mut self, mark: usize, interned: bool) -> Array {
        if !interned {
            return Array(self.items.drain(mark..).collect());
        }
        let state = self.state.clone();
        let items = &self.items[mark..];
        let hash = hash_items(&state, items);
        let arc = self.arrays.intern(
            hash,
            items,
            |x, items| {
                x.len() == items.len() && x.iter().zip(*items).all(|(a, b)| same_value(a, b))
            },
            Arc::from,
            |x| hash_items(&state, x),
            Arc::strong_count,
            &mut self.counters,
        );
        self.items.truncate(mark);
        Array(arc)
    }

    /// Where the entries of an object begun now will start.
    pub(crate) fn entries_mark(&self) -> usize {
        self.entries.len()
    }

    /// Adds an entry to the innermost object being built.
    pub(crate) fn push_entry(&mut self, k: Key, v: Value) {
        self.entries.push((k, v));
    }

    /// The object of the entries pushed since `mark` (taken off the stack; later duplicate
    /// keys win): interned, or a new unshared one.
    pub(crate) fn finish_object(&mut self, mark: usize, interned: bool) -> Object {
        if !keys_distinct(&self.entries[mark..]) {
            let entries = dedup_keys(self.entries.drain(mark..).collect());
            self.entries.extend(entries);
        }
        if !interned {
            return Object(self.entries.drain(mark..).collect());
        }
        let state = self.state.clone();
        let entries = &self.entries[mark..];
        let hash = hash_entries(&state, entries);
        let arc = self.objects.intern(
            hash,
            entries,
            |x, e| {
                x.len() == e.len()
                    && x.iter()
                        .zip(*e)
                        .all(|((ka, va), (kb, vb))| Arc::ptr_eq(ka, kb) && same_value(va, vb))
            },
            Arc::from,
            |x| hash_entries(&state, x),
            Arc::strong_count,
            &mut self.counters,
        );
        self.entries.truncate(mark);
        Object(arc)
    }

    /// An interned label map (the hot copy [`CompactPod`](crate::CompactPod) keeps for
    /// selectors and label indexes).
    pub fn labels(&mut self, map: BTreeMap<String, String>) -> Arc<BTreeMap<String, String>> {
        let state = self.state.clone();
        let hash = hash_labels(&state, &map);
        self.labels.intern(
            hash,
            map,
            |x, m| **x == *m,
            Arc::new,
            |x| hash_labels(&state, x),
            Arc::strong_count,
            &mut self.counters,
        )
    }

    /// Drops every entry that only the table holds, repeating until nothing more goes (a
    /// dropped node releases its children). Returns the number dropped. Sweeping also happens
    /// incrementally during interning; this is for tests and quiet moments.
    pub fn sweep(&mut self) -> usize {
        self.static_keys.fill(None);
        self.start_value();
        let state = self.state.clone();
        let mut total = 0;
        loop {
            let n = self.labels.sweep_all(Arc::strong_count, |x| hash_labels(&state, x))
                + self.objects.sweep_all(Arc::strong_count, |x| hash_entries(&state, x))
                + self.arrays.sweep_all(Arc::strong_count, |x| hash_items(&state, x))
                + self.strings.sweep_all(Arc::strong_count, |x| state.hash_one(&**x));
            total += n;
            if n == 0 {
                return total;
            }
        }
    }

    /// Sizes and counters.
    pub fn stats(&self) -> InternerStats {
        InternerStats {
            strings: self.strings.len(),
            arrays: self.arrays.len(),
            objects: self.objects.len(),
            label_maps: self.labels.len(),
            hits: self.counters.hits,
            misses: self.counters.misses,
            sweeps: self.counters.sweeps,
            swept: self.counters.swept,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_nodes_are_shared_and_forgotten_when_no_one_holds_them() {
        let mut i = Interner::new();
        let long = "registry.example.com/web:1.27.3-long-enough";
        let a = i.str(long);
        let b = i.str(long);
        assert!(Arc::ptr_eq(a.arc().unwrap(), b.arc().unwrap()));
        let k = i.key("image");
        let o1 = i.object(vec![(k.clone(), Value::String(a.clone()))]);
        let o2 = i.object(vec![(k.clone(), Value::String(b.clone()))]);
        assert!(o1.ptr_eq(&o2));
        let arr = i.array(vec![Value::Object(o1.clone()), Value::U64(1)]);
        assert!(arr.ptr_eq(&i.array(vec![Value::Object(o2.clone()), Value::U64(1)])));
        assert_eq!(i.stats().entries(), 4);
        drop((a, b, k, o1, o2, arr));
        assert_eq!(i.sweep(), 4);
        assert_eq!(i.stats().entries(), 0);
    }

    #[test]
    fn hashes_of_one_shard_keep_varied_tags_and_buckets() {
        // hashbrown's tag is the hash's top seven bits and its bucket the low bits: within one
        // shard both must still vary, or the table's filter and spread are lost.
        let state = FixedState::with_seed(1);
        let in_shard_0: Vec<u64> =
            (0u64..200_000).map(|i| state.hash_one(i)).filter(|&h| shard_of(h) == 0).collect();
        assert!(in_shard_0.len() > 500, "{} hashes in shard 0", in_shard_0.len());
        let tags: std::collections::HashSet<u64> = in_shard_0.iter().map(|h| h >> 57).collect();
        let buckets: std::collections::HashSet<u64> = in_shard_0.iter().map(|h| h & 0xff).collect();
        assert!(tags.len() > 100, "{} distinct tags of 128", tags.len());
        assert!(buckets.len() > 200, "{} distinct low bytes of 256", buckets.len());
    }

    #[test]
    fn static_keys_are_the_keys_of_their_text_even_when_slots_collide() {
        let mut i = Interner::new();
        // More texts than slots, so that slots are shared and replaced.
        let texts: Vec<&'static str> = (0..4 * STATIC_KEYS)
            .map(|n| &*Box::leak(format!("field{n}").into_boxed_str()))
            .collect();
        for _ in 0..2 {
            for t in &texts {
                let k = i.static_key(t);
                assert_eq!(&*k, *t);
                assert!(Arc::ptr_eq(&k, &i.key(t)), "`{t}` is the interned key");
            }
        }
        // The cache holds keys (those it evicted went at incremental sweeps) until a full sweep.
        let cached = i.static_keys.iter().flatten().count();
        assert!(cached > STATIC_KEYS / 2, "{cached} slots in use");
        assert!(i.stats().entries() >= cached);
        assert!(i.sweep() >= cached);
        assert_eq!(i.stats().entries(), 0);
    }

    #[test]
    fn nodes_that_differ_in_one_child_are_not_shared() {
        let mut i = Interner::new();
        let k = i.key("n");
        let a = i.object(vec![(k.clone(), Value::U64(1))]);
        let b = i.object(vec![(k.clone(), Value::I64(-1))]);
        let c = i.object(vec![(k.clone(), Value::F64(1.0))]);
        assert!(!a.ptr_eq(&b) && !a.ptr_eq(&c) && !b.ptr_eq(&c));
        assert_ne!(Value::Object(a), Value::Object(c));
    }
}
