//! Producer-submission admission, as one pure decision.
//!
//! Checks run in a fixed order, and the first failure rejects the submission with nothing
//! written: the channel is registered; the submitting producer owns it; the target is
//! admitted; the envelope is within its channel's size bound; the envelope passes the schema
//! check; the times and watermark are in range. Then the watermark decides:
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

use crate::projection::channel::{
    ChannelRecord, ChannelRegistry, DegradedReason, ProducerId, Submission,
};
use crate::time::Millis;

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
    /// `expires_at` is not after `captured_at`, or a value is above [`crate::EXACT_INTEGER_MAX`] (2^53 − 1).
    #[error("submission times or watermark are invalid: {0}")]
    InvalidRange(&'static str),
    /// The watermark is lower than the stored one.
    #[error("watermark {submitted} regressed below the stored {stored}")]
    Regressed {
        /// The submitted watermark.
        submitted: u64,
        /// The stored watermark.
        stored: u64,
    },
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

/// Checks the envelope against its channel's schema: a JSON object whose `schema` field is the
/// channel's `envelope_schema` and whose `notAuthority` field is `true`.
pub fn check_envelope(
    envelope_json: &str,
    expected_schema: &str,
) -> Result<(), SubmissionRejected> {
    let invalid = |m: String| SubmissionRejected::SchemaInvalid(m);
    let value: serde_json::Value =
        serde_json::from_str(envelope_json).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let object = value
        .as_object()
        .ok_or_else(|| invalid("not a JSON object".into()))?;
    match object.get("schema").and_then(|s| s.as_str()) {
        Some(s) if s == expected_schema => {}
        Some(s) => {
            return Err(invalid(format!(
                "schema `{s}`, expected `{expected_schema}`"
            )))
        }
        None => return Err(invalid("missing string field `schema`".into())),
    }
    if object.get("notAuthority") != Some(&serde_json::Value::Bool(true)) {
        return Err(invalid("field `notAuthority` must be true".into()));
    }
    Ok(())
}

/// Decides a producer submission. `existing` is the stored row for the same target and
/// channel, read inside the same serialized transaction the plan will be executed in.
pub fn decide_submission(
    registry: &ChannelRegistry,
    producer: &ProducerId,
    target_admitted: bool,
    existing: Option<&ChannelRecord>,
    submission: &Submission,
    now: Millis,
) -> Result<SubmissionPlan, SubmissionRejected> {
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
    check_envelope(&submission.envelope_json, &spec.envelope_schema)?;
    if submission.expires_at <= submission.captured_at {
        return Err(SubmissionRejected::InvalidRange(
            "expires_at must be after captured_at",
        ));
    }
    let max = crate::EXACT_INTEGER_MAX;
    if submission.source_watermark > max || submission.expires_at.0 > max || now.0 > max {
        return Err(SubmissionRejected::InvalidRange(
            "value exceeds 2^53-1, the largest integer every reader holds exactly",
        ));
    }
    let Some(stored) = existing else {
        return Ok(SubmissionPlan::Insert(ChannelRecord::from_submission(
            submission, now,
        )));
    };
    let (submitted, stored_w) = (submission.source_watermark, stored.source_watermark);
    if submitted > stored_w {
        Ok(SubmissionPlan::Advance(ChannelRecord::from_submission(
            submission, now,
        )))
    } else if submitted < stored_w {
        Err(SubmissionRejected::Regressed {
            submitted,
            stored: stored_w,
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

    fn registry() -> ChannelRegistry {
        ChannelRegistry::new([ChannelSpec {
            name: ChannelName::parse("route").unwrap(),
            owner: ProducerId::parse("router").unwrap(),
            envelope_schema: "computed-route.v1".into(),
            max_envelope_bytes: 200,
        }])
        .unwrap()
    }

    fn envelope(body: &str) -> String {
        format!(r#"{{"schema":"computed-route.v1","notAuthority":true,"body":"{body}"}}"#)
    }

    fn sub(watermark: u64, body: &str) -> Submission {
        Submission {
            target_id: TargetId::parse(&"0".repeat(64)).unwrap(),
            channel: ChannelName::parse("route").unwrap(),
            source_watermark: watermark,
            envelope_json: envelope(body),
            captured_at: Millis(10),
            expires_at: Millis(1000),
        }
    }

    fn decide(
        existing: Option<&ChannelRecord>,
        s: &Submission,
    ) -> Result<SubmissionPlan, SubmissionRejected> {
        decide_submission(
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
            (row.source_watermark, row.updated_at, row.degraded_reason),
            (5, Millis(50), None)
        );
        assert!(
            matches!(decide(Some(&row), &sub(6, "b")).unwrap(), SubmissionPlan::Advance(r) if r.source_watermark == 6)
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
                submitted: 4,
                stored: 5
            }
        );
        // Advancing clears a degradation.
        let SubmissionPlan::Advance(clean) = decide(Some(&record), &sub(6, "c")).unwrap() else {
            panic!()
        };
        assert_eq!(clean.degraded_reason, None);
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
        // 3 oversized, 4 schema, 5 expiry before capture, 6 above 2^53-1, 7 a
        // regressed watermark) and keeps the rules before `from`.
        let decide_breaking = |from: usize| {
            let mut s = sub(1, "a"); // below the stored 5: always regressed
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
            decide_submission(&reg, producer, admitted, Some(&stored), &s, now)
        };
        let answers: Vec<_> = (0..8).map(decide_breaking).collect();
        let expected: [fn(&SubmissionRejected) -> bool; 8] = [
            |r| matches!(r, SubmissionRejected::UnknownChannel(c) if c == "nope"),
            |r| matches!(r, SubmissionRejected::NotChannelOwner { .. }),
            |r| matches!(r, SubmissionRejected::TargetNotAdmitted(_)),
            |r| matches!(r, SubmissionRejected::Oversized { limit: 200, .. }),
            |r| matches!(r, SubmissionRejected::SchemaInvalid(m) if m.contains("other.v1")),
            |r| matches!(r, SubmissionRejected::InvalidRange(m) if m.contains("after captured_at")),
            |r| matches!(r, SubmissionRejected::InvalidRange(m) if m.contains("2^53-1")),
            |r| {
                matches!(
                    r,
                    SubmissionRejected::Regressed {
                        submitted: 1,
                        stored: 5
                    }
                )
            },
        ];
        for (rule, (answer, expected)) in answers.iter().zip(expected).enumerate() {
            assert!(
                answer.as_ref().is_err_and(expected),
                "rule {rule} (and every later one) broken: {answer:?}"
            );
        }
        // A watermark beyond 2^53-1 is refused like the clock.
        let huge = sub(u64::MAX, "a");
        assert!(matches!(
            decide_submission(&reg, &router, true, None, &huge, Millis(0)),
            Err(SubmissionRejected::InvalidRange(m)) if m.contains("2^53-1")
        ));
    }

    #[test]
    fn schema_check() {
        assert!(check_envelope(&envelope("x"), "computed-route.v1").is_ok());
        for bad in [
            "not json",
            "[1]",
            r#"{"notAuthority":true}"#,
            r#"{"schema":"computed-route.v1"}"#,
            r#"{"schema":"computed-route.v1","notAuthority":false}"#,
            r#"{"schema":1,"notAuthority":true}"#,
        ] {
            assert!(
                matches!(
                    check_envelope(bad, "computed-route.v1"),
                    Err(SubmissionRejected::SchemaInvalid(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn bounds_are_inclusive_and_each_is_checked_alone() {
        let reg = registry();
        let router = ProducerId::parse("router").unwrap();
        let max = crate::EXACT_INTEGER_MAX;
        let d =
            |s: &Submission, now: u64| decide_submission(&reg, &router, true, None, s, Millis(now));
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
            Err(SubmissionRejected::InvalidRange(why)) if why.contains("2^53-1")
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
