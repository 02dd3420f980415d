//! Project-lock record parse on arbitrary bytes. Never panics; a parsed record re-encodes to
//! text that parses to the same record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use solewriter_core::project_lock::ownership::LockRecord;

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = LockRecord::parse(data) {
        assert_eq!(LockRecord::parse(record.encode().as_bytes()).ok(), Some(record));
    }
});
