#![no_main]
//! List response bodies (`ObjectList<Pod>`) through the reflector (see
//! `snapinformer_kube::fuzzing`).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| snapinformer_kube::fuzzing::decode_list(data));
