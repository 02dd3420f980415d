//! A channel's envelope JSON Schema: given as JSON in the host's configuration, compiled once
//! when the registry is built, applied to every submission of the channel.
//!
//! The validator is boon (JSON Schema drafts 4 to 2020-12; a schema without `$schema` is read
//! as 2020-12). A schema must be self-contained: its loader refuses every URL, so compiling
//! and validating read no file and no network — a `$ref` outside the schema is a
//! configuration error, not a fetch. The drafts' own metaschemas are built into boon.

use boon::{Compiler, Draft, SchemaIndex, Schemas, UrlLoader};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// The identifier each channel's schema is compiled under.
const LOCATION: &str = "urn:solewriter:envelope-schema";

/// The loader of a self-contained schema: it loads nothing.
struct NoLoader;

impl UrlLoader for NoLoader {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(
            format!("{url} is outside the schema; an envelope schema must be self-contained")
                .into(),
        )
    }
}

/// A compiled envelope schema, and the JSON it was compiled from (what it is compared,
/// printed and serialized as).
#[derive(Clone)]
pub struct EnvelopeSchema {
    source: Value,
    compiled: Arc<(Schemas, SchemaIndex)>,
}

impl EnvelopeSchema {
    /// Compiles `source`; an invalid or not self-contained schema is refused with boon's
    /// reason.
    pub fn compile(source: Value) -> Result<Self, String> {
        let mut compiler = Compiler::new();
        compiler.set_default_draft(Draft::V2020_12);
        compiler.use_loader(Box::new(NoLoader));
        compiler
            .add_resource(LOCATION, source.clone())
            .map_err(|e| one_line(&format!("{e:#}")))?;
        let mut schemas = Schemas::new();
        let index = compiler
            .compile(LOCATION, &mut schemas)
            .map_err(|e| one_line(&format!("{e:#}")))?;
        Ok(EnvelopeSchema {
            source,
            compiled: Arc::new((schemas, index)),
        })
    }

    /// Validates `envelope`; a violation is refused with the validator's reasons on one line.
    pub fn validate(&self, envelope: &Value) -> Result<(), String> {
        let (schemas, index) = &*self.compiled;
        schemas
            .validate(envelope, *index)
            .map_err(|e| one_line(&e.to_string()))
    }

    /// The schema as configured.
    pub fn source(&self) -> &Value {
        &self.source
    }
}

/// boon's multi-line reasons as one line (`; `-joined, trimmed).
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

impl PartialEq for EnvelopeSchema {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for EnvelopeSchema {}

impl std::fmt::Debug for EnvelopeSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EnvelopeSchema").field(&self.source).finish()
    }
}

impl Serialize for EnvelopeSchema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.source.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EnvelopeSchema {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = Value::deserialize(deserializer)?;
        EnvelopeSchema::compile(source)
            .map_err(|e| serde::de::Error::custom(format!("envelope JSON Schema: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn route_schema() -> EnvelopeSchema {
        EnvelopeSchema::compile(json!({
            "type": "object",
            "required": ["schemaVersion", "route"],
            "properties": {
                "route": {
                    "type": "object",
                    "required": ["items"],
                    "properties": {"items": {"type": "array", "items": {"type": "string"}}}
                }
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_violation_names_where_and_why_on_one_line() {
        let schema = route_schema();
        assert!(schema
            .validate(&json!({"schemaVersion": "x", "route": {"items": ["a"]}}))
            .is_ok());
        let why = schema
            .validate(&json!({"schemaVersion": "x", "route": {"items": [1]}}))
            .unwrap_err();
        assert!(why.contains("/route/items/0"), "{why}");
        assert!(!why.contains('\n'), "{why}");
        let why = schema.validate(&json!({"schemaVersion": "x"})).unwrap_err();
        assert!(why.contains("missing properties 'route'"), "{why}");
    }

    #[test]
    fn a_schema_is_self_contained_and_valid() {
        let remote = EnvelopeSchema::compile(json!({"$ref": "https://example.com/s.json"}));
        assert!(remote.unwrap_err().contains("self-contained"));
        let file = EnvelopeSchema::compile(json!({"$ref": "file:///etc/passwd"}));
        assert!(file.unwrap_err().contains("self-contained"));
        assert!(EnvelopeSchema::compile(json!({"type": 5})).is_err());
        // Local references resolve.
        let local = EnvelopeSchema::compile(json!({
            "$defs": {"n": {"type": "integer"}},
            "properties": {"n": {"$ref": "#/$defs/n"}}
        }))
        .unwrap();
        assert!(local.validate(&json!({"n": 1})).is_ok());
        assert!(local.validate(&json!({"n": "1"})).is_err());
    }

    #[test]
    fn it_reads_and_prints_as_its_json() {
        let schema: EnvelopeSchema = serde_json::from_str(r#"{"type":"object"}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&schema).unwrap(),
            r#"{"type":"object"}"#
        );
        assert_eq!(
            schema,
            EnvelopeSchema::compile(json!({"type": "object"})).unwrap()
        );
        let bad = serde_json::from_str::<EnvelopeSchema>(r#"{"type":5}"#).unwrap_err();
        assert!(bad.to_string().contains("envelope JSON Schema"), "{bad}");
    }
}
