//! Producers, channels, the host's channel registry, submissions and stored channel rows.
//!
//! Each channel is owned by exactly one producer and has an envelope schema id and a size
//! bound. The registry is host configuration: a producer can only ever name a channel and a
//! target id; it never names a path.

pub use crate::names::{ChannelName, NameError, ProducerId};
use crate::projection::envelope_schema::EnvelopeSchema;
use crate::projection::target::TargetId;
use crate::projection::watermark::value::{Watermark, WatermarkKind};
use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a channel registry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The same channel is registered twice.
    #[error("channel `{0}` is registered twice")]
    DuplicateChannel(String),
    /// A channel's size bound is zero.
    #[error("channel `{0}` has a zero size bound")]
    ZeroSizeBound(String),
    /// A channel declares a watermark kind its store's profile does not publish: the generic
    /// document (`solewriter.hook-projection.v2`) carries integer watermarks only.
    #[error("channel `{channel}` declares {kind} watermarks; a store of profile {profile} publishes integer watermarks only")]
    KindOutsideProfile {
        /// The channel.
        channel: String,
        /// Its declared kind.
        kind: WatermarkKind,
        /// The store's profile.
        profile: &'static str,
    },
}

/// One registered channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChannelSpec {
    /// Channel name.
    pub name: ChannelName,
    /// The only producer allowed to submit to it.
    pub owner: ProducerId,
    /// Required value of the envelope's `schema` field, e.g. `lifecycle-frontier.v1`.
    pub envelope_schema: String,
    /// Largest accepted envelope, in bytes.
    pub max_envelope_bytes: usize,
    /// The kind of watermark the producer emits (`integer` when not given).
    #[serde(default)]
    pub watermark: WatermarkKind,
    /// The JSON Schema every envelope of the channel must satisfy, beyond its schema id and
    /// `notAuthority` (none when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope_json_schema: Option<EnvelopeSchema>,
}

/// The host's registry of channels. Every registered channel appears in every published
/// document (as a row, or as missing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelRegistry {
    channels: BTreeMap<ChannelName, ChannelSpec>,
}

impl ChannelRegistry {
    /// Builds a registry; duplicate channels and zero size bounds are refused.
    pub fn new(specs: impl IntoIterator<Item = ChannelSpec>) -> Result<Self, RegistryError> {
        let mut channels = BTreeMap::new();
        for spec in specs {
            if spec.max_envelope_bytes == 0 {
                return Err(RegistryError::ZeroSizeBound(spec.name.to_string()));
            }
            let name = spec.name.clone();
            if channels.insert(name.clone(), spec).is_some() {
                return Err(RegistryError::DuplicateChannel(name.to_string()));
            }
        }
        Ok(ChannelRegistry { channels })
    }

    /// The spec of `name`, if registered.
    pub fn get(&self, name: &ChannelName) -> Option<&ChannelSpec> {
        self.channels.get(name)
    }

    /// All registered channels, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &ChannelSpec> {
        self.channels.values()
    }
}

/// Why a channel is degraded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DegradedReason {
    /// The producer submitted two different envelopes at one watermark.
    #[serde(rename = "source-conflict")]
    SourceConflict,
}

impl DegradedReason {
    /// The stored and published spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DegradedReason::SourceConflict => "source-conflict",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(text: &str) -> Option<Self> {
        (text == "source-conflict").then_some(DegradedReason::SourceConflict)
    }
}

/// A producer's submission for one channel of one admitted target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    /// The target (derived by the server from the attested tuple).
    pub target_id: TargetId,
    /// The producer's channel.
    pub channel: ChannelName,
    /// Monotonic source watermark, of the channel's declared kind.
    pub source_watermark: Watermark,
    /// The envelope, as JSON text; published byte for byte.
    pub envelope_json: String,
    /// When the producer captured the envelope.
    pub captured_at: Millis,
    /// When the envelope stops being fresh.
    pub expires_at: Millis,
}

/// One row of `HookProjectionChannels`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelRecord {
    /// Target.
    pub target_id: TargetId,
    /// Channel.
    pub channel: ChannelName,
    /// Watermark of the stored envelope.
    pub source_watermark: Watermark,
    /// The stored envelope text.
    pub envelope_json: String,
    /// Producer capture time.
    pub captured_at: Millis,
    /// Producer expiry time.
    pub expires_at: Millis,
    /// Broker time of the last change to this row.
    pub updated_at: Millis,
    /// `Some` while the channel is degraded.
    pub degraded_reason: Option<DegradedReason>,
}

impl ChannelRecord {
    /// The row a submission becomes when admitted at broker time `now`.
    pub fn from_submission(submission: &Submission, now: Millis) -> Self {
        ChannelRecord {
            target_id: submission.target_id.clone(),
            channel: submission.channel.clone(),
            source_watermark: submission.source_watermark.clone(),
            envelope_json: submission.envelope_json.clone(),
            captured_at: submission.captured_at,
            expires_at: submission.expires_at,
            updated_at: now,
            degraded_reason: None,
        }
    }

    /// True if `submission` carries exactly this row's watermark, envelope bytes and times.
    pub fn same_content(&self, submission: &Submission) -> bool {
        self.source_watermark == submission.source_watermark
            && self.envelope_json.as_bytes() == submission.envelope_json.as_bytes()
            && self.captured_at == submission.captured_at
            && self.expires_at == submission.expires_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, owner: &str) -> ChannelSpec {
        ChannelSpec {
            name: ChannelName::parse(name).unwrap(),
            owner: ProducerId::parse(owner).unwrap(),
            envelope_schema: format!("{name}.v1"),
            max_envelope_bytes: 1024,
            watermark: WatermarkKind::Integer,
            envelope_json_schema: None,
        }
    }

    #[test]
    fn registry_refuses_duplicates_and_zero_bounds() {
        assert_eq!(
            ChannelRegistry::new([spec("a", "p"), spec("a", "q")]).unwrap_err(),
            RegistryError::DuplicateChannel("a".into())
        );
        let mut zero = spec("a", "p");
        zero.max_envelope_bytes = 0;
        assert!(matches!(
            ChannelRegistry::new([zero]),
            Err(RegistryError::ZeroSizeBound(_))
        ));
        let reg = ChannelRegistry::new([spec("b", "p"), spec("a", "q")]).unwrap();
        let names: Vec<_> = reg.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }
}
