//! Smoke run of the `decode_watch_event` and `decode_list` fuzz targets (see fuzz/README.md at
//! the repository root): pseudo-random inputs from a fixed seed, mutations of valid bodies,
//! hand-made inputs and the inputs of past fuzzer findings.

use snapinformer_kube::fuzzing::{decode_list, decode_watch_event};

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
            match self.below(4) {
                0 if at < out.len() => out[at] = self.next() as u8,
                1 => out.insert(at, *b"{}[]\":,\n0aZ".get(self.below(11)).unwrap_or(&b' ')),
                2 if at < out.len() => drop(out.remove(at)),
                _ => out.truncate(at),
            }
        }
        out
    }
}

const EVENTS: &[&str] = &[
    r#"{"type":"ADDED","object":{"metadata":{"name":"c","namespace":"default","resourceVersion":"3"}}}"#,
    r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","namespace":"default","resourceVersion":"4","ownerReferences":[{"apiVersion":"v1","kind":"X","name":"o","uid":"u1"}],"labels":{"app":"x"}}}}"#,
    r#"{"type":"DELETED","object":{"metadata":{"name":"b","namespace":"default","resourceVersion":"5"}}}"#,
    r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod"}}"#,
    r#"{"type":"ADDED","object":{"metadata":{"name":"","namespace":"default"}}}"#,
    r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}"#,
    r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}}"#,
    r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"slow down","reason":"TooManyRequests","code":429,"details":{"retryAfterSeconds":4294967295}}}"#,
    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"gone","reason":"Expired","code":410}"#,
    r#"{"type":"ADDED","object":{"metadata":{"name":"d"}},}"#,
    r#"{"type":"ADDED","object":{"metadata":{"name":"e","namespace":"default"}"#,
];

fn watch_body(rng: &mut Rng) -> Vec<u8> {
    let mut body = vec![rng.next() as u8, rng.next() as u8];
    for _ in 0..rng.below(6) {
        body.extend_from_slice(EVENTS[rng.below(EVENTS.len())].as_bytes());
        body.extend_from_slice(if rng.below(5) == 0 { b"\r\n\n" } else { b"\n" });
    }
    body
}

#[test]
fn decode_watch_event_on_pseudo_random_inputs() {
    let mut rng = Rng(0x5eed_0002_3a7c_0001);
    for i in 0..2000 {
        let body = watch_body(&mut rng);
        let input = if i % 2 == 0 { rng.mutate(&body) } else { body };
        decode_watch_event(&input);
    }
    for _ in 0..500 {
        let len = rng.below(300);
        decode_watch_event(&(0..len).map(|_| rng.next() as u8).collect::<Vec<u8>>());
    }
}

const LISTS: &[&str] = &[
    r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a","namespace":"default","resourceVersion":"3"}},{"metadata":{"namespace":"default"}},{"metadata":{"name":"a","namespace":"default","resourceVersion":"5"}}]}"#,
    r#"{"apiVersion":"v1","kind":"PodList","metadata":{},"items":[{"metadata":{"name":"n"}}]}"#,
    r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7","continue":"abc"},"items":[{"metadata":{"name":"a"}}]}"#,
    r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]}"#,
];

#[test]
fn decode_list_on_pseudo_random_inputs() {
    let mut rng = Rng(0x5eed_0003_1157_0001);
    for _ in 0..2500 {
        let seed = LISTS[rng.below(LISTS.len())].as_bytes();
        decode_list(&rng.mutate(seed));
    }
    for _ in 0..500 {
        let len = rng.below(200);
        decode_list(&(0..len).map(|_| rng.next() as u8).collect::<Vec<u8>>());
    }
}

#[test]
fn hand_made_inputs() {
    for list in LISTS {
        decode_list(list.as_bytes());
    }
    decode_list(b"");
    decode_list(b"null");
    for event in EVENTS {
        decode_watch_event(&[0, 255].iter().chain(event.as_bytes()).copied().collect::<Vec<_>>());
    }
    decode_watch_event(b"");
    decode_watch_event(&[3, 0, b'\n', b'\n', b' ']);
}
