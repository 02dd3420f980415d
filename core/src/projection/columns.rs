//! The stored columns of `HookProjectionLeases` and `HookProjectionChannels`, and their strict
//! decoding into records. Every executor of the machines reads rows through these (the SQLite
//! adapter from rusqlite rows, the Node binding from the host's better-sqlite3 rows), so a
//! row solewriter could not have written (negative integers, a token hash of the wrong
//! length, an unknown state, partial grant columns) is refused the same way everywhere.

use crate::names::InstanceDigest;
use crate::projection::channel::{ChannelName, ChannelRecord, DegradedReason};
use crate::projection::lease::{LeaseRecord, LeaseState, RecordedGrant};
use crate::projection::target::TargetId;
use crate::projection::watermark::{Watermark, MAX_TEXT_WATERMARK_BYTES};
use crate::time::Millis;
use crate::token::TokenHash;

/// A stored row that solewriter could not have written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CorruptRow(pub String);

fn corrupt(what: impl std::fmt::Display) -> CorruptRow {
    CorruptRow(what.to_string())
}

fn uint(value: i64, column: &str) -> Result<u64, CorruptRow> {
    u64::try_from(value).map_err(|_| corrupt(format!("negative {column}")))
}

/// [`uint`], and at most [`crate::EXACT_INTEGER_MAX`]: a channel row's watermark and times
/// (admission refuses anything larger, so a larger value was not written by solewriter).
fn exact(value: i64, column: &str) -> Result<u64, CorruptRow> {
    let value = uint(value, column)?;
    if value > crate::EXACT_INTEGER_MAX {
        return Err(corrupt(format!("{column} above 2^53-1")));
    }
    Ok(value)
}

/// The columns of a `HookProjectionLeases` row, as stored.
#[derive(Debug, Clone)]
pub struct LeaseColumns {
    /// `target_id`.
    pub target_id: String,
    /// `fencing_epoch`.
    pub fencing_epoch: i64,
    /// `holder_token_hash`.
    pub holder_token_hash: Option<Vec<u8>>,
    /// `holder_instance_digest`.
    pub holder_instance_digest: Option<String>,
    /// `acquired_at`.
    pub acquired_at: Option<i64>,
    /// `expires_at`.
    pub expires_at: Option<i64>,
    /// `state`.
    pub state: String,
}

impl LeaseColumns {
    /// The lease record these columns store.
    pub fn decode(self) -> Result<LeaseRecord, CorruptRow> {
        let target_id = TargetId::parse(&self.target_id).map_err(|_| corrupt("lease target_id"))?;
        let grant = match (
            self.holder_token_hash,
            self.holder_instance_digest,
            self.acquired_at,
            self.expires_at,
        ) {
            (None, None, None, None) => None,
            (Some(hash), Some(digest), Some(acquired_at), Some(expires_at)) => {
                let hash: [u8; 32] = hash
                    .try_into()
                    .map_err(|_| corrupt("holder_token_hash length"))?;
                Some(RecordedGrant {
                    holder_token_hash: TokenHash::from_bytes(hash),
                    holder_instance_digest: InstanceDigest::parse(&digest).map_err(corrupt)?,
                    acquired_at: Millis(uint(acquired_at, "acquired_at")?),
                    expires_at: Millis(uint(expires_at, "expires_at")?),
                })
            }
            _ => return Err(corrupt(format!("lease {target_id}: partial grant columns"))),
        };
        let state = LeaseState::from_columns(&self.state, grant)
            .map_err(|r| corrupt(format!("lease {target_id}: {r}")))?;
        Ok(LeaseRecord {
            target_id,
            fencing_epoch: uint(self.fencing_epoch, "fencing_epoch")?,
            state,
        })
    }
}

/// A `source_watermark` as stored: its storage class and value (the column holds an integer for
/// channels of kind `integer`, text for the others).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatermarkColumn {
    /// An `INTEGER` value.
    Integer(i64),
    /// A `TEXT` value.
    Text(String),
}

impl WatermarkColumn {
    fn decode(self) -> Result<Watermark, CorruptRow> {
        match self {
            WatermarkColumn::Integer(n) => Ok(Watermark::Integer(exact(n, "source_watermark")?)),
            WatermarkColumn::Text(t) if !t.is_empty() && t.len() <= MAX_TEXT_WATERMARK_BYTES => {
                Ok(Watermark::Text(t))
            }
            WatermarkColumn::Text(_) => Err(corrupt("source_watermark text length")),
        }
    }
}

/// The columns of a `HookProjectionChannels` row, as stored.
#[derive(Debug, Clone)]
pub struct ChannelColumns {
    /// `target_id`.
    pub target_id: String,
    /// `channel`.
    pub channel: String,
    /// `source_watermark`.
    pub source_watermark: WatermarkColumn,
    /// `envelope_json`.
    pub envelope_json: String,
    /// `captured_at`.
    pub captured_at: i64,
    /// `expires_at`.
    pub expires_at: i64,
    /// `updated_at`.
    pub updated_at: i64,
    /// `degraded_reason`.
    pub degraded_reason: Option<String>,
}

impl ChannelColumns {
    /// The channel record these columns store.
    pub fn decode(self) -> Result<ChannelRecord, CorruptRow> {
        Ok(ChannelRecord {
            target_id: TargetId::parse(&self.target_id)
                .map_err(|_| corrupt("channel target_id"))?,
            channel: ChannelName::parse(&self.channel).map_err(corrupt)?,
            source_watermark: self.source_watermark.decode()?,
            envelope_json: self.envelope_json,
            captured_at: Millis(exact(self.captured_at, "captured_at")?),
            expires_at: Millis(exact(self.expires_at, "expires_at")?),
            updated_at: Millis(exact(self.updated_at, "updated_at")?),
            degraded_reason: match self.degraded_reason {
                None => None,
                Some(text) => {
                    Some(DegradedReason::parse(&text).ok_or_else(|| corrupt("degraded_reason"))?)
                }
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(watermark: i64, captured: i64, expires: i64, updated: i64) -> ChannelColumns {
        ChannelColumns {
            target_id: "1".repeat(64),
            channel: "computed-route".into(),
            source_watermark: WatermarkColumn::Integer(watermark),
            envelope_json: "{}".into(),
            captured_at: captured,
            expires_at: expires,
            updated_at: updated,
            degraded_reason: None,
        }
    }

    /// A channel row's watermark and times are at most 2^53-1, each checked alone.
    #[test]
    fn channel_integers_above_2_pow_53_minus_1_are_corrupt() {
        let max = crate::EXACT_INTEGER_MAX as i64;
        assert!(row(max, max - 1, max, max).decode().is_ok());
        for (bad, column) in [
            (row(max + 1, 1, 2, 3), "source_watermark"),
            (row(1, max + 1, 2, 3), "captured_at"),
            (row(1, 1, max + 1, 3), "expires_at"),
            (row(1, 1, 2, max + 1), "updated_at"),
        ] {
            assert_eq!(
                bad.decode().unwrap_err(),
                CorruptRow(format!("{column} above 2^53-1"))
            );
        }
        assert_eq!(
            row(-1, 1, 2, 3).decode().unwrap_err(),
            CorruptRow("negative source_watermark".into())
        );
        let text = |t: &str| {
            let mut r = row(1, 1, 2, 3);
            r.source_watermark = WatermarkColumn::Text(t.to_owned());
            r.decode()
        };
        assert_eq!(
            text("2026-07-28T18:29:00.000Z:9").unwrap().source_watermark,
            Watermark::Text("2026-07-28T18:29:00.000Z:9".into())
        );
        for bad in [String::new(), "x".repeat(MAX_TEXT_WATERMARK_BYTES + 1)] {
            assert_eq!(
                text(&bad).unwrap_err(),
                CorruptRow("source_watermark text length".into())
            );
        }
    }
}
