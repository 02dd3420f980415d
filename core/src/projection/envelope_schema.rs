//! A channel's envelope JSON Schema: given as JSON in the host's configuration, compiled once
//! when the registry is built, applied to every submission of the channel.
//!
//! The validator is boon (JSON Schema drafts 4 to 2020-12; a schema without `$schema` is read
//! as 2020-12). A schema must be self-contained: its loader refuses every URL, so compiling
//! and validating read no file and no network — a `$ref` outside the schema is a
//! configuration error, not a fetch. The drafts' own metaschemas are built into boon.
//!
//! A `pattern` whose regex the regex crate will not build (one beyond its size limit, e.g.
//! `a{1000}{1000}`) is refused before boon sees the schema: boon takes that failure for a bug of
//! its own and panics on it in a build with debug assertions.

use boon::{CompileError, Compiler, Draft, SchemaIndex, Schemas, UrlLoader};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
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
    /// Compiles `source`; an invalid or not self-contained schema, or one with a `pattern` the
    /// regex crate will not build, is refused with the reason.
    pub fn compile(source: Value) -> Result<Self, String> {
        refuse_unbuildable_patterns(&source)?;
        let (schemas, index) = compiled(source.clone()).map_err(|e| one_line(&format!("{e:#}")))?;
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

/// `source` compiled as a self-contained schema (2020-12 unless it says otherwise).
fn compiled(source: Value) -> Result<(Schemas, SchemaIndex), Box<CompileError>> {
    let mut compiler = Compiler::new();
    compiler.set_default_draft(Draft::V2020_12);
    compiler.use_loader(Box::new(NoLoader));
    compiler.add_resource(LOCATION, source)?;
    let mut schemas = Schemas::new();
    let index = compiler.compile(LOCATION, &mut schemas)?;
    Ok((schemas, index))
}

/// Refuses a string named `pattern` anywhere in `source` (a `$ref` reaches any location) that
/// boon would convert from ECMA 262 but the regex crate will not build. Each is tried as the key
/// of a `patternProperties`, which boon converts and builds the same way as a `pattern` but
/// whose failure it answers as an invalid regex instead of panicking; any other failure of the
/// trial is left to the compilation of the schema itself.
fn refuse_unbuildable_patterns(source: &Value) -> Result<(), String> {
    let mut pending = vec![source];
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(members) => {
                if let Some(Value::String(pattern)) = members.get("pattern") {
                    let trial = json!({ "patternProperties": { pattern.as_str(): true } });
                    if let Err(CompileError::InvalidRegex { src, .. }) =
                        compiled(trial).map_err(|e| *e)
                    {
                        return Err(one_line(&format!(
                            "pattern `{pattern}` cannot be built: {src}"
                        )));
                    }
                }
                pending.extend(members.values());
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    Ok(())
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
    fn a_pattern_the_regex_crate_will_not_build_is_refused_not_a_panic() {
        // Beyond the regex crate's size limit: boon's own compilation panics on it (debug).
        for schema in [
            json!({"type": "string", "pattern": "a{1000}{1000}"}),
            json!({"$defs": {"big": {"pattern": "a{1000}{1000}"}}, "properties": {"x": {"$ref": "#/$defs/big"}}}),
            // An ECMA control escape, which boon converts before building.
            json!({"items": [{"pattern": "\\cA{1000}{1000}"}]}),
        ] {
            let why = EnvelopeSchema::compile(schema.clone()).unwrap_err();
            assert!(
                why.contains("cannot be built") && why.contains("size limit"),
                "{schema}: {why}"
            );
            assert!(!why.contains('\n'), "{why}");
        }
        // A pattern boon converts to something smaller than it reads is built as boon builds it.
        let word = EnvelopeSchema::compile(json!({"pattern": "^\\w{1000}$"})).unwrap();
        assert!(word.validate(&json!("a".repeat(1000))).is_ok());
        // An invalid regex is refused by boon itself, as before.
        let why = EnvelopeSchema::compile(json!({"pattern": "("})).unwrap_err();
        assert!(!why.contains("cannot be built"), "{why}");
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
