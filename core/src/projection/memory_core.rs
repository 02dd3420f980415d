//! The Memory Core profile's document, `live-lane-awareness-projection.v1`: composed from the
//! committed channel rows exactly as the Memory Core's own JavaScript writer composes it
//! (`buildProjectionEnvelope` and `projectChannel` in `ai/services/memory-core/hookProjectionLease.mjs`
//! of the public repository `neomjs/neo`, the version whose `publishProjection` takes
//! `consumerBinding` and `sweepOrphans`), so that the Memory Core's hooks read solewriter's
//! documents and the writer's own alike.
//!
//! The bytes are what `JSON.stringify(envelope)` prints: compact, no trailing newline, keys in
//! the writer's insertion order:
//!
//! ```text
//! {"schemaVersion":"live-lane-awareness-projection.v1",
//!  "publication":{"targetId":…,"fencingEpoch":<number>,"generatedAt":<epoch ms>,
//!                 "producerWatermarks":{<channel>:<watermark text>,…}},
//!  "consumerBinding":<the publication's binding, verbatim>,
//!  "lifecycleActions":<slot of `lifecycle-frontier`>, "computedRoute":<slot of `computed-route`>,
//!  "contextViews":[{"channel":…,<slot>…},…],
//!  "coverage":{"sources":[<every channel>],"degradedSources":[<degraded or stale channels>]},
//!  "notAuthority":true}
//! ```
//!
//! Every stored row is published (in `producerWatermarks` and `coverage.sources`, whether or not
//! its channel is still registered), in channel-name byte order (the writer's `ORDER BY
//! channel`). A slot is `{status, sourceWatermark, capturedAt, expiresAt, envelope, citations:
//! [], degradedReason}`; a slot without a row is `{"status":"missing","envelope":null,
//! "degradedReason":"no accepted channel"}`. A row's status, first rule that applies:
//!
//! 1. its stored envelope is not a JSON object: `degraded`, `unreadable envelope: <why>`,
//!    envelope `null`;
//! 2. one of its times has no ISO text (past 9999, see below): `degraded`, envelope kept, that
//!    time `null`;
//! 3. a source conflict: `degraded`, `two payloads claim watermark <w>`;
//! 4. `expiresAt <= generatedAt`: `stale`, `channel expired at <expiresAt>`;
//! 5. otherwise `fresh`, `degradedReason: null`.
//!
//! Where this differs from the JavaScript writer, and why:
//!
//! - Rule 1's `<why>` is serde_json's message; JavaScript prints V8's `JSON.parse` message
//!   (e.g. `Expected double-quoted property name in JSON at position 41`), which cannot be
//!   reproduced. The writer also embeds an envelope that is JSON but not an object (and keeps
//!   the row fresh); here it is withheld and degraded, as the generic format does. Neither case
//!   arises from admission, which stores only JSON objects.
//! - Rule 2 does not exist there: the writer stores the producer's ISO text and republishes it.
//!   Rows here hold milliseconds (admission bounds them to 2^53 − 1), printed as
//!   `toISOString()` does; past 9999-12-31T23:59:59.999Z JavaScript switches to a signed
//!   six-digit year, and past 8.64e15 ms it has no text at all. Such a row is published
//!   degraded with the unprintable time `null` and the reason naming it, rather than in a
//!   spelling the hooks were never given.
//! - The envelope and the binding are embedded as stored (without surrounding whitespace); the
//!   writer re-serializes what `JSON.parse` made of them. The two agree whenever the text is
//!   already in `JSON.stringify` form, which the writer's own rows always are; they differ for
//!   other spellings (inner whitespace, `1.0` or `1e3`, `\u0041` or `\/` escapes, a duplicate
//!   key, an integer-like key not first).

use crate::projection::channel::{ChannelRecord, DegradedReason};
use crate::projection::document::{EpochPlace, MAX_DOCUMENT_BYTES};
use crate::projection::target::TargetId;
use crate::time::{iso, Millis};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The document's `schemaVersion`, and the profile's name.
pub const SCHEMA_VERSION: &str = "live-lane-awareness-projection.v1";

/// Largest consumer binding, in bytes.
pub const MAX_BINDING_BYTES: usize = 64 << 10;

/// Where the document names its format (`schemaVersion`) and carries its fencing epoch
/// (`publication.fencingEpoch`, taken as [`epoch_number`] takes it).
pub(crate) const EPOCH_PLACE: EpochPlace = EpochPlace {
    marker: "schemaVersion",
    within: Some("publication"),
    epoch: epoch_number,
};

/// The `conflict_reason` the Memory Core's writer records for a row at `watermark`, and the
/// `degradedReason` its document gives a conflicted row.
pub fn conflict_reason(watermark: &str) -> String {
    format!("two payloads claim watermark {watermark}")
}

/// The channel published in the `lifecycleActions` slot.
const LIFECYCLE_CHANNEL: &str = "lifecycle-frontier";
/// The channel published in the `computedRoute` slot.
const ROUTE_CHANNEL: &str = "computed-route";
/// Channels published under `contextViews`. (A [`crate::names::ChannelName`] cannot contain
/// `:`, so solewriter's own rows never match; the rule is kept as the writer has it.)
const CONTEXT_VIEW_PREFIX: &str = "context-view:";

/// Why a consumer binding was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindingError {
    /// Not a JSON object.
    #[error("consumer binding must be a JSON object: {0}")]
    NotAnObject(String),
    /// Larger than [`MAX_BINDING_BYTES`].
    #[error("consumer binding of {0} bytes exceeds the bound of {MAX_BINDING_BYTES} bytes")]
    TooLarge(usize),
}

/// The hooks' consumer binding a Memory Core publication carries (status, scope resolution,
/// provenance, conflicts, assertion and expiry times, the binding's identity fields): a JSON
/// object, published verbatim. solewriter checks only that it is an object of bounded size;
/// the hooks' reader judges it (a binding it finds foreign withholds the projection).
#[derive(Clone, Debug)]
pub struct ConsumerBinding(Box<RawValue>);

impl PartialEq for ConsumerBinding {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for ConsumerBinding {}

impl ConsumerBinding {
    /// Parses a binding from JSON text (surrounding whitespace is dropped).
    pub fn from_json(text: &str) -> Result<Self, BindingError> {
        let text = text.trim();
        if text.len() > MAX_BINDING_BYTES {
            return Err(BindingError::TooLarge(text.len()));
        }
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
            .map_err(|e| BindingError::NotAnObject(e.to_string()))?;
        let raw = RawValue::from_string(text.to_owned())
            .map_err(|e| BindingError::NotAnObject(e.to_string()))?;
        Ok(ConsumerBinding(raw))
    }

    /// The binding's JSON text.
    pub fn as_json(&self) -> &RawValue {
        &self.0
    }
}

/// The document of the grant at `epoch` on `target_id`, from the committed `rows` at broker
/// time `now`, with the publication's consumer `binding`. Deterministic: the same inputs, in
/// any order, give the same bytes (one row per channel, as the store keeps them).
pub(crate) fn compose(
    target_id: &TargetId,
    epoch: u64,
    binding: &ConsumerBinding,
    rows: &[ChannelRecord],
    now: Millis,
) -> Vec<u8> {
    let rows = rows
        .iter()
        .map(|r| Row {
            channel: r.channel.as_str(),
            watermark: r.source_watermark.text(),
            envelope_json: &r.envelope_json,
            captured_at: r.captured_at,
            expires_at: r.expires_at,
            conflicted: r.degraded_reason == Some(DegradedReason::SourceConflict),
        })
        .collect();
    document(target_id.as_str(), epoch, binding.as_json(), rows, now)
}

/// One stored row, as the document reads it.
struct Row<'a> {
    channel: &'a str,
    watermark: Cow<'a, str>,
    envelope_json: &'a str,
    captured_at: Millis,
    expires_at: Millis,
    conflicted: bool,
}

fn document(
    target_id: &str,
    epoch: u64,
    binding: &RawValue,
    mut rows: Vec<Row<'_>>,
    now: Millis,
) -> Vec<u8> {
    // The writer reads its rows `ORDER BY channel` (SQLite's BINARY collation: byte order).
    rows.sort_by(|a, b| a.channel.as_bytes().cmp(b.channel.as_bytes()));
    let projected: Vec<(&str, Projected<'_>)> =
        rows.iter().map(|r| (r.channel, project(r, now))).collect();
    let slot = |name: &str| {
        projected
            .iter()
            .find(|(channel, _)| *channel == name)
            .map_or(Slot::Missing(Missing::SLOT), |(_, p)| Slot::Present(p))
    };
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        publication: Publication {
            target_id,
            fencing_epoch: epoch,
            generated_at: now.0,
            producer_watermarks: JsObject::of(rows.iter().map(|r| (r.channel, &*r.watermark))),
        },
        consumer_binding: binding,
        lifecycle_actions: slot(LIFECYCLE_CHANNEL),
        computed_route: slot(ROUTE_CHANNEL),
        context_views: projected
            .iter()
            .filter(|(channel, _)| channel.starts_with(CONTEXT_VIEW_PREFIX))
            .map(|(channel, slot)| ContextView { channel, slot })
            .collect(),
        coverage: Coverage {
            sources: projected.iter().map(|(channel, _)| *channel).collect(),
            degraded_sources: projected
                .iter()
                .filter(|(_, p)| matches!(p.status, Status::Degraded | Status::Stale))
                .map(|(channel, _)| *channel)
                .collect(),
        },
        not_authority: true,
    };
    // Plain structs, strings, integers and already-validated raw JSON always serialize.
    serde_json::to_vec(&doc).expect("a Memory Core document always serializes")
}

/// `projectChannel`: the slot of one row at `generatedAt = now` (the rules in the module
/// documentation, in that order).
fn project<'a>(row: &'a Row<'a>, now: Millis) -> Projected<'a> {
    let (captured_at, expires_at) = (iso::format(row.captured_at), iso::format(row.expires_at));
    let parsed = serde_json::from_str::<&RawValue>(row.envelope_json);
    let envelope = match parsed {
        Ok(raw) if raw.get().starts_with('{') => Some(raw),
        _ => None,
    };
    let (status, reason) = if let Err(e) = parsed {
        // JavaScript's text here is V8's `JSON.parse` message, which differs.
        (Status::Degraded, Some(format!("unreadable envelope: {e}")))
    } else if envelope.is_none() {
        (
            Status::Degraded,
            Some("unreadable envelope: not a JSON object".to_owned()),
        )
    } else if captured_at.is_none() || expires_at.is_none() {
        (Status::Degraded, Some(unprintable(row)))
    } else if row.conflicted {
        (Status::Degraded, Some(conflict_reason(&row.watermark)))
    } else if row.expires_at <= now {
        let at = expires_at.as_deref().unwrap_or_default();
        (Status::Stale, Some(format!("channel expired at {at}")))
    } else {
        (Status::Fresh, None)
    };
    Projected {
        status,
        source_watermark: &row.watermark,
        captured_at,
        expires_at,
        envelope,
        citations: [],
        degraded_reason: reason,
    }
}

/// Why a row with a time past [`iso::LATEST`] is degraded.
fn unprintable(row: &Row<'_>) -> String {
    let times: Vec<String> = [
        ("capturedAt", row.captured_at),
        ("expiresAt", row.expires_at),
    ]
    .into_iter()
    .filter(|&(_, at)| at > iso::LATEST)
    .map(|(field, at)| format!("{field} {} ms", at.0))
    .collect();
    format!(
        "{} past {} (no toISOString text)",
        times.join(" and "),
        iso::format(iso::LATEST).unwrap_or_default()
    )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    schema_version: &'static str,
    publication: Publication<'a>,
    consumer_binding: &'a RawValue,
    lifecycle_actions: Slot<'a>,
    computed_route: Slot<'a>,
    context_views: Vec<ContextView<'a>>,
    coverage: Coverage<'a>,
    not_authority: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Publication<'a> {
    target_id: &'a str,
    fencing_epoch: u64,
    generated_at: u64,
    producer_watermarks: JsObject<'a>,
}

#[derive(Clone, Copy, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Fresh,
    Stale,
    Degraded,
    Missing,
}

/// A present slot (`projectChannel`'s result).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Projected<'a> {
    status: Status,
    source_watermark: &'a str,
    captured_at: Option<String>,
    expires_at: Option<String>,
    envelope: Option<&'a RawValue>,
    citations: [&'static str; 0],
    degraded_reason: Option<String>,
}

/// The slot of a channel without a row.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Missing {
    status: Status,
    envelope: (),
    degraded_reason: &'static str,
}

impl Missing {
    const SLOT: Missing = Missing {
        status: Status::Missing,
        envelope: (),
        degraded_reason: "no accepted channel",
    };
}

#[derive(Serialize)]
#[serde(untagged)]
enum Slot<'a> {
    Present(&'a Projected<'a>),
    Missing(Missing),
}

/// `{channel, ...projected}`.
#[derive(Serialize)]
struct ContextView<'a> {
    channel: &'a str,
    #[serde(flatten)]
    slot: &'a Projected<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Coverage<'a> {
    sources: Vec<&'a str>,
    degraded_sources: Vec<&'a str>,
}

/// A JavaScript object built by `Object.fromEntries`, keys in the order `JSON.stringify`
/// prints them: the array-index keys (`"0"` to `"4294967294"`, canonical decimals) first in
/// numeric order, then the others in insertion order. (A channel name may be all digits.)
struct JsObject<'a>(Vec<(&'a str, &'a str)>);

impl<'a> JsObject<'a> {
    fn of(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut entries: Vec<_> = entries.into_iter().collect();
        // Stable: the non-index keys keep their insertion order.
        entries.sort_by_key(|(key, _)| array_index(key).map_or((1, 0), |n| (0, n)));
        JsObject(entries)
    }
}

impl Serialize for JsObject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().copied())
    }
}

/// `key` as an ECMAScript array index: the canonical decimal of an integer below 2^32 − 1.
fn array_index(key: &str) -> Option<u32> {
    let canonical = !key.is_empty()
        && key.bytes().all(|b| b.is_ascii_digit())
        && (key == "0" || !key.starts_with('0'));
    key.parse::<u32>()
        .ok()
        .filter(|&n| canonical && n != u32::MAX)
}

/// The `publication.fencingEpoch` of `bytes` if they are a document of this format: a JSON
/// object (at most [`MAX_DOCUMENT_BYTES`]) whose `schemaVersion` is [`SCHEMA_VERSION`], whose
/// `notAuthority` is `true` and whose `publication.fencingEpoch` is a JSON number with an
/// integer value from 1 to 2^53 − 1 (`3.0` is 3, as in JavaScript; the string `"3"` is
/// refused, though the hooks' reader would take it). Of a duplicated key the last counts, as
/// in `JSON.parse`. `None` for anything else.
pub fn published_epoch(bytes: &[u8]) -> Option<u64> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return None;
    }
    // Raw values, not `serde_json::Value`: the embedded envelopes may nest deeper than
    // serde_json's recursion limit, and are not looked at.
    let doc: BTreeMap<String, &RawValue> = serde_json::from_slice(bytes).ok()?;
    let schema: String = serde_json::from_str(doc.get("schemaVersion")?.get()).ok()?;
    let not_authority: bool = serde_json::from_str(doc.get("notAuthority")?.get()).ok()?;
    if schema != SCHEMA_VERSION || !not_authority {
        return None;
    }
    let publication: BTreeMap<String, &RawValue> =
        serde_json::from_str(doc.get("publication")?.get()).ok()?;
    let epoch: serde_json::Number =
        serde_json::from_str(publication.get("fencingEpoch")?.get()).ok()?;
    epoch_number(&epoch)
}

/// A `publication.fencingEpoch` as this format takes it: an integer value from 1 to
/// 2^53 − 1 (`3.0` is 3, as in JavaScript).
pub(crate) fn epoch_number(epoch: &serde_json::Number) -> Option<u64> {
    let max = crate::EXACT_INTEGER_MAX;
    match (epoch.as_u64(), epoch.as_i64(), epoch.as_f64()) {
        (Some(n), _, _) => (1..=max).contains(&n).then_some(n),
        (None, Some(_), _) => None,
        (None, None, Some(f)) => {
            (f.fract() == 0.0 && f >= 1.0 && f <= max as f64).then_some(f as u64)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::channel::ChannelName;
    use crate::projection::watermark::value::Watermark;

    const TARGET: &str = "ade4faf905981c8a3abe4c13ef31779f";
    /// The full binding of the hooks' reader's own test fixture.
    const BINDING: &str = r#"{"capability":"self-awareness","agentId":"@neo-gpt","harnessType":"codex","instanceKeyDigest":"instance-digest","workspaceKeyDigest":"workspace-digest","sessionId":"correlation-only","status":"attested","provenance":{"producer":"MemoryCoreProjectionBroker"},"assertedAt":"2026-07-28T18:00:00.000Z","expiresAt":"2026-07-28T19:00:00.000Z","conflicts":[],"scopeResolution":"agent-instance"}"#;
    /// 2026-07-28T18:29:00.000Z.
    const T0: u64 = 1_785_263_340_000;
    /// 2026-07-28T18:30:00.000Z, the publication's `generatedAt`.
    const NOW: u64 = 1_785_263_400_000;

    fn text(t: &str) -> Watermark {
        Watermark::Text(t.to_owned())
    }

    fn record(
        channel: &str,
        watermark: Watermark,
        envelope: &str,
        (captured, expires): (u64, u64),
        conflicted: bool,
    ) -> ChannelRecord {
        ChannelRecord {
            target_id: TargetId::parse(TARGET).unwrap(),
            channel: ChannelName::parse(channel).unwrap(),
            source_watermark: watermark,
            envelope_json: envelope.to_owned(),
            captured_at: Millis(captured),
            expires_at: Millis(expires),
            updated_at: Millis(captured),
            degraded_reason: conflicted.then_some(DegradedReason::SourceConflict),
        }
    }

    fn composed(epoch: u64, rows: &[ChannelRecord]) -> String {
        let binding = ConsumerBinding::from_json(BINDING).unwrap();
        let target = TargetId::parse(TARGET).unwrap();
        String::from_utf8(compose(&target, epoch, &binding, rows, Millis(NOW))).unwrap()
    }

    const LIFECYCLE: &str = r#"{"schemaVersion":"lifecycle-frontier.v1","status":"empty","capturedAt":"2026-07-28T18:29:00.000Z","sourceWatermark":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:34:00.000Z","scope":{"agentId":"neo-gpt","harnessInstance":"inst-1","resolution":"agent-instance","omittedReason":null},"coverage":{"sources":["github-workflow","a2a"],"degradedSources":[]},"items":[],"notAuthority":true}"#;
    const ROUTE: &str = r#"{"schemaVersion":"computed-route.v1","status":"fresh","capturedAt":"2026-07-28T18:29:00.000Z","sourceWatermark":"2026-07-28T18:29:00.000Z:10","expiresAt":"2026-07-28T18:30:00.001Z","routeVersion":"r-7","sourceManifestHash":"0a1b2c3d","ranked":[{"id":"t-1","title":"Café \"résumé\" line\nnext","score":0.5}],"advisoryFallback":null,"citations":[],"notAuthority":true}"#;

    /// The expected bytes were printed by the Memory Core writer's `buildProjectionEnvelope`
    /// (with its `projectChannel`) run in Node over the same rows, read `ORDER BY channel`,
    /// with their times as `toISOString()` text and each conflicted row's `conflict_reason` as
    /// the writer's submission records it. Of the six rows only the two slot channels show
    /// their slots; `context-view.docs` is no context view (the prefix is `context-view:`).
    #[test]
    fn golden_matches_the_javascript_writer() {
        let rows = [
            record(
                "lifecycle-frontier",
                text("2026-07-28T18:29:00.000Z"),
                LIFECYCLE,
                (T0, T0 + 300_000),
                false,
            ),
            record(
                "computed-route",
                text("2026-07-28T18:29:00.000Z:10"),
                ROUTE,
                (T0, NOW + 1),
                false,
            ),
            record(
                "context-view.docs",
                3.into(),
                r#"{"schemaVersion":"context-view.v1","notAuthority":true}"#,
                (T0, T0 + 3_600_000),
                false,
            ),
            // Conflicted, and expired exactly at `generatedAt`: degraded, not stale.
            record(
                "review-load",
                42.into(),
                r#"{"schemaVersion":"review-load.v1","notAuthority":true}"#,
                (T0 - 60_000, NOW),
                true,
            ),
            record(
                "mailbox",
                text("batch-0007"),
                r#"{"schemaVersion":"mailbox.v1","notAuthority":true}"#,
                (T0 - 60_000, NOW - 1),
                false,
            ),
            // Unreadable, conflicted and expired.
            record(
                "session-summary",
                text("2026-07-28T18:00:00.000Z"),
                r#"{"schemaVersion":"session-summary.v1","#,
                (T0 - 1_740_000, T0 - 60_000),
                true,
            ),
        ];
        let expected = [
            r#"{"schemaVersion":"live-lane-awareness-projection.v1","publication":{"targetId":"ade4faf905981c8a3abe4c13ef31779f","fencingEpoch":3,"generatedAt":1785263400000,"producerWatermarks":{"computed-route":"2026-07-28T18:29:00.000Z:10","context-view.docs":"3","lifecycle-frontier":"2026-07-28T18:29:00.000Z","mailbox":"batch-0007","review-load":"42","session-summary":"2026-07-28T18:00:00.000Z"}},"consumerBinding":"#,
            BINDING,
            r#","lifecycleActions":{"status":"fresh","sourceWatermark":"2026-07-28T18:29:00.000Z","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:34:00.000Z","envelope":{"schemaVersion":"lifecycle-frontier.v1","status":"empty","capturedAt":"2026-07-28T18:29:00.000Z","sourceWatermark":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:34:00.000Z","scope":{"agentId":"neo-gpt","harnessInstance":"inst-1","resolution":"agent-instance","omittedReason":null},"coverage":{"sources":["github-workflow","a2a"],"degradedSources":[]},"items":[],"notAuthority":true},"citations":[],"degradedReason":null}"#,
            r#","computedRoute":{"status":"fresh","sourceWatermark":"2026-07-28T18:29:00.000Z:10","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:30:00.001Z","envelope":{"schemaVersion":"computed-route.v1","status":"fresh","capturedAt":"2026-07-28T18:29:00.000Z","sourceWatermark":"2026-07-28T18:29:00.000Z:10","expiresAt":"2026-07-28T18:30:00.001Z","routeVersion":"r-7","sourceManifestHash":"0a1b2c3d","ranked":[{"id":"t-1","title":"Café \"résumé\" line\nnext","score":0.5}],"advisoryFallback":null,"citations":[],"notAuthority":true},"citations":[],"degradedReason":null}"#,
            r#","contextViews":[]"#,
            r#","coverage":{"sources":["computed-route","context-view.docs","lifecycle-frontier","mailbox","review-load","session-summary"],"degradedSources":["mailbox","review-load","session-summary"]},"notAuthority":true}"#,
        ]
        .concat();
        assert_eq!(composed(3, &rows), expected);
    }

    /// Printed by the writer's `buildProjectionEnvelope` in Node over the same rows, except
    /// the one unreadable-envelope message: V8 prints `unreadable envelope: Expected
    /// double-quoted property name in JSON at position 41` there; serde_json's message stands
    /// in for it. The lifecycle row is unreadable, conflicted and expired; the route row is
    /// conflicted and expired exactly at `generatedAt`.
    #[test]
    fn slots_keep_the_writers_precedence() {
        let rows = [
            record(
                "lifecycle-frontier",
                text("2026-07-28T18:29:00.000Z"),
                r#"{"schemaVersion":"lifecycle-frontier.v1","#,
                (T0, NOW),
                true,
            ),
            record(
                "computed-route",
                text("2026-07-28T18:29:00.000Z:10"),
                r#"{"schemaVersion":"computed-route.v1","notAuthority":true}"#,
                (T0, NOW),
                true,
            ),
        ];
        let expected = [
            r#"{"schemaVersion":"live-lane-awareness-projection.v1","publication":{"targetId":"ade4faf905981c8a3abe4c13ef31779f","fencingEpoch":4,"generatedAt":1785263400000,"producerWatermarks":{"computed-route":"2026-07-28T18:29:00.000Z:10","lifecycle-frontier":"2026-07-28T18:29:00.000Z"}},"consumerBinding":"#,
            BINDING,
            r#","lifecycleActions":{"status":"degraded","sourceWatermark":"2026-07-28T18:29:00.000Z","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:30:00.000Z","envelope":null,"citations":[],"degradedReason":"unreadable envelope: EOF while parsing an object at line 1 column 41"}"#,
            r#","computedRoute":{"status":"degraded","sourceWatermark":"2026-07-28T18:29:00.000Z:10","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:30:00.000Z","envelope":{"schemaVersion":"computed-route.v1","notAuthority":true},"citations":[],"degradedReason":"two payloads claim watermark 2026-07-28T18:29:00.000Z:10"}"#,
            r#","contextViews":[]"#,
            r#","coverage":{"sources":["computed-route","lifecycle-frontier"],"degradedSources":["computed-route","lifecycle-frontier"]},"notAuthority":true}"#,
        ]
        .concat();
        assert_eq!(composed(4, &rows), expected);
    }

    /// Context views cannot be stored by solewriter (a channel name has no `:`), so the rule is
    /// checked on rows given to the composition directly. Printed by the writer's
    /// `buildProjectionEnvelope` in Node over the same rows, except the unreadable-envelope
    /// message (V8: `Expected double-quoted property name in JSON at position 35`).
    #[test]
    fn context_views_as_the_writer_lists_them() {
        let row = |channel, watermark: &'static str, envelope, expires, conflicted| Row {
            channel,
            watermark: watermark.into(),
            envelope_json: envelope,
            captured_at: Millis(T0),
            expires_at: Millis(expires),
            conflicted,
        };
        let plain = r#"{"schemaVersion":"context-view.v1","notAuthority":true}"#;
        let rows = vec![
            row(
                "context-view:fresh",
                "5",
                r#"{"schemaVersion":"context-view.v1","operationId":"op","notAuthority":true}"#,
                NOW + 1,
                false,
            ),
            row("context-view:stale", "v-2", plain, NOW, false),
            row("context-view:conflict", "3", plain, NOW - 1, true),
            row(
                "context-view:corrupt",
                "4",
                r#"{"schemaVersion":"context-view.v1","#,
                NOW - 1,
                true,
            ),
            row("context-view", "6", plain, NOW + 1, false),
        ];
        let binding = ConsumerBinding::from_json(BINDING).unwrap();
        let bytes = document(TARGET, 1, binding.as_json(), rows, Millis(NOW));
        let expected = [
            r#"{"schemaVersion":"live-lane-awareness-projection.v1","publication":{"targetId":"ade4faf905981c8a3abe4c13ef31779f","fencingEpoch":1,"generatedAt":1785263400000,"producerWatermarks":{"context-view":"6","context-view:conflict":"3","context-view:corrupt":"4","context-view:fresh":"5","context-view:stale":"v-2"}},"consumerBinding":"#,
            BINDING,
            r#","lifecycleActions":{"status":"missing","envelope":null,"degradedReason":"no accepted channel"}"#,
            r#","computedRoute":{"status":"missing","envelope":null,"degradedReason":"no accepted channel"}"#,
            r#","contextViews":[{"channel":"context-view:conflict","status":"degraded","sourceWatermark":"3","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:29:59.999Z","envelope":{"schemaVersion":"context-view.v1","notAuthority":true},"citations":[],"degradedReason":"two payloads claim watermark 3"}"#,
            r#",{"channel":"context-view:corrupt","status":"degraded","sourceWatermark":"4","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:29:59.999Z","envelope":null,"citations":[],"degradedReason":"unreadable envelope: EOF while parsing an object at line 1 column 35"}"#,
            r#",{"channel":"context-view:fresh","status":"fresh","sourceWatermark":"5","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:30:00.001Z","envelope":{"schemaVersion":"context-view.v1","operationId":"op","notAuthority":true},"citations":[],"degradedReason":null}"#,
            r#",{"channel":"context-view:stale","status":"stale","sourceWatermark":"v-2","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:30:00.000Z","envelope":{"schemaVersion":"context-view.v1","notAuthority":true},"citations":[],"degradedReason":"channel expired at 2026-07-28T18:30:00.000Z"}]"#,
            r#","coverage":{"sources":["context-view","context-view:conflict","context-view:corrupt","context-view:fresh","context-view:stale"],"degradedSources":["context-view:conflict","context-view:corrupt","context-view:stale"]},"notAuthority":true}"#,
        ]
        .concat();
        assert_eq!(String::from_utf8(bytes).unwrap(), expected);
    }

    /// No rows: both slots missing, nothing else. Printed by the writer's
    /// `buildProjectionEnvelope` in Node.
    #[test]
    fn slots_without_rows_are_missing() {
        let expected = [
            r#"{"schemaVersion":"live-lane-awareness-projection.v1","publication":{"targetId":"ade4faf905981c8a3abe4c13ef31779f","fencingEpoch":9007199254740991,"generatedAt":1785263400000,"producerWatermarks":{}},"consumerBinding":"#,
            BINDING,
            r#","lifecycleActions":{"status":"missing","envelope":null,"degradedReason":"no accepted channel"}"#,
            r#","computedRoute":{"status":"missing","envelope":null,"degradedReason":"no accepted channel"}"#,
            r#","contextViews":[]"#,
            r#","coverage":{"sources":[],"degradedSources":[]},"notAuthority":true}"#,
        ]
        .concat();
        assert_eq!(composed(crate::EXACT_INTEGER_MAX, &[]), expected);
        // One slot present, the other missing.
        let only_route = composed(
            1,
            &[record(
                "computed-route",
                2.into(),
                r#"{"schemaVersion":"computed-route.v1","notAuthority":true}"#,
                (T0, NOW + 1),
                false,
            )],
        );
        assert!(only_route.contains(r#""lifecycleActions":{"status":"missing","envelope":null,"degradedReason":"no accepted channel"},"computedRoute":{"status":"fresh","sourceWatermark":"2","#));
        assert!(!only_route.ends_with('\n'));
    }

    /// Rows in any order give the same bytes, in channel byte order everywhere except
    /// `producerWatermarks`, where JavaScript prints array-index keys (`9`, `10`,
    /// `4294967294`, but not `007` or `4294967295`) first and in numeric order. Printed by the
    /// writer's `buildProjectionEnvelope` in Node over the rows read `ORDER BY channel`.
    #[test]
    fn rows_are_ordered_as_the_writer_orders_them() {
        let e = r#"{"schemaVersion":"x.v1","notAuthority":true}"#;
        let rows: Vec<ChannelRecord> = [
            ("lifecycle-frontier", 1),
            ("9", 9),
            ("computed-route", 2),
            ("10", 10),
            ("a.b", 4),
            ("007", 7),
            ("4294967295", 5),
            ("4294967294", 6),
        ]
        .into_iter()
        .map(|(c, w)| record(c, w.into(), e, (T0, NOW + 1), false))
        .collect();
        let expected = [
            r#"{"schemaVersion":"live-lane-awareness-projection.v1","publication":{"targetId":"ade4faf905981c8a3abe4c13ef31779f","fencingEpoch":2,"generatedAt":1785263400000,"producerWatermarks":{"9":"9","10":"10","4294967294":"6","007":"7","4294967295":"5","a.b":"4","computed-route":"2","lifecycle-frontier":"1"}},"consumerBinding":"#,
            BINDING,
            r#","lifecycleActions":{"status":"fresh","sourceWatermark":"1","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:30:00.001Z","envelope":{"schemaVersion":"x.v1","notAuthority":true},"citations":[],"degradedReason":null}"#,
            r#","computedRoute":{"status":"fresh","sourceWatermark":"2","capturedAt":"2026-07-28T18:29:00.000Z","expiresAt":"2026-07-28T18:30:00.001Z","envelope":{"schemaVersion":"x.v1","notAuthority":true},"citations":[],"degradedReason":null}"#,
            r#","contextViews":[]"#,
            r#","coverage":{"sources":["007","10","4294967294","4294967295","9","a.b","computed-route","lifecycle-frontier"],"degradedSources":[]},"notAuthority":true}"#,
        ]
        .concat();
        let mut rows = rows;
        for turn in 0..rows.len() {
            rows.rotate_left(1);
            if turn % 2 == 1 {
                rows.reverse();
            }
            assert_eq!(composed(2, &rows), expected, "turn {turn}");
        }
    }

    #[test]
    fn array_indices_are_canonical_decimals_below_two_to_the_32_minus_one() {
        for (key, index) in [
            ("0", Some(0)),
            ("9", Some(9)),
            ("4294967294", Some(4_294_967_294)),
            ("4294967295", None),
            ("4294967296", None),
            ("007", None),
            ("00", None),
            ("+1", None),
            ("1.5", None),
            ("", None),
            ("a1", None),
        ] {
            assert_eq!(array_index(key), index, "{key}");
        }
    }

    /// A time past 9999-12-31T23:59:59.999Z has no `toISOString()` text of the one form: the
    /// row is published degraded (before a conflict, which would otherwise hide why a time is
    /// `null`), the time `null`, the envelope kept.
    #[test]
    fn a_time_past_9999_degrades_its_row() {
        let latest = iso::LATEST.0;
        let env = r#"{"schemaVersion":"computed-route.v1","notAuthority":true}"#;
        let route = composed(
            1,
            &[record(
                "computed-route",
                1.into(),
                env,
                (latest, latest + 1),
                true,
            )],
        );
        assert!(
            route.contains(r#""computedRoute":{"status":"degraded","sourceWatermark":"1","capturedAt":"9999-12-31T23:59:59.999Z","expiresAt":null,"envelope":{"schemaVersion":"computed-route.v1","notAuthority":true},"citations":[],"degradedReason":"expiresAt 253402300800000 ms past 9999-12-31T23:59:59.999Z (no toISOString text)"}"#),
            "{route}"
        );
        let max = crate::EXACT_INTEGER_MAX;
        let both = composed(
            1,
            &[record(
                "lifecycle-frontier",
                1.into(),
                env,
                (max - 1, max),
                false,
            )],
        );
        assert!(
            both.contains(r#""capturedAt":null,"expiresAt":null,"#),
            "{both}"
        );
        assert!(both.contains(r#""degradedReason":"capturedAt 9007199254740990 ms and expiresAt 9007199254740991 ms past 9999-12-31T23:59:59.999Z (no toISOString text)"}"#), "{both}");
        assert!(
            both.contains(r#""degradedSources":["lifecycle-frontier"]"#),
            "{both}"
        );
        // Its last printable instant is still printed, and ordinary rules apply.
        let edge = composed(
            1,
            &[record(
                "computed-route",
                1.into(),
                env,
                (latest - 1, latest),
                false,
            )],
        );
        assert!(
            edge.contains(r#""expiresAt":"9999-12-31T23:59:59.999Z","envelope":{"#),
            "{edge}"
        );
        assert!(edge.contains(r#""status":"fresh""#), "{edge}");
    }

    /// The stored envelope is embedded as stored, without surrounding whitespace; JSON that is
    /// not an object is withheld (the writer would embed it: admission never stores one).
    #[test]
    fn envelopes_are_embedded_as_stored_or_withheld() {
        let spaced = composed(
            1,
            &[record(
                "computed-route",
                1.into(),
                " \n{ \"a\" : 1.0 }\t",
                (T0, NOW + 1),
                false,
            )],
        );
        assert!(
            spaced.contains(r#""envelope":{ "a" : 1.0 },"citations":[],"degradedReason":null}"#),
            "{spaced}"
        );
        for not_object in ["[1]", "\"x\"", "null", "7"] {
            let doc = composed(
                1,
                &[record(
                    "computed-route",
                    1.into(),
                    not_object,
                    (T0, NOW + 1),
                    true,
                )],
            );
            assert!(
                doc.contains(r#""envelope":null,"citations":[],"degradedReason":"unreadable envelope: not a JSON object"}"#),
                "{doc}"
            );
        }
    }

    #[test]
    fn published_epoch_reads_what_compose_wrote() {
        let rows = [record(
            "computed-route",
            1.into(),
            ROUTE,
            (T0, NOW + 1),
            false,
        )];
        for epoch in [1, 3, crate::EXACT_INTEGER_MAX] {
            assert_eq!(
                published_epoch(composed(epoch, &rows).as_bytes()),
                Some(epoch)
            );
        }
        // The writer's own document shape, with a trailing newline, an envelope nested deeper
        // than serde_json's recursion limit, `3.0`, `3e0` and a repeated key (the last counts).
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let doc = |epoch: &str, tail: &str| {
            format!(
                r#"{{"schemaVersion":"live-lane-awareness-projection.v1","publication":{{"targetId":"t","fencingEpoch":{epoch},"generatedAt":1}},"lifecycleActions":{{"envelope":{deep}}},"notAuthority":true{tail}}}"#
            )
        };
        assert_eq!(
            published_epoch(format!("{}\n", doc("7", "")).as_bytes()),
            Some(7)
        );
        assert_eq!(published_epoch(doc("3.0", "").as_bytes()), Some(3));
        assert_eq!(published_epoch(doc("3e0", "").as_bytes()), Some(3));
        assert_eq!(
            published_epoch(doc("7", r#","publication":{"fencingEpoch":8}"#).as_bytes()),
            Some(8)
        );
    }

    #[test]
    fn published_epoch_refuses_anything_else() {
        let good = r#"{"schemaVersion":"live-lane-awareness-projection.v1","publication":{"fencingEpoch":5},"notAuthority":true}"#;
        assert_eq!(published_epoch(good.as_bytes()), Some(5));
        let with_epoch = |e: &str| good.replace("5", e);
        for bad_epoch in [
            "0",
            "-1",
            "-0",
            "1.5",
            "0.5",
            "9007199254740992",
            "9007199254740992.0",
            "18446744073709551616",
            "1e300",
            "\"5\"",
            "true",
            "null",
            "[5]",
        ] {
            assert_eq!(
                published_epoch(with_epoch(bad_epoch).as_bytes()),
                None,
                "{bad_epoch}"
            );
        }
        for foreign in [
            good.replace(
                "live-lane-awareness-projection.v1",
                "solewriter.hook-projection.v2",
            ),
            good.replace("\"live-lane-awareness-projection.v1\"", "null"),
            good.replace("true", "false"),
            good.replace("true", "\"true\""),
            good.replace(r#","notAuthority":true"#, ""),
            good.replace(r#""publication":{"fencingEpoch":5},"#, ""),
            good.replace(r#"{"fencingEpoch":5}"#, "[5]"),
            good.replace(r#"{"fencingEpoch":5}"#, "{}"),
            format!("[{good}]"),
            good[..good.len() - 1].to_owned(),
            format!("{good}{good}"),
            String::new(),
            "null".to_owned(),
        ] {
            assert_eq!(published_epoch(foreign.as_bytes()), None, "{foreign}");
        }
        assert_eq!(published_epoch(b"\xff"), None);
        // At the bound it is read; one byte past it is refused unread.
        let mut padded = good.as_bytes().to_vec();
        padded.resize(MAX_DOCUMENT_BYTES, b' ');
        assert_eq!(published_epoch(&padded), Some(5));
        padded.push(b' ');
        assert_eq!(published_epoch(&padded), None);
    }
}
