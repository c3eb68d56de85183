//! Smoke run of the `apiserver_requests` fuzz target (see fuzz/README.md at the repository
//! root): request sequences from pseudo-random bytes with a fixed seed, hand-made inputs and
//! the inputs of past fuzzer findings.

use rand::{Rng, SeedableRng, rngs::StdRng};
use snapinformer_apiserver::fuzzing::apiserver_requests;

#[test]
fn apiserver_requests_on_pseudo_random_inputs() {
    // A fixed seed: every run checks the same inputs.
    let mut rng = StdRng::seed_from_u64(0x5eed_0004_a9b1_0001);
    for _ in 0..2000 {
        let len = rng.random_range(0..400);
        // Small byte values select the structured variants (known paths, objects, selectors).
        let bytes: Vec<u8> = (0..len)
            .map(|_| if rng.random_ratio(1, 3) { rng.random() } else { rng.random_range(0..8) })
            .collect();
        apiserver_requests(&bytes);
    }
}

#[test]
fn apiserver_requests_on_hand_made_inputs() {
    apiserver_requests(&[]);
    apiserver_requests(&[0; 64]);
    apiserver_requests(&[1; 256]);
    apiserver_requests(&[0xff; 256]);
    apiserver_requests(&(0..=255).collect::<Vec<u8>>());
}
