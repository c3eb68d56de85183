#![no_main]
//! Watch response bodies through the reflector's line decoder and state machine (see
//! `snapinformer_kube::fuzzing`).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| snapinformer_kube::fuzzing::decode_watch_event(data));
