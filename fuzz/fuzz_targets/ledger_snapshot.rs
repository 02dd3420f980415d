//! Ledger snapshot decode on arbitrary bytes. Never panics; a decoded snapshot re-encodes to
//! bytes that decode to the same snapshot.
#![no_main]

use libfuzzer_sys::fuzz_target;
use solewriter_core::ledger::Snapshot;

fuzz_target!(|data: &[u8]| {
    if let Ok(snapshot) = Snapshot::decode(data) {
        let bytes = snapshot.encode().expect("a decoded snapshot re-encodes within the bound");
        assert_eq!(Snapshot::decode(&bytes).ok(), Some(snapshot));
    }
});
