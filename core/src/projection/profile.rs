//! Profiles: what a store's documents, target ids and envelopes look like, for the hooks that
//! read them.
//!
//! A profile is a setting of the store (recorded in its schema marker, [`crate::projection::schema`]),
//! so every process writing or reading one store agrees on it:
//!
//! | profile | document | target id | envelope schema field |
//! |---|---|---|---|
//! | [`Profile::Generic`] (default) | `solewriter.hook-projection.v2` | 64 hex: SHA-256 of [`TargetTuple::canonical_bytes`] | `schema` |
//! | [`Profile::MemoryCore`] | `live-lane-awareness-projection.v1`, the Memory Core's hooks' format | 32 hex: the first 128 bits of SHA-256 of the NUL-joined `field=value` pairs | `schemaVersion` |
//!
//! Under the Memory Core profile every publication carries the hooks' consumer binding
//! ([`ConsumerBinding`]), as the Memory Core's own writer takes it with every publication: it
//! is not derivable from the tuple. A [`Composition`] is what a publication composes with: the
//! channel registry and, per profile, what the document needs beyond the stored rows.
//!
//! [`Composition`]: crate::projection::composition::Composition

use crate::projection::channel::{ChannelRegistry, RegistryError};
use crate::projection::document::{self, EpochPlace};
use crate::projection::memory_core;
pub use crate::projection::memory_core::{BindingError, ConsumerBinding, MAX_BINDING_BYTES};
use crate::projection::target::{TargetId, TargetTuple, FIELDS};
use crate::projection::watermark::value::WatermarkKind;
use sha2::{Digest, Sha256};

/// The Memory Core's document format (its documents' `schemaVersion`), and its profile's name.
pub const MEMORY_CORE_FORMAT: &str = memory_core::SCHEMA_VERSION;

/// A store's profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// solewriter's own document format, `solewriter.hook-projection.v2`.
    #[default]
    Generic,
    /// The Memory Core's document format, `live-lane-awareness-projection.v1`.
    MemoryCore,
}

/// A profile name that is not one of [`Profile::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile `{0}` (expected `solewriter.hook-projection.v2` or `live-lane-awareness-projection.v1`)")]
pub struct UnknownProfile(pub String);

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 2] = [Profile::Generic, Profile::MemoryCore];

    /// The profile's name: the format of its documents.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Generic => document::FORMAT,
            Profile::MemoryCore => MEMORY_CORE_FORMAT,
        }
    }

    /// The profile named `text`.
    pub fn parse(text: &str) -> Result<Self, UnknownProfile> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == text)
            .ok_or_else(|| UnknownProfile(text.to_owned()))
    }

    /// The envelope field a producer names its schema in.
    pub fn schema_field(self) -> &'static str {
        match self {
            Profile::Generic => "schema",
            Profile::MemoryCore => "schemaVersion",
        }
    }

    /// The length of the profile's target ids, in hex characters.
    pub fn target_id_len(self) -> usize {
        match self {
            Profile::Generic => 64,
            Profile::MemoryCore => 32,
        }
    }

    /// The target id of `tuple` under this profile.
    pub fn target_id(self, tuple: &TargetTuple) -> TargetId {
        match self {
            Profile::Generic => tuple.target_id(),
            Profile::MemoryCore => memory_core_target_id(tuple),
        }
    }

    /// Where the profile's documents name their format and carry their fencing epoch (the
    /// bounded read of the document in place, [`crate::projection::published_epoch`]).
    pub(crate) fn epoch_place(self) -> EpochPlace {
        match self {
            Profile::Generic => document::EPOCH_PLACE,
            Profile::MemoryCore => memory_core::EPOCH_PLACE,
        }
    }
}

impl ChannelRegistry {
    /// Refuses a registry whose watermark kinds a store of `profile` cannot publish: the
    /// generic profile's document carries integers only; the Memory Core's carries every kind
    /// (as text).
    pub fn check_profile(&self, profile: Profile) -> Result<(), RegistryError> {
        if profile == Profile::MemoryCore {
            return Ok(());
        }
        match self
            .iter()
            .find(|spec| spec.watermark != WatermarkKind::Integer)
        {
            Some(spec) => Err(RegistryError::KindOutsideProfile {
                channel: spec.name.to_string(),
                kind: spec.watermark,
                profile: profile.name(),
            }),
            None => Ok(()),
        }
    }
}

/// The Memory Core's target id (`deriveTargetId` in its `hookProjectionWriter.mjs`): the seven
/// fields in [`FIELDS`] order as `field=value`, joined by one NUL byte, SHA-256, the first 16
/// bytes as 32 lowercase hex characters. A field never contains NUL (a tuple refuses control
/// characters), so the joined text names one tuple only.
fn memory_core_target_id(tuple: &TargetTuple) -> TargetId {
    let pairs: Vec<String> = FIELDS
        .iter()
        .zip(tuple.values())
        .map(|(field, value)| format!("{field}={value}"))
        .collect();
    let digest = Sha256::digest(pairs.join("\0").as_bytes());
    TargetId::parse(&crate::hex::encode(&digest[..16]))
        .expect("32 lowercase hex characters are a target id")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::channel::{ChannelName, ChannelSpec, ProducerId};

    #[test]
    fn names_round_trip() {
        for p in Profile::ALL {
            assert_eq!(Profile::parse(p.name()), Ok(p));
        }
        assert!(Profile::parse("v2").is_err());
        assert_eq!(Profile::default(), Profile::Generic);
    }

    #[test]
    fn the_generic_profile_publishes_integer_watermarks_only() {
        let spec = |name: &str, owner: &str, watermark| ChannelSpec {
            name: ChannelName::parse(name).unwrap(),
            owner: ProducerId::parse(owner).unwrap(),
            envelope_schema: format!("{name}.v1"),
            max_envelope_bytes: 1024,
            watermark,
            envelope_json_schema: None,
        };
        let reg = ChannelRegistry::new([
            spec("a", "q", WatermarkKind::Integer),
            spec("b", "p", WatermarkKind::Instant),
        ])
        .unwrap();
        assert!(reg.check_profile(Profile::MemoryCore).is_ok());
        assert!(matches!(
            reg.check_profile(Profile::Generic),
            Err(RegistryError::KindOutsideProfile { channel, kind: WatermarkKind::Instant, .. }) if channel == "b"
        ));
        let integers = ChannelRegistry::new([spec("a", "q", WatermarkKind::Integer)]).unwrap();
        assert!(integers.check_profile(Profile::Generic).is_ok());
    }

    /// Printed by Node with the Memory Core writer's own `deriveTargetId` over docs/format.md's
    /// worked tuple.
    #[test]
    fn memory_core_target_id_matches_the_writer() {
        let tuple = TargetTuple::new([
            "1",
            "hook-projection",
            "agent-7",
            "claude-code",
            "inst-1",
            "ws-1",
            "live-lane",
        ])
        .unwrap();
        assert_eq!(
            Profile::MemoryCore.target_id(&tuple).as_str(),
            "ade4faf905981c8a3abe4c13ef31779f"
        );
        assert_eq!(Profile::Generic.target_id(&tuple), tuple.target_id());
    }

    #[test]
    fn bindings_are_objects_of_bounded_size() {
        let b = ConsumerBinding::from_json(" {\"status\":\"attested\"}\n").unwrap();
        assert_eq!(b.as_json().get(), "{\"status\":\"attested\"}");
        for bad in ["[]", "null", "\"x\"", "{", ""] {
            assert!(matches!(
                ConsumerBinding::from_json(bad),
                Err(BindingError::NotAnObject(_))
            ));
        }
        let big = format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_BINDING_BYTES));
        assert!(matches!(
            ConsumerBinding::from_json(&big),
            Err(BindingError::TooLarge(_))
        ));
    }
}
