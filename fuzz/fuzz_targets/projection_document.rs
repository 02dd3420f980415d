//! `ProjectionDocument::parse` on arbitrary bytes. Never panics; a parsed document's bytes
//! parse again to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use solewriter_core::projection::ProjectionDocument;

fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = ProjectionDocument::parse(data) {
        let bytes = doc.to_bytes();
        let again = ProjectionDocument::parse(&bytes).map(|d| d.to_bytes()).ok();
        assert_eq!(again, Some(bytes));
    }
});
