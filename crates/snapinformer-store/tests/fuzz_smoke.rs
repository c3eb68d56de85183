//! Smoke run of the `store_ops` fuzz target (see fuzz/README.md at the repository root): the
//! same differential check of the store against a naive model, on a few thousand pseudo-random
//! inputs from a fixed seed, plus hand-made inputs and the inputs of past fuzzer findings.

use rand::{Rng, SeedableRng, rngs::StdRng};
use snapinformer_store::fuzzing::store_ops;

#[test]
fn store_ops_on_pseudo_random_inputs() {
    // A fixed seed: every run checks the same inputs.
    let mut rng = StdRng::seed_from_u64(0x5eed_0001_57a7_e000);
    for _ in 0..3000 {
        let mut bytes = vec![0; rng.random_range(0..600)];
        rng.fill(&mut bytes[..]);
        store_ops(&bytes);
    }
}

#[test]
fn store_ops_on_hand_made_inputs() {
    store_ops(&[]);
    store_ops(&[0]);
    store_ops(&[0xff; 64]);
    store_ops(&[0x00; 512]);
    store_ops(&(0..=255).collect::<Vec<u8>>());
    store_ops(&(0..=255).rev().cycle().take(2048).collect::<Vec<u8>>());
}

/// Found by the smoke run: with a slash in a namespace, `list_namespace("ns-1")` scanned keys by
/// the prefix `ns-1/` and also returned `ns-1/2/obj-0`, an object of namespace `ns-1/2`.
#[test]
fn regression_namespace_scan_with_a_slash_in_the_namespace() {
    store_ops(&[
        0, 0, 0, 0, 0, 0, 0, 0, 181, 0, 0, 0, 144, 0, 0, 0, 0, 128, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 79, 0, 0, 0, 0, 0, 89, 0, 0, 0, 178, 167, 161, 0, 0, 0, 0, 0, 0, 0, 0, 253, 0, 0, 0,
        248, 0, 0, 0, 0, 184, 0, 0, 0, 171, 0, 0, 0, 0, 0, 189, 0, 0, 0, 140, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, 223, 249, 0, 0, 168, 0, 0, 0, 0, 225, 0, 0, 0, 0, 0, 211,
        0, 0, 0, 0, 0, 163, 0, 0, 0, 0, 1, 0, 114,
    ]);
}
