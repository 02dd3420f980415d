//! Parsing of Bridge frames: the `agent_message` envelope that carries the writer context, the
//! context-less legacy frame, and the `agent_disconnected` frame that triggers the sweep.
//!
//! The Bridge stamps `{type: "agent_message", agentId, sessionId, message}` on every frame of an
//! authenticated agent, so a frame without the envelope is genuinely non-agent (legacy, context
//! `None`). An envelope that is present but malformed is an error, never legacy: a frame that
//! carries `agentId` or `sessionId` without the `agent_message` type, a non-string id, a missing
//! or non-object `message`, or an unknown `type` are all refused. Ids that are merely absent or
//! empty are kept as an incomplete context, which write admission denies.

use super::lock::Writer;
use serde_json::{Map, Value};

/// Largest Bridge frame accepted, in bytes.
pub const MAX_FRAME_BYTES: usize = 1 << 20;
/// `type` of a frame that carries an agent's JSON-RPC message.
pub const AGENT_MESSAGE: &str = "agent_message";
/// `type` of a frame that reports a dropped agent connection.
pub const AGENT_DISCONNECTED: &str = "agent_disconnected";

/// Why a Bridge frame was refused. A refused frame reaches no service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The frame is larger than [`MAX_FRAME_BYTES`].
    #[error("frame of {size} bytes exceeds the bound of {MAX_FRAME_BYTES} bytes")]
    TooLarge {
        /// Frame size.
        size: usize,
    },
    /// The frame is not a JSON object.
    #[error("frame is not a JSON object: {0}")]
    NotAnObject(String),
    /// The envelope is present but malformed.
    #[error("agent envelope is malformed: {0}")]
    Malformed(&'static str),
    /// The frame's `type` is not one this parser knows.
    #[error("frame type `{0}` is not an agent message")]
    UnexpectedType(String),
}

/// The writer context an envelope stamped on a message. Either id may be missing (a
/// half-stamped envelope); [`Writer::new`] decides whether the pair is a writer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentContext {
    /// The stamped agent id, if any.
    pub agent_id: Option<String>,
    /// The stamped session id, if any.
    pub session_id: Option<String>,
}

impl AgentContext {
    /// The writer of this context; `None` when it is half-stamped.
    pub fn writer(&self) -> Option<Writer> {
        Writer::new(self.agent_id.as_deref(), self.session_id.as_deref())
    }
}

/// A JSON-RPC message with the context it arrived in.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// The JSON-RPC message (a JSON object).
    pub message: Value,
    /// The writer context; `None` for a legacy (non-agent) frame.
    pub context: Option<AgentContext>,
}

/// A parsed Bridge frame.
#[derive(Clone, Debug, PartialEq)]
pub enum BridgeFrame {
    /// A JSON-RPC message, with or without an agent context.
    Message(Envelope),
    /// An agent connection dropped: sweep this writer's locks.
    Disconnected(Writer),
}

/// Reads an optional string field: absent or `null` is `None`, a string is kept, anything else
/// is malformed.
fn optional_id(
    object: &Map<String, Value>,
    key: &str,
    malformed: &'static str,
) -> Result<Option<String>, EnvelopeError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(EnvelopeError::Malformed(malformed)),
    }
}

/// Parses one Bridge frame.
pub fn parse_bridge_frame(frame: &str) -> Result<BridgeFrame, EnvelopeError> {
    if frame.len() > MAX_FRAME_BYTES {
        return Err(EnvelopeError::TooLarge { size: frame.len() });
    }
    let value: Value =
        serde_json::from_str(frame).map_err(|e| EnvelopeError::NotAnObject(e.to_string()))?;
    let Value::Object(mut object) = value else {
        return Err(EnvelopeError::NotAnObject("not an object".into()));
    };
    let context = AgentContext {
        agent_id: optional_id(&object, "agentId", "agentId is not a string")?,
        session_id: optional_id(&object, "sessionId", "sessionId is not a string")?,
    };
    match object.get("type") {
        None => {
            if object.contains_key("agentId") || object.contains_key("sessionId") {
                return Err(EnvelopeError::Malformed(
                    "agentId or sessionId without type agent_message",
                ));
            }
            Ok(BridgeFrame::Message(Envelope {
                message: Value::Object(object),
                context: None,
            }))
        }
        Some(Value::String(kind)) if kind == AGENT_MESSAGE => match object.remove("message") {
            Some(message @ Value::Object(_)) => Ok(BridgeFrame::Message(Envelope {
                message,
                context: Some(context),
            })),
            _ => Err(EnvelopeError::Malformed(
                "message is missing or not an object",
            )),
        },
        Some(Value::String(kind)) if kind == AGENT_DISCONNECTED => context
            .writer()
            .map(BridgeFrame::Disconnected)
            .ok_or(EnvelopeError::Malformed(
                "agent_disconnected must carry both agentId and sessionId",
            )),
        Some(Value::String(kind)) => Err(EnvelopeError::UnexpectedType(kind.clone())),
        Some(_) => Err(EnvelopeError::Malformed("type is not a string")),
    }
}

/// Parses a frame that must carry a JSON-RPC message: the message plus its context (`None` for
/// legacy). An `agent_disconnected` frame is refused here; route it with
/// [`parse_bridge_frame`].
pub fn parse_agent_envelope(frame: &str) -> Result<Envelope, EnvelopeError> {
    match parse_bridge_frame(frame)? {
        BridgeFrame::Message(envelope) => Ok(envelope),
        BridgeFrame::Disconnected(_) => {
            Err(EnvelopeError::UnexpectedType(AGENT_DISCONNECTED.into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RPC: &str = r#"{"jsonrpc":"2.0","id":1,"method":"set_instance_properties"}"#;

    #[test]
    fn agent_message_gives_message_and_context() {
        let frame =
            format!(r#"{{"type":"agent_message","agentId":"a","sessionId":"s","message":{RPC}}}"#);
        let envelope = parse_agent_envelope(&frame).unwrap();
        assert_eq!(envelope.message["method"], json!("set_instance_properties"));
        let context = envelope.context.unwrap();
        assert_eq!(context.writer(), Writer::new(Some("a"), Some("s")));
    }

    #[test]
    fn frame_without_envelope_is_legacy() {
        let envelope = parse_agent_envelope(RPC).unwrap();
        assert_eq!(envelope.context, None);
        assert_eq!(envelope.message["id"], json!(1));
    }

    #[test]
    fn half_stamped_envelope_keeps_an_incomplete_context_not_legacy() {
        let frame = format!(r#"{{"type":"agent_message","agentId":"a","message":{RPC}}}"#);
        let context = parse_agent_envelope(&frame).unwrap().context.unwrap();
        assert_eq!(context.agent_id.as_deref(), Some("a"));
        assert_eq!(context.writer(), None);
    }

    #[test]
    fn malformed_envelope_is_refused_never_legacy() {
        let frames = [
            format!(r#"{{"type":"agent_message","agentId":7,"sessionId":"s","message":{RPC}}}"#),
            format!(r#"{{"type":"agent_message","agentId":"a","sessionId":{{}},"message":{RPC}}}"#),
            r#"{"type":"agent_message","agentId":"a","sessionId":"s"}"#.to_owned(),
            r#"{"type":"agent_message","agentId":"a","sessionId":"s","message":"x"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","agentId":"a","sessionId":"s","method":"m"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","sessionId":"s","method":"m"}"#.to_owned(),
            r#"{"type":3,"message":{}}"#.to_owned(),
        ];
        for frame in frames {
            assert!(
                matches!(
                    parse_agent_envelope(&frame),
                    Err(EnvelopeError::Malformed(_))
                ),
                "{frame}"
            );
        }
        assert_eq!(
            parse_agent_envelope(r#"{"type":"agent_mesage","message":{}}"#),
            Err(EnvelopeError::UnexpectedType("agent_mesage".into()))
        );
        assert!(matches!(
            parse_agent_envelope("[1]"),
            Err(EnvelopeError::NotAnObject(_))
        ));
        assert!(matches!(
            parse_agent_envelope("{"),
            Err(EnvelopeError::NotAnObject(_))
        ));
    }

    #[test]
    fn oversized_frame_is_refused_before_parsing() {
        let frame = format!(r#"{{"pad":"{}"}}"#, "x".repeat(MAX_FRAME_BYTES));
        assert_eq!(
            parse_agent_envelope(&frame),
            Err(EnvelopeError::TooLarge { size: frame.len() })
        );
        let fits = format!(r#"{{"pad":"{}"}}"#, "x".repeat(MAX_FRAME_BYTES - 10));
        assert!(parse_agent_envelope(&fits).is_ok());
    }

    #[test]
    fn disconnect_frame_needs_the_session_id() {
        let frame = r#"{"type":"agent_disconnected","agentId":"a","sessionId":"s"}"#;
        assert_eq!(
            parse_bridge_frame(frame),
            Ok(BridgeFrame::Disconnected(
                Writer::new(Some("a"), Some("s")).unwrap()
            ))
        );
        assert!(matches!(
            parse_bridge_frame(r#"{"type":"agent_disconnected","agentId":"a"}"#),
            Err(EnvelopeError::Malformed(_))
        ));
        assert_eq!(
            parse_agent_envelope(frame),
            Err(EnvelopeError::UnexpectedType(AGENT_DISCONNECTED.into()))
        );
    }
}
