//! Restricted names: channels, producers and holder instances. A name is 1-64 characters of
//! `[a-z0-9._-]` starting with `[a-z0-9]`, so it can never spell a path or smuggle control
//! characters into a log line.

/// Largest number of bytes of a name.
pub const MAX_NAME_BYTES: usize = 64;

/// A name outside `[a-z0-9][a-z0-9._-]{0,63}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid name `{0}`: expected 1-64 characters of [a-z0-9._-], starting with [a-z0-9]")]
pub struct NameError(pub String);

fn check_name(text: &str) -> Result<(), NameError> {
    let bytes = text.as_bytes();
    let allowed = |b: &u8| b.is_ascii_digit() || b.is_ascii_lowercase() || b"._-".contains(b);
    let ok = !bytes.is_empty()
        && bytes.len() <= MAX_NAME_BYTES
        && (bytes[0].is_ascii_digit() || bytes[0].is_ascii_lowercase())
        && bytes.iter().all(allowed);
    if ok {
        Ok(())
    } else {
        Err(NameError(text.chars().take(MAX_NAME_BYTES + 1).collect()))
    }
}

/// Defines a string newtype accepted only through `$check` (a `fn(&str) -> Result<(), $err>`),
/// with `parse`, `as_str`, `FromStr`, `AsRef<str>`, `Display`, and serde through the same
/// check.
macro_rules! validated_text {
    ($(#[$doc:meta])* $name:ident, $err:ty, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Parses the text; anything the type's rule refuses is an error.
            pub fn parse(text: &str) -> Result<Self, $err> {
                ($check)(text).map(|()| $name(text.to_owned()))
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = $err;
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                $name::parse(text)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = $err;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                $name::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
pub(crate) use validated_text;

validated_text!(
    /// The name of a typed producer channel, e.g. `lifecycle-frontier`.
    ChannelName,
    NameError,
    check_name
);
validated_text!(
    /// The authenticated identity of a producer, as established by the host.
    ProducerId,
    NameError,
    check_name
);
validated_text!(
    /// A digest identifying a holder instance (diagnostic, shown to contenders; not a secret).
    InstanceDigest,
    NameError,
    check_name
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_restricted() {
        for ok in [
            "a",
            "lifecycle-frontier",
            "route.v1",
            "x_9",
            &"f".repeat(64),
        ] {
            assert!(ChannelName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            ".a",
            "A",
            "a/b",
            "../x",
            "a b",
            "a\n",
            &"a".repeat(65),
        ] {
            assert!(ChannelName::parse(bad).is_err(), "{bad}");
            assert!(InstanceDigest::parse(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<ProducerId>("\"UP\"").is_err());
    }
}
