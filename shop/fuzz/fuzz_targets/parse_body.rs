#![no_main]

#[path = "../harness.rs"]
#[allow(dead_code)] // each target runs one of the harness functions
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::body(data));
