//! Smoke run of the `apiserver_requests` fuzz target (see fuzz/README.md at the repository
//! root): request sequences from pseudo-random bytes with a fixed seed, hand-made inputs and
//! the inputs of past fuzzer findings.

use snapinformer_apiserver::fuzzing::apiserver_requests;

/// xorshift64*: a fixed-seed byte source, so every run checks the same inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn apiserver_requests_on_pseudo_random_inputs() {
    let mut rng = Rng(0x5eed_0004_a9b1_0001);
    for _ in 0..2000 {
        let len = (rng.next() % 400) as usize;
        // Small byte values select the structured variants (known paths, objects, selectors).
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.next().is_multiple_of(3) { rng.next() as u8 } else { (rng.next() % 8) as u8 }
            })
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
