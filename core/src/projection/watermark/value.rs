//! Watermarks as producers emit them, and the order of each kind.
//!
//! A channel declares the kind of watermark its producer emits ([`WatermarkKind`], in the
//! registry; `integer` when not declared). A [`Watermark`] is what a producer submitted and the
//! store keeps: an integer, or text kept byte for byte (so the published watermark is exactly
//! the one the producer stamped its envelope with). Admission orders two watermarks by their
//! channel's kind ([`WatermarkKind::key`]), never by their text:
//!
//! | kind               | accepted text                                  | order                  |
//! |--------------------|------------------------------------------------|------------------------|
//! | `integer`          | a JSON integer 0 ..= 2^53 − 1                  | numeric                |
//! | `instant`          | `YYYY-MM-DDTHH:MM:SS.sssZ` (`toISOString()`)   | by instant             |
//! | `instant-sequence` | that instant, `:`, a decimal 0 ..= 2^53 − 1 without leading zeros | by instant, then numerically by the sequence |
//! | `text`             | 1 ..= 256 bytes without control characters    | byte order (declared, never assumed) |
//!
//! `instant-sequence` is what the Memory Core's route producer emits
//! (`${capturedAt}:${n}`): compared as text, `…:10` would sort before `…:9`; here it does not.
//! Each kind accepts exactly one spelling of each value, so two watermarks are equal exactly
//! when their text is.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::time::{iso, Millis};

/// Longest text watermark, in bytes.
pub const MAX_TEXT_WATERMARK_BYTES: usize = 256;

/// The kind of watermark a channel's producer emits, declared in the channel registry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WatermarkKind {
    /// A JSON integer, 0 ..= 2^53 − 1, ordered numerically (the default).
    #[default]
    Integer,
    /// An ISO-8601 instant as `toISOString()` prints it, ordered by instant.
    Instant,
    /// An instant, `:`, and a decimal sequence number, ordered by instant then sequence.
    InstantSequence,
    /// Opaque text, ordered byte by byte: an explicit choice for a producer whose watermarks
    /// order as text (the Memory Core's own writer orders every watermark this way).
    Text,
}

impl WatermarkKind {
    /// The registry's spelling of the kind.
    pub fn name(self) -> &'static str {
        match self {
            WatermarkKind::Integer => "integer",
            WatermarkKind::Instant => "instant",
            WatermarkKind::InstantSequence => "instant-sequence",
            WatermarkKind::Text => "text",
        }
    }

    /// The order key of `watermark` under this kind, or why it is not a watermark of this
    /// kind.
    pub fn key(self, watermark: &Watermark) -> Result<WatermarkKey, WatermarkError> {
        let refuse = || WatermarkError {
            kind: self,
            watermark: watermark.to_string(),
        };
        match (self, watermark) {
            (WatermarkKind::Integer, Watermark::Integer(n)) if *n <= crate::EXACT_INTEGER_MAX => {
                Ok(WatermarkKey::Integer(*n))
            }
            (WatermarkKind::Instant, Watermark::Text(t)) => {
                iso::parse(t).map(WatermarkKey::Instant).ok_or_else(refuse)
            }
            (WatermarkKind::InstantSequence, Watermark::Text(t)) => {
                instant_sequence(t).ok_or_else(refuse)
            }
            (WatermarkKind::Text, Watermark::Text(t))
                if !t.is_empty()
                    && t.len() <= MAX_TEXT_WATERMARK_BYTES
                    && !t.chars().any(char::is_control) =>
            {
                Ok(WatermarkKey::Text(t.clone()))
            }
            _ => Err(refuse()),
        }
    }
}

impl fmt::Display for WatermarkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `<instant>:<n>` with `n` a canonical decimal (no sign, no leading zero) of at most 2^53 − 1.
fn instant_sequence(text: &str) -> Option<WatermarkKey> {
    let (instant, digits) = text.get(..24).zip(text.get(24..))?;
    let digits = digits.strip_prefix(':')?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    let n: u64 = digits.parse().ok().filter(|_| canonical)?;
    (n <= crate::EXACT_INTEGER_MAX)
        .then_some(WatermarkKey::InstantSequence(iso::parse(instant)?, n))
}

/// A watermark as submitted and stored: a JSON integer, or text kept byte for byte.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Watermark {
    /// A number (channels of kind `integer`).
    Integer(u64),
    /// Text (channels of every other kind).
    Text(String),
}

impl Watermark {
    /// The watermark as text: the decimal digits of an integer, or the text itself (what the
    /// Memory Core's document format publishes).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Watermark::Integer(n) => n.to_string().into(),
            Watermark::Text(t) => t.as_str().into(),
        }
    }
}

/// A JSON integer (0 ..= `u64::MAX`) or a string; read by one visitor, without the buffering
/// of `#[serde(untagged)]` (deep frames the model checkers' small stacks cannot hold).
impl<'de> Deserialize<'de> for Watermark {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Watermark;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative integer or a string")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Watermark, E> {
                Ok(Watermark::Integer(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Watermark, E> {
                u64::try_from(n)
                    .map(Watermark::Integer)
                    .map_err(|_| E::custom(format!("negative watermark {n}")))
            }
            fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Watermark, E> {
                Ok(Watermark::Text(t.to_owned()))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

impl fmt::Display for Watermark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl From<u64> for Watermark {
    fn from(n: u64) -> Self {
        Watermark::Integer(n)
    }
}

/// The order of a watermark within its kind. Keys of two kinds are never compared: admission
/// refuses a watermark that is not of its channel's kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WatermarkKey {
    /// `integer`.
    Integer(u64),
    /// `instant`.
    Instant(Millis),
    /// `instant-sequence`: the instant, then the sequence number.
    InstantSequence(Millis, u64),
    /// `text`, by bytes.
    Text(String),
}

/// A watermark that is not of the kind its channel declares.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("watermark `{watermark}` is not a valid {kind} watermark ({})", describe(*.kind))]
pub struct WatermarkError {
    /// The channel's declared kind.
    pub kind: WatermarkKind,
    /// The refused watermark, as text.
    pub watermark: String,
}

fn describe(kind: WatermarkKind) -> &'static str {
    match kind {
        WatermarkKind::Integer => "a JSON integer from 0 to 2^53-1",
        WatermarkKind::Instant => "YYYY-MM-DDTHH:MM:SS.sssZ, as toISOString() prints it",
        WatermarkKind::InstantSequence => {
            "YYYY-MM-DDTHH:MM:SS.sssZ:N, N a decimal from 0 to 2^53-1 without leading zeros"
        }
        WatermarkKind::Text => "1 to 256 bytes of text without control characters",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use WatermarkKind::*;

    fn text(t: &str) -> Watermark {
        Watermark::Text(t.to_owned())
    }

    #[test]
    fn sequences_order_by_number_not_by_text() {
        let at = "2026-07-28T18:29:00.000Z";
        let nine = InstantSequence.key(&text(&format!("{at}:9"))).unwrap();
        let ten = InstantSequence.key(&text(&format!("{at}:10"))).unwrap();
        assert!(ten > nine, "…:10 after …:9 (as text it sorts before)");
        let later = InstantSequence
            .key(&text("2026-07-28T18:29:00.001Z:0"))
            .unwrap();
        assert!(later > ten, "a later instant wins over any sequence");
        assert!(
            Text.key(&text(&format!("{at}:10"))).unwrap()
                < Text.key(&text(&format!("{at}:9"))).unwrap(),
            "the text kind orders as text, as declared"
        );
    }

    #[test]
    fn instants_order_by_time() {
        let a = Instant.key(&text("2026-07-28T18:29:00.000Z")).unwrap();
        let b = Instant.key(&text("2026-07-28T18:29:00.001Z")).unwrap();
        let c = Instant.key(&text("2027-01-01T00:00:00.000Z")).unwrap();
        assert!(a < b && b < c);
        assert_eq!(a, WatermarkKey::Instant(Millis(1_785_263_340_000)));
    }

    #[test]
    fn integers_order_numerically_up_to_2_pow_53_minus_1() {
        assert!(Integer.key(&10.into()).unwrap() > Integer.key(&9.into()).unwrap());
        let max = crate::EXACT_INTEGER_MAX;
        assert!(Integer.key(&max.into()).is_ok());
        assert!(Integer.key(&(max + 1).into()).is_err());
    }

    /// Every kind accepts one spelling of a value: anything else is refused with the kind named.
    #[test]
    fn each_kind_refuses_what_is_not_its_own() {
        let cases: [(WatermarkKind, Watermark); 16] = [
            (Integer, text("5")),
            (Instant, 5.into()),
            (Instant, text("2026-07-28T18:29:00Z")),
            (Instant, text("2026-07-28T18:29:00.000+00:00")),
            (Instant, text("2026-07-28T18:29:00.000Z:1")),
            (InstantSequence, text("2026-07-28T18:29:00.000Z")),
            (InstantSequence, text("2026-07-28T18:29:00.000Z:")),
            (InstantSequence, text("2026-07-28T18:29:00.000Z:01")),
            (InstantSequence, text("2026-07-28T18:29:00.000Z:-1")),
            (
                InstantSequence,
                text("2026-07-28T18:29:00.000Z:9007199254740992"),
            ),
            (InstantSequence, text("2026-07-28T18:29:00.000Z;1")),
            (InstantSequence, text("2026-07-28T18:29:00Z:1")),
            (InstantSequence, text("é026-07-28T18:29:00.000Z:1")),
            (Text, text("")),
            (Text, text("a\nb")),
            (Text, text(&"x".repeat(257))),
        ];
        for (kind, watermark) in cases {
            let err = kind.key(&watermark).unwrap_err();
            assert_eq!(err.kind, kind, "{watermark}");
            assert!(err.to_string().contains(kind.name()), "{err}");
        }
        assert!(InstantSequence
            .key(&text("2026-07-28T18:29:00.000Z:9007199254740991"))
            .is_ok());
        assert!(InstantSequence
            .key(&text("2026-07-28T18:29:00.000Z:0"))
            .is_ok());
        assert!(Text.key(&text(&"x".repeat(256))).is_ok());
        assert!(Text.key(&5.into()).is_err(), "a text channel takes text");
    }

    #[test]
    fn json_forms() {
        assert_eq!(serde_json::to_string(&Watermark::Integer(7)).unwrap(), "7");
        assert_eq!(serde_json::to_string(&text("a")).unwrap(), "\"a\"");
        assert_eq!(
            serde_json::from_str::<Watermark>("7").unwrap(),
            Watermark::Integer(7)
        );
        assert_eq!(
            serde_json::from_str::<Watermark>("\"7\"").unwrap(),
            text("7")
        );
        assert!(serde_json::from_str::<Watermark>("-1").is_err());
        assert!(serde_json::from_str::<Watermark>("1.5").is_err());
        assert_eq!(
            serde_json::from_str::<WatermarkKind>("\"instant-sequence\"").unwrap(),
            InstantSequence
        );
        assert_eq!(WatermarkKind::default(), Integer);
    }
}
