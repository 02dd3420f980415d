//! Holder tokens and their hashes. The raw token is 256 bits supplied by the adapter's
//! random source; the store keeps only its SHA-256. `Debug` never prints a raw token and
//! hashes are compared in constant time.

use sha2::{Digest, Sha256};
use std::fmt;

/// A raw holder token: returned once to the holder, never stored, never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct HolderToken([u8; 32]);

impl HolderToken {
    /// Wraps 32 random bytes produced by the caller.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        HolderToken(bytes)
    }

    /// Parses the 64-character lowercase hex form produced by [`Self::to_hex`].
    pub fn from_hex(text: &str) -> Option<Self> {
        crate::hex::decode32(text).map(HolderToken)
    }

    /// The raw token in lowercase hex, for handing to the holder (e.g. across a process
    /// boundary). Treat it as a secret.
    pub fn to_hex(&self) -> String {
        crate::hex::encode(&self.0)
    }

    /// The raw bytes (for tests that prove the bytes never reach storage).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The hash the store keeps.
    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0).into())
    }
}

impl fmt::Debug for HolderToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HolderToken(<redacted>)")
    }
}

/// SHA-256 of a holder token, as stored in `holder_token_hash`.
#[derive(Clone, Copy, Debug)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// Wraps 32 bytes read back from the store.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        TokenHash(bytes)
    }

    /// The stored bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Constant-time equality: the running time does not depend on where the hashes differ.
    pub fn ct_eq(&self, other: &TokenHash) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_and_hex_round_trips() {
        let token = HolderToken::from_bytes([0xab; 32]);
        assert_eq!(format!("{token:?}"), "HolderToken(<redacted>)");
        assert!(!format!("{token:?}").contains("abab"));
        assert_eq!(HolderToken::from_hex(&token.to_hex()), Some(token.clone()));
        assert_eq!(HolderToken::from_hex("AB"), None);
        assert_eq!(HolderToken::from_hex(&token.to_hex().to_uppercase()), None);
    }

    #[test]
    fn hash_is_sha256_and_compares_by_value() {
        let a = HolderToken::from_bytes([1; 32]).hash();
        let b = HolderToken::from_bytes([2; 32]).hash();
        assert!(a.ct_eq(&HolderToken::from_bytes([1; 32]).hash()));
        assert!(!a.ct_eq(&b));
        let mut last_differs = *a.as_bytes();
        last_differs[31] ^= 1;
        assert!(!a.ct_eq(&TokenHash::from_bytes(last_differs)));
        assert_ne!(a.as_bytes(), &[1; 32]);
    }

    /// Known answers computed outside this code, e.g.
    /// `printf '0123456789abcdef%.0s' 1 2 3 4 | xxd -r -p | sha256sum`: any other function in
    /// place of SHA-256 (or SHA-256 of anything but the raw 32 bytes) fails here.
    #[test]
    fn hash_matches_sha256_known_answers() {
        let vectors = [
            (
                "0123456789abcdef".repeat(4),
                "4884fdaafea47c29fea7159d0daddd9c085d6200e1359e85bb81736af6b7c837",
            ),
            (
                "ab".repeat(32),
                "9a2db2e23f1504cd056606553ac049c5e718e8f9ce9233876df1a7a1821af885",
            ),
        ];
        for (token, hash) in vectors {
            let token = HolderToken::from_hex(&token).unwrap();
            assert_eq!(crate::hex::encode(token.hash().as_bytes()), hash);
        }
    }

    #[test]
    fn bytes_are_exposed_unchanged() {
        let token = HolderToken::from_bytes([7; 32]);
        assert_eq!(token.as_bytes(), &[7; 32]);
        assert_eq!(TokenHash::from_bytes([9; 32]).as_bytes(), &[9; 32]);
    }

    #[test]
    fn differences_never_cancel_out() {
        let zero = TokenHash::from_bytes([0; 32]);
        let mut two = [0u8; 32];
        two[0] = 1;
        two[1] = 1;
        assert!(!zero.ct_eq(&TokenHash::from_bytes(two)));
    }

    #[test]
    fn hex_digits_and_letters_parse() {
        let text = "0123456789abcdef".repeat(4);
        let token = HolderToken::from_hex(&text).unwrap();
        assert_eq!(
            &token.as_bytes()[..8],
            &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]
        );
        assert_eq!(token.to_hex(), text);
    }
}
