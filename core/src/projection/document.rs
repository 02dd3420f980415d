//! Composition of committed channel rows into the published `current.json` document.
//!
//! Composition concatenates; it never ranks, filters or edits. Every stored row appears, in
//! channel-name order, with its envelope embedded byte for byte, its provenance (producer,
//! watermark, capture/expiry/update times), its freshness (an expired channel is flagged, not
//! dropped) and its degradation. Every registered channel without a row is listed under
//! `missing`. The fencing epoch is carried as a diagnostic only: nothing in solewriter reads
//! it back to decide whether a write is allowed.

use crate::projection::channel::{
    ChannelName, ChannelRecord, ChannelRegistry, DegradedReason, ProducerId,
};
use crate::projection::target::TargetId;
use crate::time::Millis;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Value of the document's `format` field.
pub const FORMAT: &str = "solewriter.hook-projection.v1";
/// Largest document, in bytes, that is published or parsed. A document embeds the stored
/// envelopes of every row (rows of channels no longer registered included), so the registry's
/// per-channel bounds cannot bound it alone: this constant does, on both sides — a publication
/// whose document would be larger fails (`current.json` untouched), and a reader reads at most
/// one byte more than this before refusing. 64 MiB is far above any sensible hook payload.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// Freshness of a channel at publication time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Freshness {
    /// `now < expires_at`.
    Fresh,
    /// `expires_at <= now`: still published, flagged.
    Expired,
}

/// One channel in the published document.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublishedChannel {
    /// Channel name.
    pub channel: ChannelName,
    /// Owning producer; `null` if the channel is no longer registered.
    pub producer: Option<ProducerId>,
    /// Watermark of the envelope.
    pub source_watermark: u64,
    /// Producer capture time.
    pub captured_at: Millis,
    /// Producer expiry time.
    pub expires_at: Millis,
    /// Broker time of the last change to the row.
    pub updated_at: Millis,
    /// Freshness at publication.
    pub freshness: Freshness,
    /// Degradation, if any.
    pub degraded: Option<DegradedReason>,
    /// The producer's envelope, verbatim.
    pub envelope: Box<RawValue>,
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
    pub channels: Vec<PublishedChannel>,
    /// Registered channels with no stored row, by name.
    pub missing: Vec<ChannelName>,
}

/// Why a stored row or a published document cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// A stored envelope is not valid JSON (the store was modified behind solewriter's back).
    #[error("stored envelope of channel `{0}` is not valid JSON")]
    CorruptEnvelope(String),
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

/// Composes the document of the grant at `epoch` on `target_id` from the committed `rows` at
/// broker time `now`. Deterministic: the same inputs give the same bytes. Only
/// [`crate::projection::Draft`] calls it: a composed document is published only once an
/// [`crate::projection::lease::Authority`] has confirmed it.
pub(crate) fn compose(
    target_id: &TargetId,
    epoch: u64,
    registry: &ChannelRegistry,
    rows: &[ChannelRecord],
    now: Millis,
) -> Result<ProjectionDocument, DocumentError> {
    let mut sorted: Vec<&ChannelRecord> = rows.iter().collect();
    sorted.sort_by(|a, b| a.channel.cmp(&b.channel));
    let channels = sorted
        .into_iter()
        .map(|row| {
            let envelope = RawValue::from_string(row.envelope_json.clone())
                .map_err(|_| DocumentError::CorruptEnvelope(row.channel.to_string()))?;
            Ok(PublishedChannel {
                channel: row.channel.clone(),
                producer: registry.get(&row.channel).map(|s| s.owner.clone()),
                source_watermark: row.source_watermark,
                captured_at: row.captured_at,
                expires_at: row.expires_at,
                updated_at: row.updated_at,
                freshness: if row.expires_at <= now {
                    Freshness::Expired
                } else {
                    Freshness::Fresh
                },
                degraded: row.degraded_reason,
                envelope,
            })
        })
        .collect::<Result<Vec<_>, DocumentError>>()?;
    let missing = registry
        .iter()
        .filter(|spec| !rows.iter().any(|r| r.channel == spec.name))
        .map(|spec| spec.name.clone())
        .collect();
    Ok(ProjectionDocument {
        format: FORMAT.to_owned(),
        target_id: target_id.clone(),
        fencing_epoch: epoch,
        published_at: now,
        channels,
        missing,
    })
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
        let doc: ProjectionDocument =
            serde_json::from_slice(bytes).map_err(|e| DocumentError::Malformed(e.to_string()))?;
        if doc.format != FORMAT {
            return Err(DocumentError::Malformed(format!(
                "format `{}`, expected `{FORMAT}`",
                doc.format
            )));
        }
        Ok(doc)
    }
}

fn check_size(size: usize) -> Result<(), DocumentError> {
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
            source_watermark: 7,
            envelope_json: envelope.into(),
            captured_at: Millis(1),
            expires_at: Millis(expires),
            updated_at: Millis(2),
            degraded_reason: degraded,
        }
    }

    #[test]
    fn composition_keeps_everything_in_order() {
        let registry = ChannelRegistry::new([spec("b"), spec("a"), spec("c")]).unwrap();
        let envelope_b = "{ \"z\": 1,  \"a\" : [3,2,1] }";
        let rows = [
            row("b", envelope_b, 50, Some(DegradedReason::SourceConflict)),
            row("a", "{\"k\":\"v\"}", 500, None),
            row("gone", "[]", 500, None),
        ];
        let doc = compose(&tid(), 1, &registry, &rows, Millis(100)).unwrap();
        let names: Vec<_> = doc.channels.iter().map(|c| c.channel.as_str()).collect();
        assert_eq!(names, ["a", "b", "gone"]);
        assert_eq!(
            doc.channels[1].envelope.get(),
            envelope_b,
            "envelope verbatim"
        );
        assert_eq!(
            doc.channels[1].freshness,
            Freshness::Expired,
            "expired flagged, not dropped"
        );
        assert_eq!(
            doc.channels[1].degraded,
            Some(DegradedReason::SourceConflict)
        );
        assert_eq!(doc.channels[0].freshness, Freshness::Fresh);
        assert_eq!(doc.channels[2].producer, None);
        assert_eq!(doc.missing, [ChannelName::parse("c").unwrap()]);
        assert_eq!(doc.fencing_epoch, 1);
        // Deterministic: permuting the input rows gives the same bytes.
        let permuted = [rows[2].clone(), rows[0].clone(), rows[1].clone()];
        let again = compose(&tid(), 1, &registry, &permuted, Millis(100)).unwrap();
        assert_eq!(doc.to_bytes(), again.to_bytes());
        let parsed = ProjectionDocument::parse(&doc.to_bytes()).unwrap();
        assert_eq!(parsed.to_bytes(), doc.to_bytes());
    }

    #[test]
    fn truncated_or_foreign_documents_do_not_parse() {
        let registry = ChannelRegistry::new([spec("a")]).unwrap();
        let bytes = compose(&tid(), 1, &registry, &[row("a", "{}", 9, None)], Millis(3))
            .unwrap()
            .to_bytes();
        for cut in 0..bytes.len() - 1 {
            assert!(
                ProjectionDocument::parse(&bytes[..cut]).is_err(),
                "prefix {cut} parsed"
            );
        }
        let foreign = String::from_utf8(bytes)
            .unwrap()
            .replace(FORMAT, "other.v1");
        assert!(ProjectionDocument::parse(foreign.as_bytes()).is_err());
    }

    #[test]
    fn documents_past_the_bound_are_neither_published_nor_parsed() {
        let registry = ChannelRegistry::new([spec("a")]).unwrap();
        let huge = format!("\"{}\"", "x".repeat(MAX_DOCUMENT_BYTES));
        let doc = compose(&tid(), 1, &registry, &[row("a", &huge, 9, None)], Millis(3)).unwrap();
        assert!(matches!(
            doc.to_bounded_bytes(),
            Err(DocumentError::TooLarge { .. })
        ));
        let small = compose(&tid(), 1, &registry, &[row("a", "{}", 9, None)], Millis(3)).unwrap();
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

    #[test]
    fn corrupt_stored_envelope_is_an_error() {
        let registry = ChannelRegistry::new([spec("a")]).unwrap();
        let err = compose(
            &tid(),
            1,
            &registry,
            &[row("a", "{not json", 9, None)],
            Millis(3),
        )
        .unwrap_err();
        assert_eq!(err, DocumentError::CorruptEnvelope("a".into()));
    }
}
