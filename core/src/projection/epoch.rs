//! The fencing epoch of the document in place, read from its first [`EPOCH_PREFIX_BYTES`]
//! bytes only.
//!
//! A grant numbers past the document in place, and a publication refuses to rename over a
//! document of its own epoch or a later one; both read it under the store's write lock, so
//! the read is bounded: every document solewriter publishes (and every document of the Memory
//! Core's own writer) names its format and then its epoch before any content, within its first
//! few hundred bytes. The prefix is read key by key and the reading stops at the epoch; a
//! document whose format or epoch is not within the prefix has no epoch here (a foreign file,
//! which fences nothing and is numbered past by nothing).

use crate::projection::document::EpochPlace;
use crate::projection::profile::Profile;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::cell::Cell;

/// How much of `current.json` a grant or a publication reads to learn its epoch: its format
/// marker and epoch come first, so 4 KiB holds them with room to spare (a target id of 64
/// characters, a format name, the epoch).
pub const EPOCH_PREFIX_BYTES: usize = 4096;

/// The fencing epoch of the document whose first bytes are `bytes` (only the first
/// [`EPOCH_PREFIX_BYTES`] are looked at), in the format of any [`Profile`]: the document names
/// the profile's format under its marker key first, then carries its epoch where that format
/// does (the profile's table: solewriter's own format, `format` is
/// [`crate::projection::FORMAT`], then a top-level `fencingEpoch`, an unsigned integer; the
/// Memory Core's, `schemaVersion` is its format, then `publication.fencingEpoch`, an integer
/// from 1 to 2^53 − 1 as its full read takes it). `None` for anything else.
pub fn published_epoch(bytes: &[u8]) -> Option<u64> {
    let prefix = &bytes[..bytes.len().min(EPOCH_PREFIX_BYTES)];
    let found = Cell::new(None);
    let mut de = serde_json::Deserializer::from_slice(prefix);
    // The reading stops with an error once the epoch is found (or the prefix ends): what
    // counts is what was found before it.
    let _ = de::Deserializer::deserialize_map(
        &mut de,
        Document {
            found: &found,
            place: Cell::new(None),
        },
    );
    found.get()
}

/// The top-level object.
struct Document<'c> {
    found: &'c Cell<Option<u64>>,
    /// Where the epoch is, once the document has named its format.
    place: Cell<Option<EpochPlace>>,
}

/// The reading ends here (the epoch was found, or the document is not one of ours).
fn stop<E: de::Error>() -> E {
    E::custom("stop")
}

impl<'de> Visitor<'de> for Document<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a projection document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match self.place.get() {
                None => match Profile::ALL
                    .into_iter()
                    .find(|p| p.epoch_place().marker == key)
                {
                    Some(profile) => {
                        let name: std::borrow::Cow<'de, str> = map.next_value()?;
                        if name != profile.name() {
                            return Err(stop());
                        }
                        self.place.set(Some(profile.epoch_place()));
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
                Some(place) => match place.within {
                    None if key == "fencingEpoch" => {
                        let number: serde_json::Number = map.next_value()?;
                        self.found.set((place.epoch)(&number));
                        return Err(stop());
                    }
                    Some(object) if key == object => {
                        return map.next_value_seed(Within(self.found, place));
                    }
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
            }
        }
        Ok(())
    }
}

/// The object of the document that holds its `fencingEpoch` (the Memory Core's
/// `publication`).
struct Within<'c>(&'c Cell<Option<u64>>, EpochPlace);

impl<'de> DeserializeSeed<'de> for Within<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Within<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the object holding the fencing epoch")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "fencingEpoch" {
                let number: serde_json::Number = map.next_value()?;
                self.0.set((self.1.epoch)(&number));
                return Err(stop());
            }
            map.next_value::<IgnoredAny>()?;
        }
        Err(stop())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::channel::ChannelRegistry;
    use crate::projection::document::FORMAT;
    use crate::projection::draft::Draft;
    use crate::projection::memory_core;
    use crate::projection::target::TargetId;
    use crate::time::Millis;

    fn target() -> TargetId {
        TargetId::parse(&"ab".repeat(32)).unwrap()
    }

    #[test]
    fn the_epoch_of_a_composed_document_is_within_the_prefix() {
        let registry = ChannelRegistry::new(Vec::new()).unwrap();
        for epoch in [1, 7, u64::from(u32::MAX), crate::STORAGE_INTEGER_MAX] {
            let draft = Draft::compose(&target(), epoch, &registry, Vec::new(), Millis(5)).unwrap();
            assert_eq!(published_epoch(draft.bytes()), Some(epoch));
            let position = draft
                .bytes()
                .windows(14)
                .position(|w| w == b"\"fencingEpoch\"")
                .unwrap();
            assert!(position < 256, "{position}");
        }
    }

    #[test]
    fn only_the_prefix_is_read() {
        // A document whose tail is huge or broken: the epoch comes from its head.
        let head = format!(
            r#"{{"format":"{FORMAT}","targetId":"{}","fencingEpoch":9,"publishedAt":1,"channels":["#,
            target()
        );
        let mut bytes = head.into_bytes();
        bytes.extend(std::iter::repeat_n(b'[', 60 << 20));
        assert_eq!(published_epoch(&bytes), Some(9));
        // The epoch past the prefix is not looked for.
        let mut late = format!(r#"{{"format":"{FORMAT}","pad":""#).into_bytes();
        late.extend(std::iter::repeat_n(b'x', EPOCH_PREFIX_BYTES));
        late.extend(br#"","fencingEpoch":9}"#);
        assert_eq!(published_epoch(&late), None);
    }

    #[test]
    fn the_memory_core_epoch_is_read_from_its_publication() {
        let doc = |epoch: &str| {
            format!(
                r#"{{"schemaVersion":"{}","publication":{{"targetId":"t","fencingEpoch":{epoch},"generatedAt":1}},"notAuthority":true}}"#,
                memory_core::SCHEMA_VERSION
            )
        };
        assert_eq!(published_epoch(doc("4").as_bytes()), Some(4));
        assert_eq!(published_epoch(doc("3.0").as_bytes()), Some(3));
        assert_eq!(published_epoch(doc("0").as_bytes()), None);
        assert_eq!(published_epoch(doc("9007199254740992").as_bytes()), None);
        assert_eq!(published_epoch(doc("\"4\"").as_bytes()), None);
    }

    #[test]
    fn foreign_files_have_no_epoch() {
        for foreign in [
            &b"not json"[..],
            b"{\"fencingEpoch\": 99}",
            b"{\"format\":\"other\",\"fencingEpoch\":99}",
            b"{\"fencingEpoch\":99,\"format\":\"solewriter.hook-projection.v2\"}",
            b"[1,2]",
            b"",
            b"\xff",
        ] {
            assert_eq!(published_epoch(foreign), None, "{foreign:?}");
        }
        let own = format!(r#"{{"format":"{FORMAT}","fencingEpoch":-1}}"#);
        assert_eq!(published_epoch(own.as_bytes()), None);
    }
}
