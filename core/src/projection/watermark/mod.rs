//! Producer-submission admission, as one pure decision.
//!
//! Checks run in a fixed order, and the first failure rejects the submission with nothing
//! written: the channel is registered; the submitting producer owns it; the target is
//! admitted; the envelope is within its channel's size bound; the envelope passes the schema
//! check; the times and watermark are in range. Then the watermark decides:
//!
//! Watermarks are ordered by their channel's declared kind ([`value`]: integers, ISO-8601
//! instants, instant-plus-sequence, or explicitly text-ordered), never by their text.
//!
//! | stored row            | incoming                         | plan                        |
//! |-----------------------|----------------------------------|-----------------------------|
//! | none                  | any                              | `Insert`                    |
//! | watermark `w`         | watermark `> w`                  | `Advance` (clears degraded) |
//! | watermark `w`         | watermark `w`, identical content | `Replay` (no write)         |
//! | watermark `w`         | watermark `w`, different content | `Degrade` (envelope kept)   |
//! | watermark `w`         | watermark `< w`                  | rejected `Regressed`        |
//!
//! "Identical content" means byte-identical envelope text and equal `captured_at` and
//! `expires_at`. A conflict against an already degraded row is again `Degrade` (idempotent).

pub mod value;

pub use value::{Watermark, WatermarkError, WatermarkKey, WatermarkKind, MAX_TEXT_WATERMARK_BYTES};

use crate::projection::channel::{
    ChannelRecord, ChannelRegistry, DegradedReason, ProducerId, Submission,
};
use crate::projection::envelope_schema::EnvelopeSchema;
use crate::projection::profile::Profile;
use crate::time::Millis;
use crate::ErrorKind;

/// Why a submission was rejected. A rejected submission writes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubmissionRejected {
    /// The channel is not in the host's registry.
    #[error("channel `{0}` is not registered")]
    UnknownChannel(String),
    /// The channel belongs to another producer.
    #[error("producer `{producer}` does not own channel `{channel}`")]
    NotChannelOwner {
        /// The submitting producer.
        producer: String,
        /// The channel.
        channel: String,
    },
    /// The target has not been admitted.
    #[error("target {0} is not admitted")]
    TargetNotAdmitted(String),
    /// The envelope exceeds the channel's size bound.
    #[error("envelope of {size} bytes exceeds the channel bound of {limit} bytes")]
    Oversized {
        /// Envelope size.
        size: usize,
        /// Channel bound.
        limit: usize,
    },
    /// The envelope fails the schema check.
    #[error("envelope fails the schema check: {0}")]
    SchemaInvalid(String),
    /// `expires_at` is not after `captured_at`, or a time is above [`crate::EXACT_INTEGER_MAX`] (2^53 − 1).
    #[error("submission times are invalid: {0}")]
    InvalidRange(&'static str),
    /// The watermark is not of the kind the channel declares.
    #[error("{0}")]
    InvalidWatermark(WatermarkError),
    /// The stored row's watermark is not of the kind the channel now declares (the registry
    /// changed the channel's kind): nothing can be ordered against it, so nothing is written.
    #[error("the stored row cannot be ordered against: {0} (the channel's declared watermark kind changed)")]
    StoredWatermarkOfAnotherKind(WatermarkError),
    /// The stored row the caller handed in is not the submission's own: it is of another
    /// target or another channel (the caller looked the row up with other values than the
    /// submission it handed in). Nothing is decided against it, so nothing is written.
    #[error("the stored row handed in is of target {row_target} channel `{row_channel}`, not of the submission's target {target} channel `{channel}`")]
    ForeignRow {
        /// The submission's target.
        target: String,
        /// The submission's channel.
        channel: String,
        /// The target of the row handed in.
        row_target: String,
        /// The channel of the row handed in.
        row_channel: String,
    },
    /// The watermark orders before the stored one.
    #[error("watermark {submitted} regressed below the stored {stored}")]
    Regressed {
        /// The submitted watermark.
        submitted: Watermark,
        /// The stored watermark.
        stored: Watermark,
    },
}

impl SubmissionRejected {
    /// A rejected submission is the caller's input to fix.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Input
    }
}

/// What an admitted submission does to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmissionPlan {
    /// First row of this channel for this target.
    Insert(ChannelRecord),
    /// A higher watermark replaces the stored row (and clears a degradation).
    Advance(ChannelRecord),
    /// Byte-identical replay of the stored row: nothing is written.
    Replay,
    /// Equal watermark, different content: mark the stored row degraded; keep its envelope.
    Degrade {
        /// The stored row after the change (same envelope, `degraded_reason` set).
        record: ChannelRecord,
    },
}

/// Checks the envelope against its channel's schema: a JSON object whose schema-id field (the
/// profile's [`Profile::schema_field`]: `schema`, or the Memory Core's `schemaVersion`) is the
/// channel's `envelope_schema` and whose `notAuthority` field is `true`. Under the Memory Core
/// profile an envelope that carries its own `sourceWatermark` must carry the submitted one (the
/// hooks' reader degrades a channel whose envelope and slot disagree). Last, the channel's JSON
/// Schema, if it has one, with the validator's reasons.
pub fn check_envelope(
    profile: Profile,
    envelope_json: &str,
    expected_schema: &str,
    watermark: &Watermark,
    json_schema: Option<&EnvelopeSchema>,
) -> Result<(), SubmissionRejected> {
    let field = profile.schema_field();
    let invalid = |m: String| SubmissionRejected::SchemaInvalid(m);
    let value: serde_json::Value =
        serde_json::from_str(envelope_json).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let object = value
        .as_object()
        .ok_or_else(|| invalid("not a JSON object".into()))?;
    match object.get(field).and_then(|s| s.as_str()) {
        Some(s) if s == expected_schema => {}
        Some(s) => {
            return Err(invalid(format!(
                "{field} `{s}`, expected `{expected_schema}`"
            )))
        }
        None => return Err(invalid(format!("missing string field `{field}`"))),
    }
    if object.get("notAuthority") != Some(&serde_json::Value::Bool(true)) {
        return Err(invalid("field `notAuthority` must be true".into()));
    }
    let own = object.get("sourceWatermark");
    if profile == Profile::MemoryCore && own.is_some_and(|w| w.as_str() != Some(&watermark.text()))
    {
        return Err(invalid(format!(
            "the envelope's sourceWatermark {} is not the submitted watermark `{watermark}`",
            own.map_or_else(String::new, ToString::to_string)
        )));
    }
    match json_schema {
        Some(schema) => schema
            .validate(&value)
            .map_err(|why| invalid(format!("the channel's JSON Schema refuses it: {why}"))),
        None => Ok(()),
    }
}

/// Decides a producer submission to a store of `profile`. `existing` is the stored row for the
/// same target and channel, read inside the same serialized transaction the plan will be
/// executed in; a row of another target or channel is refused first
/// ([`SubmissionRejected::ForeignRow`]), before anything is decided.
pub fn decide_submission(
    profile: Profile,
    registry: &ChannelRegistry,
    producer: &ProducerId,
    target_admitted: bool,
    existing: Option<&ChannelRecord>,
    submission: &Submission,
    now: Millis,
) -> Result<SubmissionPlan, SubmissionRejected> {
    if let Some(row) = existing {
        if row.target_id != submission.target_id || row.channel != submission.channel {
            return Err(SubmissionRejected::ForeignRow {
                target: submission.target_id.to_string(),
                channel: submission.channel.to_string(),
                row_target: row.target_id.to_string(),
                row_channel: row.channel.to_string(),
            });
        }
    }
    let spec = registry
        .get(&submission.channel)
        .ok_or_else(|| SubmissionRejected::UnknownChannel(submission.channel.to_string()))?;
    if &spec.owner != producer {
        return Err(SubmissionRejected::NotChannelOwner {
            producer: producer.to_string(),
            channel: submission.channel.to_string(),
        });
    }
    if !target_admitted {
        return Err(SubmissionRejected::TargetNotAdmitted(
            submission.target_id.to_string(),
        ));
    }
    let size = submission.envelope_json.len();
    if size > spec.max_envelope_bytes {
        return Err(SubmissionRejected::Oversized {
            size,
            limit: spec.max_envelope_bytes,
        });
    }
    check_envelope(
        profile,
        &submission.envelope_json,
        &spec.envelope_schema,
        &submission.source_watermark,
        spec.envelope_json_schema.as_ref(),
    )?;
    if submission.expires_at <= submission.captured_at {
        return Err(SubmissionRejected::InvalidRange(
            "expires_at must be after captured_at",
        ));
    }
    let max = crate::EXACT_INTEGER_MAX;
    if submission.expires_at.0 > max || now.0 > max {
        return Err(SubmissionRejected::InvalidRange(
            "value exceeds 2^53-1, the largest integer every reader holds exactly",
        ));
    }
    let submitted = spec
        .watermark
        .key(&submission.source_watermark)
        .map_err(SubmissionRejected::InvalidWatermark)?;
    let Some(stored) = existing else {
        return Ok(SubmissionPlan::Insert(ChannelRecord::from_submission(
            submission, now,
        )));
    };
    let stored_key = spec
        .watermark
        .key(&stored.source_watermark)
        .map_err(SubmissionRejected::StoredWatermarkOfAnotherKind)?;
    if submitted > stored_key {
        Ok(SubmissionPlan::Advance(ChannelRecord::from_submission(
            submission, now,
        )))
    } else if submitted < stored_key {
        Err(SubmissionRejected::Regressed {
            submitted: submission.source_watermark.clone(),
            stored: stored.source_watermark.clone(),
        })
    } else if stored.same_content(submission) {
        Ok(SubmissionPlan::Replay)
    } else {
        let mut record = stored.clone();
        record.degraded_reason = Some(DegradedReason::SourceConflict);
        record.updated_at = now;
        Ok(SubmissionPlan::Degrade { record })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::channel::{ChannelName, ChannelSpec};
    use crate::projection::target::TargetId;

    fn registry_of(kind: WatermarkKind) -> ChannelRegistry {
        ChannelRegistry::new([ChannelSpec {
            name: ChannelName::parse("route").unwrap(),
            owner: ProducerId::parse("router").unwrap(),
            envelope_schema: "computed-route.v1".into(),
            max_envelope_bytes: 200,
            watermark: kind,
            envelope_json_schema: None,
        }])
        .unwrap()
    }

    fn registry() -> ChannelRegistry {
        registry_of(WatermarkKind::Integer)
    }

    fn envelope(body: &str) -> String {
        format!(r#"{{"schema":"computed-route.v1","notAuthority":true,"body":"{body}"}}"#)
    }

    fn sub_of(watermark: Watermark, body: &str) -> Submission {
        Submission {
            target_id: TargetId::parse(&"0".repeat(64)).unwrap(),
            channel: ChannelName::parse("route").unwrap(),
            source_watermark: watermark,
            envelope_json: envelope(body),
            captured_at: Millis(10),
            expires_at: Millis(1000),
        }
    }

    fn sub(watermark: u64, body: &str) -> Submission {
        sub_of(watermark.into(), body)
    }

    fn decide(
        existing: Option<&ChannelRecord>,
        s: &Submission,
    ) -> Result<SubmissionPlan, SubmissionRejected> {
        decide_submission(
            Profile::Generic,
            &registry(),
            &ProducerId::parse("router").unwrap(),
            true,
            existing,
            s,
            Millis(50),
        )
    }

    #[test]
    fn watermark_table() {
        let first = sub(5, "a");
        let SubmissionPlan::Insert(row) = decide(None, &first).unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                row.source_watermark.clone(),
                row.updated_at,
                row.degraded_reason
            ),
            (5.into(), Millis(50), None)
        );
        assert!(
            matches!(decide(Some(&row), &sub(6, "b")).unwrap(), SubmissionPlan::Advance(r) if r.source_watermark == 6.into())
        );
        assert_eq!(decide(Some(&row), &first).unwrap(), SubmissionPlan::Replay);
        let SubmissionPlan::Degrade { record } = decide(Some(&row), &sub(5, "other")).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            record.envelope_json, row.envelope_json,
            "stored envelope kept"
        );
        assert_eq!(record.degraded_reason, Some(DegradedReason::SourceConflict));
        let mut later_expiry = first.clone();
        later_expiry.expires_at = Millis(2000);
        assert!(matches!(
            decide(Some(&row), &later_expiry).unwrap(),
            SubmissionPlan::Degrade { .. }
        ));
        assert_eq!(
            decide(Some(&row), &sub(4, "a")).unwrap_err(),
            SubmissionRejected::Regressed {
                submitted: 4.into(),
                stored: 5.into()
            }
        );
        // Advancing clears a degradation.
        let SubmissionPlan::Advance(clean) = decide(Some(&record), &sub(6, "c")).unwrap() else {
            panic!()
        };
        assert_eq!(clean.degraded_reason, None);
    }

    /// The Memory Core route producer's `${capturedAt}:${n}`: `:10` advances past `:9` (text
    /// order would call it a regression), and an earlier instant regresses whatever its
    /// sequence.
    #[test]
    fn instant_sequences_are_admitted_in_their_own_order() {
        let reg = registry_of(WatermarkKind::InstantSequence);
        let router = ProducerId::parse("router").unwrap();
        let text = |t: &str| sub_of(Watermark::Text(t.into()), t);
        let d = |existing: Option<&ChannelRecord>, s: &Submission| {
            decide_submission(
                Profile::Generic,
                &reg,
                &router,
                true,
                existing,
                s,
                Millis(50),
            )
        };
        let SubmissionPlan::Insert(nine) = d(None, &text("2026-07-28T18:29:00.000Z:9")).unwrap()
        else {
            panic!()
        };
        assert!(matches!(
            d(Some(&nine), &text("2026-07-28T18:29:00.000Z:10")).unwrap(),
            SubmissionPlan::Advance(_)
        ));
        assert!(matches!(
            d(Some(&nine), &text("2026-07-28T18:28:59.999Z:99")).unwrap_err(),
            SubmissionRejected::Regressed { .. }
        ));
        assert!(matches!(
            d(Some(&nine), &text("2026-07-28T18:29:00.000Z:09")).unwrap_err(),
            SubmissionRejected::InvalidWatermark(e) if e.kind == WatermarkKind::InstantSequence
        ));
        // A row stored under another kind cannot be ordered against: refused, nothing written.
        let mut integer_row = nine.clone();
        integer_row.source_watermark = 3.into();
        assert!(matches!(
            d(Some(&integer_row), &text("2026-07-28T18:29:00.000Z:10")).unwrap_err(),
            SubmissionRejected::StoredWatermarkOfAnotherKind(e) if e.watermark == "3"
        ));
    }

    /// A stored row of another target or channel than the submission's is refused before
    /// anything is decided — whatever the two watermarks (here the row's 9 would refuse the
    /// submitted 5 as a regression, and without a row it would be inserted) — and names both.
    #[test]
    fn foreign_rows_are_refused() {
        let submitted = sub(5, "a");
        let own = ChannelRecord::from_submission(&sub(9, "b"), Millis(0));
        assert!(matches!(
            decide(Some(&own), &submitted).unwrap_err(),
            SubmissionRejected::Regressed { .. }
        ));
        let mut other_target = own.clone();
        other_target.target_id = TargetId::parse(&"1".repeat(64)).unwrap();
        let mut other_channel = own.clone();
        other_channel.channel = ChannelName::parse("lifecycle").unwrap();
        for (row, row_target, row_channel) in [
            (&other_target, "1".repeat(64), "route"),
            (&other_channel, "0".repeat(64), "lifecycle"),
        ] {
            assert_eq!(
                decide(Some(row), &submitted).unwrap_err(),
                SubmissionRejected::ForeignRow {
                    target: "0".repeat(64),
                    channel: "route".into(),
                    row_target,
                    row_channel: row_channel.into(),
                }
            );
        }
        // Before every other rule: an unknown channel with a foreign row is refused as foreign.
        let mut unknown = submitted.clone();
        unknown.channel = ChannelName::parse("nope").unwrap();
        assert!(matches!(
            decide(Some(&own), &unknown).unwrap_err(),
            SubmissionRejected::ForeignRow { .. }
        ));
        assert!(matches!(
            decide(None, &submitted).unwrap(),
            SubmissionPlan::Insert(_)
        ));
    }

    /// The rules are checked in a fixed order: a submission breaking rule `k` and every rule
    /// after it is rejected for rule `k`. Each input below breaks several rules at once, so a
    /// reordering of any two checks changes some answer.
    #[test]
    fn rejections_in_order() {
        let reg = registry();
        let router = ProducerId::parse("router").unwrap();
        let other = ProducerId::parse("frontier").unwrap();
        let stored = ChannelRecord::from_submission(&sub(5, "a"), Millis(0));
        // Breaks rules `from..` (0 unknown channel, 1 foreign producer, 2 target not admitted,
        // 3 oversized, 4 schema, 5 expiry before capture, 6 above 2^53-1, 7 a watermark not of
        // the channel's kind, 8 a regressed watermark) and keeps the rules before `from`.
        let decide_breaking = |from: usize| {
            let watermark = if from <= 7 {
                Watermark::Text("1".into())
            } else {
                1.into() // below the stored 5: regressed
            };
            let mut s = sub_of(watermark, "a");
            if from == 0 {
                s.channel = ChannelName::parse("nope").unwrap();
            }
            let producer = if from <= 1 { &other } else { &router };
            let admitted = from > 2;
            if from <= 4 {
                let body = if from <= 3 {
                    "x".repeat(200)
                } else {
                    "a".into()
                };
                s.envelope_json = envelope(&body).replace("computed-route.v1", "other.v1");
            }
            if from <= 5 {
                s.expires_at = Millis(5); // before captured_at (10)
            }
            let now = if from <= 6 {
                Millis(u64::MAX)
            } else {
                Millis(0)
            };
            // The stored row is the submission's own (the unknown channel's too): a row of
            // another channel would be refused before every rule (`foreign_rows_are_refused`).
            let mut own = stored.clone();
            own.channel = s.channel.clone();
            decide_submission(
                Profile::Generic,
                &reg,
                producer,
                admitted,
                Some(&own),
                &s,
                now,
            )
        };
        let answers: Vec<_> = (0..9).map(decide_breaking).collect();
        let expected: [fn(&SubmissionRejected) -> bool; 9] = [
            |r| matches!(r, SubmissionRejected::UnknownChannel(c) if c == "nope"),
            |r| matches!(r, SubmissionRejected::NotChannelOwner { .. }),
            |r| matches!(r, SubmissionRejected::TargetNotAdmitted(_)),
            |r| matches!(r, SubmissionRejected::Oversized { limit: 200, .. }),
            |r| matches!(r, SubmissionRejected::SchemaInvalid(m) if m.contains("other.v1")),
            |r| matches!(r, SubmissionRejected::InvalidRange(m) if m.contains("after captured_at")),
            |r| matches!(r, SubmissionRejected::InvalidRange(m) if m.contains("2^53-1")),
            |r| matches!(r, SubmissionRejected::InvalidWatermark(e) if e.kind == WatermarkKind::Integer),
            |r| {
                matches!(
                    r,
                    SubmissionRejected::Regressed { submitted, stored }
                        if *submitted == 1.into() && *stored == 5.into()
                )
            },
        ];
        for (rule, (answer, expected)) in answers.iter().zip(expected).enumerate() {
            assert!(
                answer.as_ref().is_err_and(expected),
                "rule {rule} (and every later one) broken: {answer:?}"
            );
        }
        // A watermark beyond 2^53-1 is not an integer watermark.
        let huge = sub(u64::MAX, "a");
        assert!(matches!(
            decide_submission(
                Profile::Generic,
                &reg,
                &router,
                true,
                None,
                &huge,
                Millis(0)
            ),
            Err(SubmissionRejected::InvalidWatermark(_))
        ));
    }

    #[test]
    fn schema_check() {
        let generic = Profile::Generic;
        let w = Watermark::Integer(1);
        assert!(check_envelope(generic, &envelope("x"), "computed-route.v1", &w, None).is_ok());
        for bad in [
            "not json",
            "[1]",
            r#"{"notAuthority":true}"#,
            r#"{"schema":"computed-route.v1"}"#,
            r#"{"schema":"computed-route.v1","notAuthority":false}"#,
            r#"{"schema":1,"notAuthority":true}"#,
            r#"{"schemaVersion":"computed-route.v1","notAuthority":true}"#,
        ] {
            assert!(
                matches!(
                    check_envelope(generic, bad, "computed-route.v1", &w, None),
                    Err(SubmissionRejected::SchemaInvalid(_))
                ),
                "{bad}"
            );
        }
        // The Memory Core's producers name their schema in `schemaVersion`.
        let memory_core = Profile::MemoryCore;
        let theirs = r#"{"schemaVersion":"computed-route.v1","notAuthority":true}"#;
        assert!(check_envelope(memory_core, theirs, "computed-route.v1", &w, None).is_ok());
        assert!(matches!(
            check_envelope(memory_core, &envelope("x"), "computed-route.v1", &w, None),
            Err(SubmissionRejected::SchemaInvalid(m)) if m.contains("schemaVersion")
        ));
        // An envelope stamped with its own watermark must carry the submitted one.
        let at = Watermark::Text("2026-07-28T18:29:00.000Z:9".into());
        let stamped = |own: &str| {
            format!(
                r#"{{"schemaVersion":"computed-route.v1","sourceWatermark":{own},"notAuthority":true}}"#
            )
        };
        assert!(check_envelope(
            memory_core,
            &stamped(r#""2026-07-28T18:29:00.000Z:9""#),
            "computed-route.v1",
            &at,
            None
        )
        .is_ok());
        for other in [r#""2026-07-28T18:29:00.000Z:10""#, "9", "null"] {
            assert!(
                matches!(
                    check_envelope(memory_core, &stamped(other), "computed-route.v1", &at, None),
                    Err(SubmissionRejected::SchemaInvalid(m)) if m.contains("not the submitted watermark")
                ),
                "{other}"
            );
        }
        assert!(
            check_envelope(
                generic,
                &stamped("5").replace("schemaVersion", "schema"),
                "computed-route.v1",
                &at,
                None
            )
            .is_ok(),
            "the generic profile does not read the envelope's own watermark"
        );
    }

    /// A channel's JSON Schema is applied after its schema id: a violating envelope is refused
    /// with the validator's reason, a conforming one admitted.
    #[test]
    fn the_channel_json_schema_decides_last() {
        let mut spec = registry()
            .get(&ChannelName::parse("route").unwrap())
            .unwrap()
            .clone();
        spec.envelope_json_schema = Some(
            EnvelopeSchema::compile(serde_json::json!({
                "type": "object",
                "required": ["body"],
                "properties": {"body": {"type": "string", "maxLength": 3}}
            }))
            .unwrap(),
        );
        let reg = ChannelRegistry::new([spec]).unwrap();
        let router = ProducerId::parse("router").unwrap();
        let d = |s: &Submission| {
            decide_submission(Profile::Generic, &reg, &router, true, None, s, Millis(50))
        };
        assert!(matches!(d(&sub(1, "abc")), Ok(SubmissionPlan::Insert(_))));
        let too_long = d(&sub(1, "abcd")).unwrap_err();
        assert!(
            matches!(&too_long, SubmissionRejected::SchemaInvalid(m)
                if m.contains("JSON Schema") && m.contains("/body")),
            "{too_long}"
        );
        let mut wrong_id = sub(1, "abcd");
        wrong_id.envelope_json = wrong_id.envelope_json.replace("computed-route.v1", "x.v1");
        assert!(
            matches!(d(&wrong_id), Err(SubmissionRejected::SchemaInvalid(m)) if m.contains("x.v1")),
            "the schema id is checked first"
        );
    }

    #[test]
    fn bounds_are_inclusive_and_each_is_checked_alone() {
        let reg = registry();
        let router = ProducerId::parse("router").unwrap();
        let max = crate::EXACT_INTEGER_MAX;
        let d = |s: &Submission, now: u64| {
            decide_submission(Profile::Generic, &reg, &router, true, None, s, Millis(now))
        };
        let mut at_limit = sub(1, "");
        let pad = 200 - at_limit.envelope_json.len();
        at_limit = sub(1, &"x".repeat(pad));
        assert_eq!(at_limit.envelope_json.len(), 200);
        assert!(
            d(&at_limit, 0).is_ok(),
            "an envelope of exactly the bound is accepted"
        );
        let mut top = sub(max, "a");
        top.expires_at = Millis(max);
        assert!(d(&top, max).is_ok(), "2^53-1 itself is accepted");
        assert!(matches!(
            d(&sub(max + 1, "a"), 0),
            Err(SubmissionRejected::InvalidWatermark(_))
        ));
        let mut late = sub(1, "a");
        late.expires_at = Millis(max + 1);
        assert!(matches!(
            d(&late, 0),
            Err(SubmissionRejected::InvalidRange(_))
        ));
        assert!(matches!(
            d(&sub(1, "a"), max + 1),
            Err(SubmissionRejected::InvalidRange(_))
        ));
    }
}
