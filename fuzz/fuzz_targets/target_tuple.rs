//! Attested tuple `TargetTuple::from_json` on arbitrary text. Never panics; an accepted tuple
//! is within the bound and its target id is stable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use solewriter_core::projection::target::{TargetTuple, MAX_TUPLE_JSON_BYTES};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(tuple) = TargetTuple::from_json(text) {
        assert!(text.len() <= MAX_TUPLE_JSON_BYTES);
        assert_eq!(tuple.target_id(), tuple.target_id());
    }
});
