//! Smoke run of the `compact_decode` fuzz target (see fuzz/README.md at the repository root):
//! pseudo-random mutations of valid pods and JSON values from a fixed seed, and hand-made inputs.

mod common;

use common::{PodSpec, pod_json};
use snapinformer_compact::fuzzing::check_decode;

/// xorshift64*: a fixed-seed byte source, so every run checks the same inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `seed` with a few random byte changes, insertions and deletions.
    fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut out = seed.to_vec();
        for _ in 0..1 + self.below(4) {
            let at = self.below(out.len() + 1);
            match self.below(5) {
                0 if at < out.len() => out[at] = self.next() as u8,
                1 => out.insert(at, *b"{}[]\":,\n0aZ-.e".get(self.below(14)).unwrap_or(&b' ')),
                2 if at < out.len() => drop(out.remove(at)),
                3 if at < out.len() => {
                    // Duplicate a slice (makes duplicate keys and deep nesting likely).
                    let end = (at + self.below(40)).min(out.len());
                    let slice = out[at..end].to_vec();
                    out.splice(at..at, slice);
                }
                _ => out.truncate(at),
            }
        }
        out
    }
}

const HAND_MADE: &[&str] = &[
    "null",
    "true",
    "-0",
    "1e400",
    "-9223372036854775808",
    "18446744073709551615",
    "1.5",
    r#""""#,
    r#""a string that is longer than twenty-two bytes""#,
    r#""\u00e9\ud83d\ude00 escaped""#,
    "[]",
    "{}",
    "[[[[[]]]]]",
    r#"{"a":1,"a":2}"#,
    r#"{"a":{"x":1},"b":{"x":1},"a":[1]}"#,
    r#"{"metadata":{"name":"n","labels":{"a":"b","c":1}}}"#,
    r#"{"metadata":{"name":"n","labels":{"a":"b"},"labels":null}}"#,
    r#"{"metadata":"not an object","spec":{"nodeName":7}}"#,
    r#"{"metadata":{"name":"n","namespace":"d","ownerReferences":[{"uid":"u"},{"uid":""}]}}"#,
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[]}}"#,
    // Found by this smoke run: serde_json's default float parsing does not round-trip these
    // bit for bit, so the tree's round trip is compared with serde_json's own.
    "-92233203685477580836854775808",
    "-92233720385477580808",
    "-922337203685477580858083720368547758085808",
];

#[test]
fn hand_made_inputs_decode_as_serde_json_decodes_them() {
    for input in HAND_MADE {
        check_decode(input.as_bytes());
    }
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    check_decode(deep.as_bytes());
}

#[test]
fn mutated_pods_and_values_decode_as_serde_json_decodes_them() {
    let mut seeds: Vec<Vec<u8>> = HAND_MADE.iter().map(|s| s.as_bytes().to_vec()).collect();
    for (i, managed_fields) in [(0u32, true), (1, false), (2, true)] {
        let spec = PodSpec {
            set: i,
            ordinal: i + 3,
            incarnation: i,
            rv: 10 + u64::from(i),
            node: i,
            image: i,
            extra_label: i,
            phase: i as u8,
            managed_fields,
        };
        seeds.push(serde_json::to_vec(&pod_json(&spec)).unwrap());
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let runs = if cfg!(debug_assertions) { 3000 } else { 20_000 };
    for _ in 0..runs {
        let seed = &seeds[rng.below(seeds.len())];
        check_decode(&rng.mutate(seed));
    }
    for seed in &seeds {
        check_decode(seed);
    }
}
