//! Envelope admission: `check_envelope` and `decide_submission` on arbitrary envelope text,
//! first submission and over a stored row. Never panics; an accepted envelope is within the
//! channel's bound and passes the schema check.
#![no_main]

use libfuzzer_sys::fuzz_target;
use solewriter_core::projection::channel::{
    ChannelName, ChannelRecord, ChannelRegistry, ChannelSpec, ProducerId, Submission,
};
use solewriter_core::projection::target::TargetId;
use solewriter_core::time::Millis;
use solewriter_core::projection::watermark::{check_envelope, decide_submission};

const SCHEMA: &str = "computed-route.v1";
const MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = check_envelope(text, SCHEMA);
    let (Ok(name), Ok(owner), Ok(target)) = (
        ChannelName::parse("computed-route"),
        ProducerId::parse("router"),
        TargetId::parse(&"1".repeat(64)),
    ) else {
        return;
    };
    let spec = ChannelSpec {
        name: name.clone(),
        owner: owner.clone(),
        envelope_schema: SCHEMA.into(),
        max_envelope_bytes: MAX,
    };
    let Ok(registry) = ChannelRegistry::new([spec]) else {
        return;
    };
    let watermark = data.first().map_or(0, |b| u64::from(*b % 4));
    let submission = Submission {
        target_id: target,
        channel: name,
        source_watermark: watermark,
        envelope_json: text.to_owned(),
        captured_at: Millis(1),
        expires_at: Millis(10),
    };
    let stored = ChannelRecord {
        source_watermark: 2,
        envelope_json: r#"{"schema":"computed-route.v1","notAuthority":true}"#.into(),
        ..ChannelRecord::from_submission(&submission, Millis(2))
    };
    for existing in [None, Some(&stored)] {
        if decide_submission(&registry, &owner, true, existing, &submission, Millis(5)).is_ok() {
            assert!(text.len() <= MAX, "accepted past the bound");
            assert!(check_envelope(text, SCHEMA).is_ok(), "accepted an invalid envelope");
        }
    }
});
