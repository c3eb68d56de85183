#![no_main]
//! The store with its indexes against a naive model (see `snapinformer_store::fuzzing`).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| snapinformer_store::fuzzing::store_ops(data));
