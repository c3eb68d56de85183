#![no_main]
//! JSON through the compact decoder and interner, against serde_json (see
//! `snapinformer_compact::fuzzing`).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| snapinformer_compact::fuzzing::check_decode(data));
