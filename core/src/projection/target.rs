//! The attested target tuple and the server-derived [`TargetId`].
//!
//! A target is named by exactly seven attested fields. There is no session id and no path
//! among them, and an input carrying any other field is refused, so neither a session nor a
//! producer can steer which file is written. The id is the lowercase hex SHA-256 of the
//! canonical encoding documented on [`TargetTuple::canonical_bytes`].

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Upper bound of one attested field, in bytes.
pub const MAX_FIELD_BYTES: usize = 256;
/// Upper bound of an attested tuple document, in bytes.
pub const MAX_TUPLE_JSON_BYTES: usize = 4096;
/// Domain-separation prefix of the canonical encoding.
pub const CANONICAL_PREFIX: &str = "solewriter.target.v1\n";

/// The seven attested field names, in canonical order.
pub const FIELDS: [&str; 7] = [
    "schemaVersion",
    "capability",
    "agentId",
    "harnessType",
    "instanceKeyDigest",
    "workspaceKeyDigest",
    "projectionKind",
];

/// Why an attested tuple or a target id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The tuple names a field outside the seven attested ones (a session id, a path, …).
    #[error(
        "attested tuple has unknown field `{0}` (only the seven attested fields are accepted)"
    )]
    UnknownField(String),
    /// One of the seven fields is absent.
    #[error("attested tuple is missing `{0}`")]
    MissingField(&'static str),
    /// A field is not a non-empty string of printable characters within the size bound.
    #[error("attested field `{field}` is invalid: {reason}")]
    InvalidField {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The input is not a JSON object or is too large.
    #[error("attested tuple is malformed: {0}")]
    Malformed(String),
    /// A target id is not exactly 32 or 64 lowercase hex characters.
    #[error("target id must be 32 or 64 lowercase hex characters")]
    InvalidTargetId,
}

/// The attested tuple that names a projection target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetTuple {
    schema_version: String,
    capability: String,
    agent_id: String,
    harness_type: String,
    instance_key_digest: String,
    workspace_key_digest: String,
    projection_kind: String,
}

fn check_field(field: &'static str, value: &str) -> Result<(), TargetError> {
    let invalid = |reason| TargetError::InvalidField { field, reason };
    if value.is_empty() {
        return Err(invalid("empty"));
    }
    if value.len() > MAX_FIELD_BYTES {
        return Err(invalid("longer than 256 bytes"));
    }
    if value.chars().any(char::is_control) {
        return Err(invalid("contains a control character"));
    }
    Ok(())
}

impl TargetTuple {
    /// Builds a tuple from the seven attested values, in canonical order.
    pub fn new(values: [&str; 7]) -> Result<Self, TargetError> {
        for (field, value) in FIELDS.iter().zip(values.iter()) {
            check_field(field, value)?;
        }
        let [schema_version, capability, agent_id, harness_type, instance_key_digest, workspace_key_digest, projection_kind] =
            values.map(str::to_owned);
        Ok(TargetTuple {
            schema_version,
            capability,
            agent_id,
            harness_type,
            instance_key_digest,
            workspace_key_digest,
            projection_kind,
        })
    }

    /// Parses the attested tuple from a JSON object with exactly the seven camelCase fields.
    /// Any other field (`sessionId`, `path`, …) is refused with [`TargetError::UnknownField`].
    pub fn from_json(text: &str) -> Result<Self, TargetError> {
        if text.len() > MAX_TUPLE_JSON_BYTES {
            return Err(TargetError::Malformed(format!(
                "{} bytes exceeds the {MAX_TUPLE_JSON_BYTES}-byte bound",
                text.len()
            )));
        }
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| TargetError::Malformed(e.to_string()))?;
        if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(TargetError::UnknownField(unknown.clone()));
        }
        let mut values = [""; 7];
        for (slot, field) in values.iter_mut().zip(FIELDS) {
            *slot = match map.get(field) {
                None => return Err(TargetError::MissingField(field)),
                Some(serde_json::Value::String(s)) => s.as_str(),
                Some(_) => {
                    return Err(TargetError::InvalidField {
                        field,
                        reason: "not a string",
                    })
                }
            };
        }
        Self::new(values)
    }

    pub(crate) fn values(&self) -> [&str; 7] {
        [
            &self.schema_version,
            &self.capability,
            &self.agent_id,
            &self.harness_type,
            &self.instance_key_digest,
            &self.workspace_key_digest,
            &self.projection_kind,
        ]
    }

    /// The canonical encoding hashed into the target id:
    /// the ASCII prefix `solewriter.target.v1\n`, then for each field in the order of
    /// [`FIELDS`]: the field name, `=`, the value's UTF-8 byte length in decimal, `:`, the
    /// value's UTF-8 bytes, and `\n`.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = CANONICAL_PREFIX.as_bytes().to_vec();
        for (field, value) in FIELDS.iter().zip(self.values()) {
            out.extend_from_slice(format!("{field}={}:", value.len()).as_bytes());
            out.extend_from_slice(value.as_bytes());
            out.push(b'\n');
        }
        out
    }

    /// The server-derived target id: lowercase hex SHA-256 of [`Self::canonical_bytes`].
    pub fn target_id(&self) -> TargetId {
        TargetId(crate::hex::encode(&Sha256::digest(self.canonical_bytes())))
    }
}

/// Refuses anything but 32 or 64 lowercase hex characters (the length a store accepts is its
/// profile's, [`crate::projection::profile::Profile::target_id_len`]).
fn check_target_id(text: &str) -> Result<(), TargetError> {
    let ok = (text.len() == 64 || text.len() == 32)
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(TargetError::InvalidTargetId)
    }
}

crate::names::validated_text!(
    /// A target id: exactly 32 or 64 lowercase hex characters, so a path built from it cannot
    /// escape its directory.
    TargetId,
    TargetError,
    check_target_id
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked vector documented in docs/format.md.
    pub const VECTOR_JSON: &str = r#"{"schemaVersion":"1","capability":"hook-projection","agentId":"agent-7","harnessType":"claude-code","instanceKeyDigest":"inst-1","workspaceKeyDigest":"ws-1","projectionKind":"live-lane"}"#;
    pub const VECTOR_ID: &str = "29a47a1e0854db43f7fb283e889c03c45ccfaf73f15385d8c69120edad6cb06a";

    #[test]
    fn documented_vector() {
        let tuple = TargetTuple::from_json(VECTOR_JSON).unwrap();
        let canonical = String::from_utf8(tuple.canonical_bytes()).unwrap();
        assert_eq!(
            canonical,
            "solewriter.target.v1\nschemaVersion=1:1\ncapability=15:hook-projection\nagentId=7:agent-7\nharnessType=11:claude-code\ninstanceKeyDigest=6:inst-1\nworkspaceKeyDigest=4:ws-1\nprojectionKind=9:live-lane\n"
        );
        assert_eq!(tuple.target_id().as_str(), VECTOR_ID);
    }

    #[test]
    fn session_id_and_paths_are_refused() {
        for extra in ["sessionId", "path", "outputPath"] {
            let json = VECTOR_JSON.replace('}', &format!(r#","{extra}":"x"}}"#));
            assert_eq!(
                TargetTuple::from_json(&json).unwrap_err(),
                TargetError::UnknownField(extra.to_owned())
            );
        }
    }

    #[test]
    fn missing_and_invalid_fields_are_refused() {
        let json = VECTOR_JSON.replace(r#""agentId":"agent-7","#, "");
        assert_eq!(
            TargetTuple::from_json(&json).unwrap_err(),
            TargetError::MissingField("agentId")
        );
        let json = VECTOR_JSON.replace(r#""agent-7""#, "7");
        assert!(matches!(
            TargetTuple::from_json(&json),
            Err(TargetError::InvalidField {
                field: "agentId",
                ..
            })
        ));
        let json = VECTOR_JSON.replace("agent-7", "");
        assert!(matches!(
            TargetTuple::from_json(&json),
            Err(TargetError::InvalidField {
                field: "agentId",
                ..
            })
        ));
        assert!(matches!(
            TargetTuple::from_json("[1]"),
            Err(TargetError::Malformed(_))
        ));
        let huge = format!("{{\"agentId\":\"{}\"}}", "a".repeat(5000));
        assert!(matches!(
            TargetTuple::from_json(&huge),
            Err(TargetError::Malformed(_))
        ));
    }

    #[test]
    fn every_field_changes_the_id_and_lengths_prevent_ambiguity() {
        let base = ["1", "c", "a", "h", "i", "w", "p"];
        let id = TargetTuple::new(base).unwrap().target_id();
        for i in 0..7 {
            let mut v = base;
            v[i] = "z";
            assert_ne!(TargetTuple::new(v).unwrap().target_id(), id, "field {i}");
        }
        // Moving a byte between adjacent fields changes the encoding.
        let a = TargetTuple::new(["1", "ab", "c", "h", "i", "w", "p"]).unwrap();
        let b = TargetTuple::new(["1", "a", "bc", "h", "i", "w", "p"]).unwrap();
        assert_ne!(a.target_id(), b.target_id());
    }

    #[test]
    fn target_id_parses_only_lowercase_hex_of_length_32_or_64() {
        assert!(TargetId::parse(VECTOR_ID).is_ok());
        assert!(TargetId::parse(&VECTOR_ID[..32]).is_ok());
        for bad in [
            "../x",
            &VECTOR_ID.to_uppercase(),
            &VECTOR_ID[..63],
            &VECTOR_ID[..31],
            &VECTOR_ID[..33],
            &format!("{VECTOR_ID}0"),
            &format!("../{}", &VECTOR_ID[3..]),
            "",
            &VECTOR_ID.replacen('5', "/", 1),
        ] {
            assert_eq!(
                TargetId::parse(bad),
                Err(TargetError::InvalidTargetId),
                "{bad}"
            );
        }
        assert!(serde_json::from_str::<TargetId>("\"../x\"").is_err());
    }

    #[test]
    fn size_bounds_are_exact() {
        let at_bound = "a".repeat(MAX_FIELD_BYTES);
        let mut values = ["1", "c", "a", "h", "i", "w", "p"];
        values[2] = &at_bound;
        assert!(TargetTuple::new(values).is_ok());
        let over = "a".repeat(MAX_FIELD_BYTES + 1);
        values[2] = &over;
        assert!(matches!(
            TargetTuple::new(values),
            Err(TargetError::InvalidField {
                field: "agentId",
                ..
            })
        ));
        let padded = format!("{VECTOR_JSON:<MAX_TUPLE_JSON_BYTES$}");
        assert_eq!(padded.len(), MAX_TUPLE_JSON_BYTES);
        assert!(TargetTuple::from_json(&padded).is_ok());
        let over = format!("{padded} ");
        assert!(matches!(
            TargetTuple::from_json(&over),
            Err(TargetError::Malformed(_))
        ));
    }

    #[test]
    fn target_id_displays_as_its_hex() {
        assert_eq!(TargetId::parse(VECTOR_ID).unwrap().to_string(), VECTOR_ID);
    }
}
