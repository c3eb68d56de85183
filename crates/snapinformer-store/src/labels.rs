//! Label selectors over the primary map without reading the objects: every entry carries a
//! 64-bit digest of its object's labels beside its pointer.
//!
//! A list with a label selector (client-go's `List(selector)` on a lister) must test every object
//! of the namespace, and when the namespace holds most of the store that means reading every
//! object: its labels sit in the object's own allocations, two or three cache misses per object
//! (the map's pointer to the object, the label map, the label strings). At 200,000 pods that was
//! about 300 ns a pod, 59 ms a list, and ten readers listing that way took more than half a core
//! (BENCHMARKS.md, "Label digests").
//!
//! So the writer computes, when it stores an object, a Bloom filter of its labels: for each
//! `key=value` pair three of 64 bits, chosen by a hash of the pair. A selector's pairs give a
//! mask; an entry whose digest lacks any bit of the mask cannot match and is skipped without
//! touching the object. An entry whose digest has every bit may still not match (with the five
//! labels of the benchmark's pods and a one-pair selector, 0.9% of the other pods pass by
//! chance; with eight labels about 3%), so every candidate is then
//! tested on its real labels: the digest only decides what need not be read, never what is
//! returned.
//!
//! Costs: 8 bytes per entry in the primary map, and reading and hashing the labels on every
//! write. For a pod built long before on another thread, out of the writer's cache, that was
//! about 1.9 µs per update at the median in the `store` benchmark's saturation phase (five
//! labels; BENCHMARKS.md, "Label digests").

use std::{
    collections::BTreeMap,
    hash::{BuildHasher, Hash, Hasher},
    sync::Arc,
};

use crate::{ObjectAccess, backend::Shared};

/// A Bloom filter of an object's `key=value` label pairs, 64 bits, [`BITS_PER_PAIR`] bits per
/// pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelDigest(u64);

impl LabelDigest {
    /// The digest of a store that keeps none: every bit set, so every entry is a candidate.
    pub(crate) const ANY: LabelDigest = LabelDigest(u64::MAX);

    /// The digest of `labels` (none: empty).
    pub(crate) fn of(labels: Option<&BTreeMap<String, String>>) -> Self {
        LabelDigest(labels.map_or(0, |l| l.iter().fold(0, |d, (k, v)| d | pair_bits(k, v))))
    }

    /// The mask a selector's pairs set; an object matching every pair has every bit of it.
    pub(crate) fn mask(selector: &[(&str, &str)]) -> u64 {
        selector.iter().fold(0, |m, (k, v)| m | pair_bits(k, v))
    }

    /// Whether an object with this digest may carry every pair that set `mask`. `false` is
    /// certain; `true` must be confirmed on the object's labels.
    #[inline]
    pub(crate) fn may_match(self, mask: u64) -> bool {
        self.0 & mask == mask
    }
}

/// The bits one pair sets in a digest.
///
/// Three, rather than two, because three pass fewer entries that do not match. With the five
/// labels of the `store` benchmark's pods, a selector `app=<one owner>` lets through 0.89% of
/// the other owners' pods with three bits and 1.69% with two (the test below counts them).
/// For labels that hash independently, `(1 - e^(-labels x bits / 64))^bits` passes: up to
/// about eighteen labels three bits pass fewer than two; beyond, a few more (at 25 labels 33%
/// against 29%).
const BITS_PER_PAIR: u32 = 3;

/// The bits of one pair (see [`BITS_PER_PAIR`]).
fn pair_bits(key: &str, value: &str) -> u64 {
    pair_bits_of(key, value, BITS_PER_PAIR)
}

/// `bits` bits for one pair, from one 64-bit hash (six bits each; two may coincide).
fn pair_bits_of(key: &str, value: &str, bits: u32) -> u64 {
    let mut h = crate::backend::KeyHasher::default().build_hasher();
    key.hash(&mut h);
    value.hash(&mut h);
    let h = h.finish();
    (0..bits).fold(0, |set, i| set | 1 << ((h >> (6 * i)) & 63))
}

/// Whether `obj` carries every `(key, value)` of `selector` (an equality-based label selector;
/// an empty selector matches every object).
pub(crate) fn labels_match<T>(
    access: &ObjectAccess<T>,
    obj: &T,
    selector: &[(String, String)],
) -> bool {
    if selector.is_empty() {
        return true;
    }
    let Some(labels) = (access.labels)(obj) else { return false };
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// What the primary map holds per key: the object and its label digest.
pub(crate) struct Entry<T> {
    pub(crate) obj: Arc<T>,
    pub(crate) labels: LabelDigest,
}

impl<T> Clone for Entry<T> {
    #[inline]
    fn clone(&self) -> Self {
        Entry { obj: self.obj.clone(), labels: self.labels }
    }
}

impl<T: Send + Sync + 'static> Shared for Entry<T> {
    #[inline]
    fn warm(&self) -> usize {
        self.obj.warm()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_digest_never_rules_out_an_object_that_carries_the_selector() {
        let l = labels(&[("app", "web-7"), ("tier", "front"), ("pod-template-hash", "abc")]);
        let d = LabelDigest::of(Some(&l));
        for selector in [
            &[][..],
            &[("app", "web-7")][..],
            &[("tier", "front"), ("app", "web-7")][..],
            &[("pod-template-hash", "abc"), ("tier", "front"), ("app", "web-7")][..],
        ] {
            assert!(d.may_match(LabelDigest::mask(selector)), "{selector:?}");
        }
    }

    #[test]
    fn a_digest_rules_out_most_objects_without_the_pair() {
        // Eight labels per object, a one-pair selector that none of them carries: the share of
        // objects that pass anyway is about (1 - e^(-16/64))^2, 5%. Fixed inputs, so the count is
        // the same on every run; the bound is loose enough for any decent hash.
        let passed = (0..10_000)
            .filter(|i| {
                let l: BTreeMap<String, String> =
                    (0..8).map(|j| (format!("key-{j}"), format!("value-{i}-{j}"))).collect();
                LabelDigest::of(Some(&l)).may_match(LabelDigest::mask(&[("app", "web-3")]))
            })
            .count();
        assert!(passed < 1_000, "{passed} of 10,000 objects passed the digest");
    }

    #[test]
    fn three_bits_a_pair_pass_fewer_strangers_than_two_on_the_benchmarks_pods() {
        // The labels of the `store` benchmark's pods (200 StatefulSets of 1,000 pods) and its
        // readers' selector `app=web-<owner>`: how many pods of other owners pass the digest.
        let digest = |owner: usize, ordinal: usize, bits: u32| {
            let set = format!("web-{owner}");
            [
                ("app", set.clone()),
                ("controller-revision-hash", format!("{set}-7c9d5f8b6d")),
                ("statefulset.kubernetes.io/pod-name", format!("{set}-{ordinal}")),
                ("apps.kubernetes.io/pod-index", ordinal.to_string()),
                ("tier", "backend".to_string()),
            ]
            .iter()
            .fold(0u64, |d, (k, v)| d | pair_bits_of(k, v, bits))
        };
        let strangers = |bits: u32| {
            let masks: Vec<u64> =
                (0..200).map(|o| pair_bits_of("app", &format!("web-{o}"), bits)).collect();
            let mut passed = 0;
            for owner in 0..200 {
                for ordinal in (0..1000).step_by(10) {
                    let d = digest(owner, ordinal, bits);
                    passed += masks
                        .iter()
                        .enumerate()
                        .filter(|(o, m)| *o != owner && d & **m == **m)
                        .count();
                }
            }
            passed
        };
        // Every owner's selector against 20,000 pods, 100 of them its own.
        let (two, three) = (strangers(2), strangers(3));
        let checked = 200 * (20_000 - 100);
        println!("strangers passing: two bits {two}, three bits {three} of {checked}");
        assert_eq!(BITS_PER_PAIR, 3);
        assert!(three < two, "three bits passed {three}, two {two}");
        assert!(three * 1000 < checked * 14, "three bits passed {three} of {checked}");
    }

    #[test]
    fn no_labels_match_only_the_empty_selector() {
        let d = LabelDigest::of(None);
        assert!(d.may_match(LabelDigest::mask(&[])));
        assert!(!d.may_match(LabelDigest::mask(&[("app", "x")])));
    }
}
