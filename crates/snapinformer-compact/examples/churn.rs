//! Churn soak of the interning table: `--pods` live pods updated `--updates` times with images,
//! labels, nodes and phases that keep changing, decoded from JSON through one interner (as the
//! compact reflector does). Prints, every tenth of the run, the table's entries, the heap and
//! the decode rate (sweeps included), then checks that the table and heap stayed bounded.
//!
//! `cargo run --release -p snapinformer-compact --example churn -- --pods 20000 --updates 2000000`

#[path = "../tests/common/mod.rs"]
mod common;

use std::{collections::HashMap, time::Instant};

use cap::Cap;
use common::{PodSpec, pod_json};
use snapinformer_compact::{CompactPod, Interner};

#[global_allocator]
static ALLOC: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut pods, mut updates) = (20_000u32, 2_000_000u32);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse().ok()).expect("a number");
        match a.as_str() {
            "--pods" => pods = v,
            "--updates" => updates = v,
            other => panic!("unknown argument {other}"),
        }
    }
    let mut interner = Interner::new();
    let mut live: HashMap<u32, CompactPod> = HashMap::new();
    let spec = |i: u32, u: u32, node: u32, phase: u8| PodSpec {
        set: i / 1000,
        ordinal: i % 1000,
        incarnation: u / 100_000,
        rv: u64::from(u) + 1,
        node,
        image: u / 1000,
        extra_label: u / 50,
        phase,
        managed_fields: true,
    };
    let h0 = ALLOC.allocated();
    for i in 0..pods {
        let json = serde_json::to_vec(&pod_json(&spec(i, 0, i % 500, 1))).unwrap();
        live.insert(i, CompactPod::decode(&mut interner, &json).unwrap());
    }
    let built = ALLOC.allocated() - h0;
    println!(
        "{pods} pods built: heap {:.1} MiB ({} B/pod), table {} entries",
        built as f64 / 1048576.0,
        built / pods as usize,
        interner.stats().entries()
    );
    println!("| updates | table entries | heap (MiB) | decode+intern+sweep rate (updates/s) |");
    println!("|---:|---:|---:|---:|");
    let mut rng = 0x9e37_79b9u64;
    let step = updates / 10;
    let (mut max_entries, mut max_heap) = (0usize, 0usize);
    let mut decode_secs = 0.0;
    for u in 0..updates {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = (rng % u64::from(pods)) as u32;
        let json = serde_json::to_vec(&pod_json(&spec(
            i,
            u,
            (rng >> 20) as u32 % 500,
            (rng >> 40) as u8 % 3,
        )))
        .unwrap();
        let d = Instant::now();
        let pod = CompactPod::decode(&mut interner, &json).unwrap();
        decode_secs += d.elapsed().as_secs_f64();
        live.insert(i, pod);
        if u % step == step - 1 {
            let entries = interner.stats().entries();
            let heap = ALLOC.allocated() - h0;
            max_entries = max_entries.max(entries);
            max_heap = max_heap.max(heap);
            println!(
                "| {} | {entries} | {:.1} | {:.0} |",
                u + 1,
                heap as f64 / 1048576.0,
                f64::from(step) / decode_secs
            );
            decode_secs = 0.0;
        }
    }
    let s = interner.stats();
    println!(
        "\nmax table {max_entries} entries, max heap {:.1} MiB (built {:.1} MiB); {} nodes made, {} sweeps dropped {}",
        max_heap as f64 / 1048576.0,
        built as f64 / 1048576.0,
        s.misses,
        s.sweeps,
        s.swept
    );
    drop(live);
    interner.sweep();
    println!(
        "after dropping every pod and a full sweep: {} entries, heap {} B above the start",
        interner.stats().entries(),
        ALLOC.allocated().saturating_sub(h0)
    );
}
