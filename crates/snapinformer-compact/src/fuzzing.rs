//! The logic of the `compact_decode` fuzz target (see fuzz/README.md at the repository root),
//! shared with the smoke test in `tests/fuzz_smoke.rs`. Not a stable API.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::{CompactPod, Interner, Value, decode};

/// Decodes `data` into compact form and checks it against `serde_json`:
///
/// - the compact decoder accepts exactly the JSON `serde_json::Value` accepts, and the tree
///   equals it value for value, both as decoded and after encoding it back to text;
/// - decoding the same text twice through one interner shares every array and object;
/// - a JSON object decodes as a [`CompactPod`] whose hot fields are the object's, and whose
///   `to_pod` equals `serde_json`'s `Pod` whenever `serde_json` can decode one; that `Pod`
///   encoded straight into compact form ([`CompactPod::from_pod`]) is the tree its JSON decodes
///   to, with the same interned nodes;
/// - once every tree is dropped, a sweep leaves the interner empty.
///
/// Panics on any mismatch.
pub fn check_decode(data: &[u8]) {
    let mut interner = Interner::new();
    let expected = serde_json::from_slice::<serde_json::Value>(data);
    let value = decode::decode_value(&mut interner, data);
    let (expected, value) = match (expected, value) {
        (Ok(e), Ok(v)) => (e, v),
        (Err(_), Err(_)) => return,
        (e, v) => panic!("serde_json and the compact decoder disagree: {e:?} against {v:?}"),
    };
    assert_eq!(value.to_json(), expected, "the tree is the JSON");
    // Encoded and decoded again, the tree gives what serde_json's own value gives after the same
    // round trip (serde_json's default float parsing is not exact, so neither returns every
    // float bit for bit).
    let text = serde_json::to_vec(&value).expect("trees encode");
    let again: serde_json::Value = serde_json::from_slice(&text).expect("encoded trees decode");
    let reference: serde_json::Value =
        serde_json::from_slice(&serde_json::to_vec(&expected).expect("values encode"))
            .expect("encoded values decode");
    assert_eq!(again, reference, "encoding the tree is encoding the JSON");

    let twice = decode::decode_value(&mut interner, data).expect("decoded once, decodes again");
    assert_eq!(twice, value);
    match (&value, &twice) {
        (Value::Array(a), Value::Array(b)) => assert!(a.ptr_eq(b), "equal arrays are shared"),
        (Value::Object(a), Value::Object(b)) => assert!(a.ptr_eq(b), "equal objects are shared"),
        _ => {}
    }

    if expected.is_object() {
        let pod = CompactPod::decode(&mut interner, data).expect("a JSON object is a pod");
        assert_eq!(pod.to_json(), expected);
        let meta = expected.get("metadata");
        let str_at = |o: Option<&serde_json::Value>, k: &str| {
            o.and_then(|o| o.get(k)).and_then(serde_json::Value::as_str).map(str::to_owned)
        };
        assert_eq!(pod.name().map(str::to_owned), str_at(meta, "name"));
        assert_eq!(pod.namespace().map(str::to_owned), str_at(meta, "namespace"));
        assert_eq!(pod.uid().map(str::to_owned), str_at(meta, "uid"));
        assert_eq!(pod.resource_version().map(str::to_owned), str_at(meta, "resourceVersion"));
        assert_eq!(pod.node_name().map(str::to_owned), str_at(expected.get("spec"), "nodeName"));
        assert_eq!(pod.phase().map(str::to_owned), str_at(expected.get("status"), "phase"));
        let labels: Option<BTreeMap<String, String>> =
            meta.and_then(|m| m.get("labels")).and_then(serde_json::Value::as_object).and_then(
                |l| l.iter().map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect(),
            );
        assert_eq!(pod.labels(), labels.as_ref());
        if let Ok(typed) = serde_json::from_value::<Pod>(expected.clone()) {
            assert_eq!(pod.to_pod().expect("a pod decodes from its tree"), typed);
            // Encoded straight from the typed pod, it is the tree its JSON decodes to, sharing
            // the same interned nodes.
            let direct = CompactPod::from_pod(&typed, &mut interner).expect("typed pods encode");
            let text = serde_json::to_vec(&typed).expect("typed pods encode as JSON");
            let via_json = CompactPod::decode(&mut interner, &text).expect("their JSON decodes");
            assert_eq!(direct, via_json, "encoding a typed pod is decoding its JSON");
            assert_eq!(direct.labels(), via_json.labels());
            for part in ["spec", "status"] {
                if let (Some(Value::Object(a)), Some(Value::Object(b))) =
                    (direct.root().get(part), via_json.root().get(part))
                {
                    assert!(a.ptr_eq(b), "`{part}` is the same interned node both ways");
                }
            }
        }
        drop(pod);
    }
    drop((value, twice));
    interner.sweep();
    assert_eq!(interner.stats().entries(), 0, "nothing is left once nothing is held");
}
