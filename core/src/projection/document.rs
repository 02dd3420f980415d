//! Composition of committed channel rows into the published `current.json` document
//! (format v2), and its strict parsing.
//!
//! Composition concatenates; it never ranks, filters or edits. Every stored row appears, in
//! channel-name order, with its envelope embedded verbatim (without surrounding whitespace),
//! its provenance (producer, watermark, capture/expiry/update times) and its status with its
//! reason ([`channel_status`]: a stale or degraded channel is flagged, not dropped; a corrupt
//! envelope is withheld and degrades only its own channel). Every registered channel without a
//! row is listed under `missing`; `producerWatermarks` and `coverage` summarize the channels.
//! The fencing epoch is carried as a diagnostic only: nothing in solewriter reads it back to
//! decide whether a write is allowed.

use crate::error_kind::ErrorKind;
use crate::projection::channel::{
    ChannelName, ChannelRecord, ChannelRegistry, DegradedReason, ProducerId,
};
use crate::projection::target::TargetId;
use crate::projection::watermark::value::Watermark;
use crate::time::Millis;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// Value of the document's `format` field.
pub const FORMAT: &str = "solewriter.hook-projection.v2";
/// Largest document, in bytes, that is published or parsed. A document embeds the stored
/// envelopes of every row (rows of channels no longer registered included), so the registry's
/// per-channel bounds cannot bound it alone: this constant does, on both sides — a publication
/// whose document would be larger fails (`current.json` untouched), and a reader reads at most
/// one byte more than this before refusing. 64 MiB is far above any sensible hook payload.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// Where a document format names itself and carries its fencing epoch, for the bounded read
/// of the document in place ([`crate::projection::published_epoch`]): a format is recognised
/// by a top-level `marker` key holding its name, before any epoch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EpochPlace {
    /// The top-level key naming the format.
    pub(crate) marker: &'static str,
    /// The top-level object that holds `fencingEpoch` (`None`: the document itself).
    pub(crate) within: Option<&'static str>,
    /// The epoch, as the format takes it from its JSON number.
    pub(crate) epoch: fn(&serde_json::Number) -> Option<u64>,
}

/// Where this format names itself (`format`) and carries its fencing epoch (a top-level
/// `fencingEpoch`, an unsigned integer).
pub(crate) const EPOCH_PLACE: EpochPlace = EpochPlace {
    marker: "format",
    within: None,
    epoch: serde_json::Number::as_u64,
};

/// What a hook may make of one stored channel, at a given clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelStatus {
    /// Healthy and `now < expires_at`.
    Fresh,
    /// Healthy but `expires_at <= now`: still published, flagged.
    Stale,
    /// Not to be trusted as current, whatever the clock says (see [`StatusReason`]).
    Degraded,
}

/// Why a stored channel is not [`ChannelStatus::Fresh`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StatusReason {
    /// `expires_at <= now` ([`ChannelStatus::Stale`]).
    Expired,
    /// The producer submitted two different envelopes at one watermark
    /// ([`DegradedReason::SourceConflict`]; [`ChannelStatus::Degraded`]).
    SourceConflict,
    /// The stored envelope is not a JSON object, which admission would have refused (the
    /// store was modified behind solewriter's back): the envelope is withheld (`null`) and
    /// this one channel is published [`ChannelStatus::Degraded`]; every other channel is
    /// published as usual.
    CorruptEnvelope,
}

/// The stored envelope of `row`, verbatim, if it is a JSON object (as admission requires).
fn stored_envelope(row: &ChannelRecord) -> Option<Box<RawValue>> {
    RawValue::from_string(row.envelope_json.clone())
        .ok()
        .filter(|raw| raw.get().trim_start().starts_with('{'))
}

/// The status of a stored row at broker time `now`, with its reason (`None` exactly when
/// fresh). Precedence: a corrupt envelope, then a source conflict, then expiry. Used by
/// composition and by every view of the store's rows, so they cannot disagree.
pub fn channel_status(row: &ChannelRecord, now: Millis) -> (ChannelStatus, Option<StatusReason>) {
    if stored_envelope(row).is_none() {
        return (ChannelStatus::Degraded, Some(StatusReason::CorruptEnvelope));
    }
    match row.degraded_reason {
        Some(DegradedReason::SourceConflict) => {
            (ChannelStatus::Degraded, Some(StatusReason::SourceConflict))
        }
        None if row.expires_at <= now => (ChannelStatus::Stale, Some(StatusReason::Expired)),
        None => (ChannelStatus::Fresh, None),
    }
}

/// One stored channel in the published document.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublishedChannel {
    /// Channel name.
    pub channel: ChannelName,
    /// Owning producer; `null` if the channel is no longer registered.
    #[serde(deserialize_with = "nullable")]
    pub producer: Option<ProducerId>,
    /// Watermark of the envelope: a JSON integer, or a string for a channel whose watermarks
    /// are text (instants, instant-plus-sequence, declared text).
    pub source_watermark: Watermark,
    /// Producer capture time.
    pub captured_at: Millis,
    /// Producer expiry time.
    pub expires_at: Millis,
    /// Broker time of the last change to the row.
    pub updated_at: Millis,
    /// Status at publication ([`channel_status`] at `publishedAt`).
    pub status: ChannelStatus,
    /// Why the status is not fresh; `null` when fresh.
    #[serde(deserialize_with = "nullable")]
    pub reason: Option<StatusReason>,
    /// The producer's envelope, verbatim; `null` exactly when the stored envelope is corrupt.
    #[serde(deserialize_with = "nullable")]
    pub envelope: Option<Box<RawValue>>,
}

/// How many channels a document covers, by status, as of its publication.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Coverage {
    /// Registered channels: those published with a producer, plus the missing ones.
    pub registered: u64,
    /// Channels published fresh.
    pub fresh: u64,
    /// Channels published stale.
    pub stale: u64,
    /// Channels published degraded.
    pub degraded: u64,
    /// Registered channels with no stored row.
    pub missing: u64,
    /// Stored channels no longer registered (`producer: null`).
    pub unregistered: u64,
}

impl Coverage {
    /// The coverage `channels` and `missing` imply.
    pub fn of(channels: &[PublishedChannel], missing: &[ChannelName]) -> Self {
        let count =
            |f: &dyn Fn(&PublishedChannel) -> bool| channels.iter().filter(|c| f(c)).count() as u64;
        let missing = missing.len() as u64;
        Coverage {
            registered: count(&|c| c.producer.is_some()) + missing,
            fresh: count(&|c| c.status == ChannelStatus::Fresh),
            stale: count(&|c| c.status == ChannelStatus::Stale),
            degraded: count(&|c| c.status == ChannelStatus::Degraded),
            missing,
            unregistered: count(&|c| c.producer.is_none()),
        }
    }
}

/// Each producer's channels and their watermarks, as published.
pub type ProducerWatermarks = BTreeMap<ProducerId, BTreeMap<ChannelName, Watermark>>;

/// The watermarks `channels` imply: every channel with a producer, under its producer.
pub fn producer_watermarks(channels: &[PublishedChannel]) -> ProducerWatermarks {
    let mut map = ProducerWatermarks::new();
    for c in channels {
        if let Some(producer) = &c.producer {
            map.entry(producer.clone())
                .or_default()
                .insert(c.channel.clone(), c.source_watermark.clone());
        }
    }
    map
}

/// The published `current.json` document.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectionDocument {
    /// Always [`FORMAT`].
    pub format: String,
    /// The target.
    pub target_id: TargetId,
    /// Fencing epoch of the publishing holder. Diagnostic only; never a guard.
    pub fencing_epoch: u64,
    /// Broker time of composition.
    pub published_at: Millis,
    /// The stored channels, by name.
    #[serde(deserialize_with = "objects")]
    pub channels: Vec<PublishedChannel>,
    /// Registered channels with no stored row, by name.
    pub missing: Vec<ChannelName>,
    /// Each producer's channels and watermarks ([`producer_watermarks`] of `channels`).
    #[serde(deserialize_with = "unique_keys")]
    pub producer_watermarks: ProducerWatermarks,
    /// The counts by status ([`Coverage::of`] `channels` and `missing`).
    #[serde(deserialize_with = "object")]
    pub coverage: Coverage,
}

/// Why a stored row or a published document cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// A document does not parse as a complete projection document.
    #[error("projection document is malformed: {0}")]
    Malformed(String),
    /// A document is larger than [`MAX_DOCUMENT_BYTES`] (`size` counts at most one byte past).
    #[error("projection document of {size} bytes or more exceeds the bound of {MAX_DOCUMENT_BYTES} bytes")]
    TooLarge {
        /// The size seen.
        size: usize,
    },
}

impl DocumentError {
    /// A document or stored row that cannot be used: an operator must look.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Environment
    }
}

/// Composes the document of the grant at `epoch` on `target_id` from the committed `rows` at
/// broker time `now`. Deterministic: the same inputs give the same bytes. Only
/// [`crate::projection::Draft`] calls it: a composed document is published only once an
/// [`crate::projection::lease::Authority`] has confirmed it. A row whose stored envelope is
/// not JSON is published degraded with its envelope withheld; it does not stop the others.
pub(crate) fn compose(
    target_id: &TargetId,
    epoch: u64,
    registry: &ChannelRegistry,
    rows: &[ChannelRecord],
    now: Millis,
) -> ProjectionDocument {
    let mut sorted: Vec<&ChannelRecord> = rows.iter().collect();
    sorted.sort_by(|a, b| a.channel.cmp(&b.channel));
    let channels: Vec<PublishedChannel> = sorted
        .into_iter()
        .map(|row| {
            let (status, reason) = channel_status(row, now);
            PublishedChannel {
                channel: row.channel.clone(),
                producer: registry.get(&row.channel).map(|s| s.owner.clone()),
                source_watermark: row.source_watermark.clone(),
                captured_at: row.captured_at,
                expires_at: row.expires_at,
                updated_at: row.updated_at,
                status,
                reason,
                envelope: stored_envelope(row),
            }
        })
        .collect();
    let missing: Vec<ChannelName> = registry
        .iter()
        .filter(|spec| !rows.iter().any(|r| r.channel == spec.name))
        .map(|spec| spec.name.clone())
        .collect();
    ProjectionDocument {
        format: FORMAT.to_owned(),
        target_id: target_id.clone(),
        fencing_epoch: epoch,
        published_at: now,
        producer_watermarks: producer_watermarks(&channels),
        coverage: Coverage::of(&channels, &missing),
        channels,
        missing,
    }
}

impl ProjectionDocument {
    /// The bytes written to `current.json` (compact JSON followed by a newline).
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain structs, strings, integers and already-validated raw JSON cannot
        // fail; an empty document must never be published, so this is not defaulted.
        let mut bytes = serde_json::to_vec(self).expect("a projection document always serializes");
        bytes.push(b'\n');
        bytes
    }

    /// [`Self::to_bytes`], refused past [`MAX_DOCUMENT_BYTES`] (readers would refuse it).
    pub fn to_bounded_bytes(&self) -> Result<Vec<u8>, DocumentError> {
        let bytes = self.to_bytes();
        check_size(bytes.len())?;
        Ok(bytes)
    }

    /// Parses a complete document; anything else (truncated, foreign format, larger than
    /// [`MAX_DOCUMENT_BYTES`]) is an error.
    pub fn parse(bytes: &[u8]) -> Result<Self, DocumentError> {
        check_size(bytes.len())?;
        let Object(doc): Object<ProjectionDocument> =
            serde_json::from_slice(bytes).map_err(|e| DocumentError::Malformed(e.to_string()))?;
        if doc.format != FORMAT {
            return Err(DocumentError::Malformed(format!(
                "format `{}`, expected `{FORMAT}`",
                doc.format
            )));
        }
        doc.check_consistency().map_err(DocumentError::Malformed)?;
        Ok(doc)
    }

    /// What the publisher guarantees beyond the shape: names strictly ascending and
    /// `missing` disjoint from `channels`; each status with its reasons, and fresh or stale
    /// as `expiresAt` stands to `publishedAt`; an envelope (a JSON object) exactly when it is
    /// not corrupt; the watermarks and the coverage the channels imply.
    fn check_consistency(&self) -> Result<(), String> {
        let names: Vec<&ChannelName> = self.channels.iter().map(|c| &c.channel).collect();
        ascending(&names, "channels")?;
        ascending(&self.missing.iter().collect::<Vec<_>>(), "missing")?;
        if let Some(name) = self.missing.iter().find(|m| names.contains(m)) {
            return Err(format!("`{name}` is both stored and missing"));
        }
        for c in &self.channels {
            let paired = matches!(
                (c.status, c.reason),
                (ChannelStatus::Fresh, None)
                    | (ChannelStatus::Stale, Some(StatusReason::Expired))
                    | (
                        ChannelStatus::Degraded,
                        Some(StatusReason::SourceConflict | StatusReason::CorruptEnvelope)
                    )
            );
            if !paired {
                return Err(format!(
                    "channel `{}`: status {:?} with reason {:?}",
                    c.channel, c.status, c.reason
                ));
            }
            let expired = c.expires_at <= self.published_at;
            if (c.status == ChannelStatus::Fresh && expired)
                || (c.status == ChannelStatus::Stale && !expired)
            {
                return Err(format!(
                    "channel `{}`: status {:?} with expiresAt {} and publishedAt {}",
                    c.channel, c.status, c.expires_at.0, self.published_at.0
                ));
            }
            let withheld = c.reason == Some(StatusReason::CorruptEnvelope);
            match &c.envelope {
                None if !withheld => return Err(format!("channel `{}`: envelope null", c.channel)),
                Some(_) if withheld => {
                    return Err(format!(
                        "channel `{}`: an envelope with reason corrupt-envelope",
                        c.channel
                    ))
                }
                Some(raw) if !raw.get().starts_with('{') => {
                    return Err(format!(
                        "channel `{}`: envelope is not a JSON object",
                        c.channel
                    ))
                }
                _ => {}
            }
        }
        if self.producer_watermarks != producer_watermarks(&self.channels) {
            return Err(
                "producerWatermarks differ from the channels' producers and watermarks".into(),
            );
        }
        if self.coverage != Coverage::of(&self.channels, &self.missing) {
            return Err("coverage differs from the channels' statuses".into());
        }
        Ok(())
    }
}

fn ascending(names: &[&ChannelName], what: &str) -> Result<(), String> {
    match names.windows(2).find(|w| w[0] >= w[1]) {
        Some(w) => Err(format!("{what}: `{}` before `{}`", w[0], w[1])),
        None => Ok(()),
    }
}

/// [`ProducerWatermarks`], refusing a key written twice at either level (as a struct's keys
/// are refused twice).
fn unique_keys<'de, D>(deserializer: D) -> Result<ProducerWatermarks, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let outer =
        UniqueMap::<ProducerId, UniqueMap<ChannelName, Watermark>>::deserialize(deserializer)?;
    Ok(outer.0.into_iter().map(|(k, v)| (k, v.0)).collect())
}

/// A JSON object read into a map, refusing a duplicate key.
struct UniqueMap<K, V>(BTreeMap<K, V>);

impl<'de, K, V> Deserialize<'de> for UniqueMap<K, V>
where
    K: Deserialize<'de> + Ord + std::fmt::Display,
    V: Deserialize<'de>,
{
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<K, V>(std::marker::PhantomData<(K, V)>);
        impl<'de, K, V> serde::de::Visitor<'de> for Visit<K, V>
        where
            K: Deserialize<'de> + Ord + std::fmt::Display,
            V: Deserialize<'de>,
        {
            type Value = UniqueMap<K, V>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object without a duplicate key")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<Self::Value, A::Error> {
                let mut map = BTreeMap::new();
                while let Some((key, value)) = access.next_entry::<K, V>()? {
                    if map.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    map.insert(key, value);
                }
                Ok(UniqueMap(map))
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// A struct read only from a JSON object. (A derived `Deserialize` also takes a JSON array of
/// the fields in order, which no publisher writes and the readers refuse.)
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

fn object<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Object::deserialize(deserializer).map(|Object(value)| value)
}

fn objects<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let all = Vec::<Object<T>>::deserialize(deserializer)?;
    Ok(all.into_iter().map(|Object(value)| value).collect())
}

/// A key that must be present, whose value may be `null`.
fn nullable<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}

pub(crate) fn check_size(size: usize) -> Result<(), DocumentError> {
    if size > MAX_DOCUMENT_BYTES {
        return Err(DocumentError::TooLarge { size });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::channel::ChannelSpec;

    fn tid() -> TargetId {
        TargetId::parse(&"1".repeat(64)).unwrap()
    }

    fn spec(name: &str) -> ChannelSpec {
        ChannelSpec {
            name: ChannelName::parse(name).unwrap(),
            owner: ProducerId::parse(&format!("{name}-producer")).unwrap(),
            envelope_schema: "s".into(),
            max_envelope_bytes: 100,
            watermark: crate::projection::watermark::value::WatermarkKind::Integer,
            envelope_json_schema: None,
        }
    }

    fn row(
        name: &str,
        envelope: &str,
        expires: u64,
        degraded: Option<DegradedReason>,
    ) -> ChannelRecord {
        ChannelRecord {
            target_id: TargetId::parse(&"1".repeat(64)).unwrap(),
            channel: ChannelName::parse(name).unwrap(),
            source_watermark: 7.into(),
            envelope_json: envelope.into(),
            captured_at: Millis(1),
            expires_at: Millis(expires),
            updated_at: Millis(2),
            degraded_reason: degraded,
        }
    }

    #[test]
    fn composition_keeps_everything_in_order() {
        let registry = ChannelRegistry::new([spec("b"), spec("a"), spec("c"), spec("d")]).unwrap();
        let envelope_b = "{ \"z\": 1,  \"a\" : [3,2,1] }";
        let rows = [
            row("b", envelope_b, 50, Some(DegradedReason::SourceConflict)),
            row("a", "{\"k\":\"v\"}", 500, None),
            row("gone", "{}", 500, None),
            row("d", "{}", 100, None),
        ];
        let doc = compose(&tid(), 1, &registry, &rows, Millis(100));
        let names: Vec<_> = doc.channels.iter().map(|c| c.channel.as_str()).collect();
        assert_eq!(names, ["a", "b", "d", "gone"]);
        let b = &doc.channels[1];
        assert_eq!(b.envelope.as_ref().unwrap().get(), envelope_b, "verbatim");
        assert_eq!(
            (b.status, b.reason),
            (ChannelStatus::Degraded, Some(StatusReason::SourceConflict)),
            "a conflict outranks expiry"
        );
        let d = &doc.channels[2];
        assert_eq!(
            (d.status, d.reason),
            (ChannelStatus::Stale, Some(StatusReason::Expired)),
            "expired exactly at the clock: flagged, not dropped"
        );
        assert_eq!(
            (doc.channels[0].status, doc.channels[0].reason),
            (ChannelStatus::Fresh, None)
        );
        assert_eq!(doc.channels[3].producer, None);
        assert_eq!(doc.missing, [ChannelName::parse("c").unwrap()]);
        assert_eq!(doc.fencing_epoch, 1);
        assert_eq!(
            doc.coverage,
            Coverage {
                registered: 4,
                fresh: 2,
                stale: 1,
                degraded: 1,
                missing: 1,
                unregistered: 1
            }
        );
        let watermarks: Vec<_> = doc
            .producer_watermarks
            .iter()
            .map(|(p, m)| {
                (
                    p.as_str(),
                    m.keys().map(ChannelName::as_str).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(
            watermarks,
            [
                ("a-producer", vec!["a"]),
                ("b-producer", vec!["b"]),
                ("d-producer", vec!["d"])
            ],
            "every registered stored channel under its producer; the unregistered one under none"
        );
        // Deterministic: permuting the input rows gives the same bytes.
        let permuted = [
            rows[2].clone(),
            rows[0].clone(),
            rows[3].clone(),
            rows[1].clone(),
        ];
        let again = compose(&tid(), 1, &registry, &permuted, Millis(100));
        assert_eq!(doc.to_bytes(), again.to_bytes());
        let parsed = ProjectionDocument::parse(&doc.to_bytes()).unwrap();
        assert_eq!(parsed.to_bytes(), doc.to_bytes());
    }

    #[test]
    fn a_corrupt_envelope_degrades_its_own_channel_only() {
        let registry = ChannelRegistry::new([spec("a"), spec("b"), spec("c")]).unwrap();
        let rows = [
            row("a", "{not json", 9, None),
            row("b", "{\"ok\":1}", 9, None),
            row("c", "[1]", 9, None),
        ];
        let doc = compose(&tid(), 1, &registry, &rows, Millis(3));
        for (i, name) in [(0, "a"), (2, "c")] {
            let c = &doc.channels[i];
            assert_eq!(c.channel.as_str(), name);
            assert_eq!(
                (c.status, c.reason),
                (ChannelStatus::Degraded, Some(StatusReason::CorruptEnvelope)),
                "{name}: not a JSON object"
            );
            assert!(c.envelope.is_none(), "{name}: withheld");
        }
        let b = &doc.channels[1];
        assert_eq!(
            (b.status, b.envelope.as_ref().map(|e| e.get())),
            (ChannelStatus::Fresh, Some("{\"ok\":1}"))
        );
        assert_eq!(
            doc.coverage,
            Coverage {
                registered: 3,
                fresh: 1,
                stale: 0,
                degraded: 2,
                missing: 0,
                unregistered: 0
            }
        );
        assert!(ProjectionDocument::parse(&doc.to_bytes()).is_ok());
    }

    #[test]
    fn truncated_or_foreign_documents_do_not_parse() {
        let registry = ChannelRegistry::new([spec("a")]).unwrap();
        let bytes = compose(&tid(), 1, &registry, &[row("a", "{}", 9, None)], Millis(3)).to_bytes();
        for cut in 0..bytes.len() - 1 {
            assert!(
                ProjectionDocument::parse(&bytes[..cut]).is_err(),
                "prefix {cut} parsed"
            );
        }
        let text = String::from_utf8(bytes).unwrap();
        for (from, to) in [
            (FORMAT, "solewriter.hook-projection.v1"),
            (FORMAT, "other.v2"),
            ("\"producer\":\"a-producer\",", ""),
        ] {
            let changed = text.replacen(from, to, 1);
            assert_ne!(changed, text);
            assert!(
                matches!(
                    ProjectionDocument::parse(changed.as_bytes()),
                    Err(DocumentError::Malformed(_))
                ),
                "{changed}"
            );
        }
    }

    /// Each consistency rule the publisher guarantees, broken alone, is refused.
    #[test]
    fn inconsistent_documents_do_not_parse() {
        let registry = ChannelRegistry::new([spec("a"), spec("b"), spec("m")]).unwrap();
        let rows = [
            row("a", "{}", 9, None),
            row("b", "{}", 9, Some(DegradedReason::SourceConflict)),
        ];
        let doc = compose(&tid(), 1, &registry, &rows, Millis(3));
        let text = String::from_utf8(doc.to_bytes()).unwrap();
        let fresh = "\"status\":\"fresh\",\"reason\":null";
        let conflict = "\"status\":\"degraded\",\"reason\":\"source-conflict\"";
        let coverage = "\"coverage\":{\"registered\":3,\"fresh\":1,\"stale\":0,\"degraded\":1,\"missing\":1,\"unregistered\":0}";
        assert!(
            text.contains(fresh) && text.contains(conflict) && text.contains(coverage),
            "{text}"
        );
        let broken = [
            (
                fresh,
                "\"status\":\"fresh\",\"reason\":\"expired\"",
                "fresh with a reason",
            ),
            (
                fresh,
                "\"status\":\"stale\",\"reason\":null",
                "stale without a reason",
            ),
            (
                fresh,
                "\"status\":\"degraded\",\"reason\":\"expired\"",
                "degraded for expiry",
            ),
            (
                conflict,
                "\"status\":\"stale\",\"reason\":\"source-conflict\"",
                "stale for a conflict",
            ),
            (
                "\"envelope\":{}",
                "\"envelope\":null",
                "an envelope withheld without corruption",
            ),
            (
                conflict,
                "\"status\":\"degraded\",\"reason\":\"corrupt-envelope\"",
                "an envelope with reason corrupt-envelope",
            ),
            (
                "\"envelope\":{}",
                "\"envelope\":[]",
                "an envelope that is not an object",
            ),
            (
                "\"a-producer\":{\"a\":7}",
                "\"a-producer\":{\"a\":8}",
                "a watermark differs",
            ),
            (
                "\"a-producer\":{\"a\":7}",
                "\"a-producer\":{\"a\":7,\"a\":7}",
                "a duplicate key",
            ),
            ("\"a-producer\":{\"a\":7},", "", "a producer left out"),
            ("\"registered\":3", "\"registered\":2", "coverage off"),
            (
                "\"expiresAt\":9,",
                "\"expiresAt\":3,",
                "fresh although expired at publication",
            ),
            (
                fresh,
                "\"status\":\"stale\",\"reason\":\"expired\"",
                "stale before expiry",
            ),
            ("\"missing\":1", "\"missing\":0", "coverage off"),
            (
                "\"missing\":[\"m\"]",
                "\"missing\":[\"a\"]",
                "stored and missing",
            ),
        ];
        for (from, to, what) in broken {
            let changed = text.replacen(from, to, 1);
            assert_ne!(changed, text, "{what}: {from}");
            assert!(
                matches!(
                    ProjectionDocument::parse(changed.as_bytes()),
                    Err(DocumentError::Malformed(_))
                ),
                "{what} parsed: {changed}"
            );
        }
        for (from, to, what) in [
            (coverage, "\"coverage\":[3,1,0,1,1,0]", "coverage an array"),
            ("\"channels\":[{\"channel\":\"a\",\"producer\":\"a-producer\",\"sourceWatermark\":7,\"capturedAt\":1,\"expiresAt\":9,\"updatedAt\":2,\"status\":\"fresh\",\"reason\":null,\"envelope\":{}}",
             "\"channels\":[[\"a\",\"a-producer\",7,1,9,2,\"fresh\",null,{}]", "a channel an array"),
        ] {
            let changed = text.replacen(from, to, 1);
            assert_ne!(changed, text, "{what}");
            assert!(
                matches!(ProjectionDocument::parse(changed.as_bytes()), Err(DocumentError::Malformed(why)) if why.contains("expected a JSON object")),
                "{what} parsed: {changed}"
            );
        }
        let listed = text.replacen(
            "\"producerWatermarks\":{\"a-producer\":{\"a\":7},\"b-producer\":{\"b\":7}}",
            "\"producerWatermarks\":[]",
            1,
        );
        assert_ne!(listed, text);
        assert!(
            matches!(ProjectionDocument::parse(listed.as_bytes()), Err(DocumentError::Malformed(why)) if why.contains("expected an object without a duplicate key")),
            "producerWatermarks an array"
        );
        let whole = serde_json::to_string(
            &serde_json::to_value(&doc)
                .unwrap()
                .as_object()
                .unwrap()
                .values()
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert!(
            ProjectionDocument::parse(whole.as_bytes()).is_err(),
            "the document an array"
        );
        let swapped = ProjectionDocument {
            channels: doc.channels.iter().rev().cloned().collect(),
            ..doc.clone()
        };
        assert!(
            matches!(ProjectionDocument::parse(&swapped.to_bytes()), Err(DocumentError::Malformed(why)) if why.contains("before")),
            "channels out of order"
        );
    }

    #[test]
    fn documents_past_the_bound_are_neither_published_nor_parsed() {
        let registry = ChannelRegistry::new([spec("a")]).unwrap();
        let huge = format!("{{\"x\":\"{}\"}}", "x".repeat(MAX_DOCUMENT_BYTES));
        let doc = compose(&tid(), 1, &registry, &[row("a", &huge, 9, None)], Millis(3));
        assert!(matches!(
            doc.to_bounded_bytes(),
            Err(DocumentError::TooLarge { .. })
        ));
        let small = compose(&tid(), 1, &registry, &[row("a", "{}", 9, None)], Millis(3));
        let bytes = small.to_bounded_bytes().unwrap();
        assert!(ProjectionDocument::parse(&bytes).is_ok());
        let mut padded = bytes.clone();
        padded.resize(MAX_DOCUMENT_BYTES, b' ');
        assert!(ProjectionDocument::parse(&padded).is_ok(), "at the bound");
        padded.push(b' ');
        assert_eq!(
            ProjectionDocument::parse(&padded).unwrap_err(),
            DocumentError::TooLarge {
                size: MAX_DOCUMENT_BYTES + 1
            }
        );
    }
}
