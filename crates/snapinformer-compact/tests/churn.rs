//! The interning table under churn: pods are updated over and over with images, labels, nodes
//! and phases that keep changing (so most interned nodes die soon after they are made), and the
//! table must stay proportional to what the live pods hold, not to what was ever decoded.

mod common;

use std::collections::BTreeMap;

use common::{PodSpec, pod_json};
use snapinformer_compact::{CompactPod, Interner};

/// Entries a table may hold beyond 1.25 times its live entries: four tables of 256 shards, each
/// shard swept once it holds 8 entries.
const SLACK: usize = 4 * 256 * 8;

#[test]
fn the_table_stays_bounded_by_live_pods_under_churn() {
    const PODS: u32 = 300;
    let updates: u32 = if cfg!(debug_assertions) { 12_000 } else { 300_000 };
    let mut interner = Interner::new();
    let mut live: BTreeMap<u32, CompactPod> = BTreeMap::new();
    let mut rng = 0x2545_f491u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut max_entries, mut max_live) = (0usize, 0usize);
    for u in 0..updates {
        let i = (next() % u64::from(PODS)) as u32;
        let spec = PodSpec {
            set: i / 100,
            ordinal: i % 100,
            incarnation: u / 5000,
            rv: u64::from(u) + 1,
            node: (next() % 50) as u32,
            // A new image every 40 updates, a new label value every 7: nodes that die fast.
            image: u / 40,
            extra_label: u / 7,
            phase: (next() % 3) as u8,
            managed_fields: true,
        };
        let json = serde_json::to_vec(&pod_json(&spec)).unwrap();
        live.insert(i, CompactPod::decode(&mut interner, &json).unwrap());
        if u % 3000 == 2999 {
            let entries = interner.stats().entries();
            max_entries = max_entries.max(entries);
            // What the live pods hold: a fresh interner fed the same pods.
            let mut fresh = Interner::new();
            let copies: Vec<CompactPod> = live
                .values()
                .map(|p| {
                    CompactPod::decode(&mut fresh, p.to_json_string().unwrap().as_bytes()).unwrap()
                })
                .collect();
            let live_entries = fresh.stats().entries();
            max_live = max_live.max(live_entries);
            drop(copies);
            assert!(
                entries <= live_entries * 5 / 4 + SLACK,
                "after {u} updates: {entries} entries for {live_entries} live"
            );
        }
    }
    let stats = interner.stats();
    println!(
        "{updates} updates of {PODS} pods: table max {max_entries} entries (live max {max_live}), \
         {} misses, {} hits, {} sweeps dropped {}",
        stats.misses, stats.hits, stats.sweeps, stats.swept
    );
    // Without forgetting, the table would hold every node ever made.
    assert!(stats.misses as usize > 4 * (max_entries), "the churn made far more nodes than held");
    drop(live);
    interner.sweep();
    assert_eq!(interner.stats().entries(), 0);
}
