#![no_main]
//! Request sequences against the test API server's router, in process (see
//! `snapinformer_apiserver::fuzzing`).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| snapinformer_apiserver::fuzzing::apiserver_requests(data));
