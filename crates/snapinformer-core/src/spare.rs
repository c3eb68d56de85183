//! Giving back the spare capacity a burst left behind.
//!
//! A relist of 200,000 objects grows the queue, the in-flight key set and each handler's buffer
//! to 200,000 slots; emptied, they would keep that capacity (tens of bytes per cached object)
//! for the informer's whole life. These helpers shrink a collection once it is mostly empty:
//! only when its capacity is more than four times what it holds and above a floor that normal
//! batches never exceed, so the cost is amortised over the burst that grew it.

use std::{
    collections::{HashMap, VecDeque},
    hash::{BuildHasher, Hash},
};

/// Capacity kept whatever the load: more than a batch (1000 deltas) ever needs.
const FLOOR: usize = 4096;

/// Shrinks `v` when it holds less than a quarter of its capacity (and the capacity is above
/// the floor), keeping room for twice what it holds.
pub(crate) fn shrink_deque<T>(v: &mut VecDeque<T>) {
    if v.capacity() > FLOOR && v.len() < v.capacity() / 4 {
        v.shrink_to((v.len() * 2).max(FLOOR));
    }
}

/// The same for a map.
pub(crate) fn shrink_map<K: Eq + Hash, V, S: BuildHasher>(m: &mut HashMap<K, V, S>) {
    if m.capacity() > FLOOR && m.len() < m.capacity() / 4 {
        m.shrink_to((m.len() * 2).max(FLOOR));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_burst_gives_its_capacity_back_and_small_loads_keep_theirs() {
        let mut v: VecDeque<u64> = (0..200_000).collect();
        while v.len() > 10 {
            v.pop_front();
            shrink_deque(&mut v);
        }
        assert!(v.capacity() <= 2 * FLOOR, "{}", v.capacity());
        let mut small: VecDeque<u64> = VecDeque::with_capacity(FLOOR);
        small.push_back(1);
        shrink_deque(&mut small);
        assert!(small.capacity() >= FLOOR);

        let mut m: HashMap<u64, u64> = (0..200_000).map(|i| (i, i)).collect();
        m.clear();
        shrink_map(&mut m);
        assert!(m.capacity() <= 2 * FLOOR, "{}", m.capacity());
    }
}
