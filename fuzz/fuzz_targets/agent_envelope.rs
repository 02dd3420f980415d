//! Agent frames: `parse_agent_envelope` and `parse_bridge_frame` on arbitrary text. Never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use solewriter_core::subtree::{parse_agent_envelope, parse_bridge_frame};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_agent_envelope(text);
        let _ = parse_bridge_frame(text);
    }
});
