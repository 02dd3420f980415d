//! The decision of the adoption: each stored row of the JavaScript writer becomes the row
//! solewriter stores, or the adoption is refused.
//!
//! - Target ids: the writer's 128-bit id is a one-way hash of another encoding of the same
//!   seven attested fields, so it maps only through the attested tuples the host gives: the
//!   tuple whose writer id it is gives the solewriter id. No tuple: refused (`UnmappedTarget`).
//! - Epochs are kept as they are (every next grant takes the stored epoch + 1, so they go on
//!   upward from where the writer left them).
//! - Grants: the writer stores `sha256(<token as 64 hex characters>)`, solewriter
//!   `sha256(<the token's 32 bytes>)`, so no holder can present a token solewriter would match
//!   with a carried hash. A `held` grant is therefore carried as *ended at the adoption*:
//!   `held` with its hash, holder and `acquired_at`, `expires_at` lowered to the adoption's
//!   time when it was later — observed as expired, its holder fenced, the target acquirable at
//!   epoch + 1. A `released` row (the writer nulled its hash and zeroed its expiry) is carried
//!   as `released`, its hash [`NO_SURVIVING_HASH`] and its expiry the adoption's time.
//! - Under the Memory Core profile the writer's target ids are the store's own; under the
//!   generic profile they map through the tuples as above.
//! - Channel rows: the watermark as a watermark of its channel's declared kind (the decimal
//!   text of an `integer` channel as an integer; the text of the other kinds as it is, checked
//!   to be of the kind; an unregistered channel's as text), the ISO times as milliseconds, the
//!   envelope byte for byte, the writer's conflict reason as `source-conflict`. A target with
//!   channel rows and no lease row (admitted, never granted) gets its admission row.

use super::js_writer::{self, CHANNEL_COLUMNS, LEASE_COLUMNS};
use super::refusal::{AdoptionRefused, ValueProblem};
use super::values::StoredRow;
use crate::names::{ChannelName, InstanceDigest};
use crate::projection::channel::{ChannelRecord, ChannelRegistry, DegradedReason};
use crate::projection::lease::{LeaseRecord, LeaseState, RecordedGrant};
use crate::projection::profile::Profile;
use crate::projection::schema::TABLE_NAMES;
use crate::projection::target::{TargetId, TargetTuple};
use crate::projection::watermark::{Watermark, WatermarkKind};
use crate::time::iso;
use crate::time::Millis;
use crate::token::TokenHash;
use std::collections::BTreeMap;

/// The token hash a carried `released` row stores: the writer's release nulled the real one.
/// 32 zero bytes are no token's SHA-256 that anyone knows, and a released row authorizes
/// nothing whatever its hash.
pub const NO_SURVIVING_HASH: [u8; 32] = [0; 32];

/// How the writer's 128-bit target ids become solewriter's: under the Memory Core profile
/// they are the profile's own ids (kept as they are); under the generic profile, the attested
/// tuples whose writer ids they are give their solewriter ids.
pub(super) enum TargetMap {
    /// The Memory Core profile.
    Kept,
    /// The generic profile: writer id → solewriter id.
    Tuples(BTreeMap<String, TargetId>),
}

impl TargetMap {
    /// The map of a store of `profile`; under the generic profile, two different tuples of one
    /// writer id are refused.
    pub(super) fn new(profile: Profile, tuples: &[TargetTuple]) -> Result<Self, AdoptionRefused> {
        if profile == Profile::MemoryCore {
            return Ok(TargetMap::Kept);
        }
        let mut map = BTreeMap::new();
        for tuple in tuples {
            let legacy_id = js_writer::target_id(tuple);
            let id = tuple.target_id();
            match map.insert(legacy_id.clone(), id.clone()) {
                Some(other) if other != id => {
                    return Err(AdoptionRefused::AmbiguousTuples { legacy_id })
                }
                _ => {}
            }
        }
        Ok(TargetMap::Tuples(map))
    }

    /// The solewriter id of the writer id in column `index` of `row`.
    fn map(&self, row: &StoredRow<'_>, index: usize) -> Result<TargetId, AdoptionRefused> {
        let text = row.text(index)?;
        let hex = text.len() == 32 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !hex {
            return Err(row.refuse(index, ValueProblem::BadHex(text.to_owned())));
        }
        match self {
            TargetMap::Kept => Ok(TargetId::parse(text).expect("32 lowercase hex digits")),
            TargetMap::Tuples(map) => map
                .get(text)
                .cloned()
                .ok_or_else(|| row.refuse(index, ValueProblem::UnmappedTarget(text.to_owned()))),
        }
    }
}

/// A time `StoredRow::integer` has checked to be non-negative.
fn millis(value: i64) -> Millis {
    Millis(value.unsigned_abs())
}

/// The solewriter row of one stored `HookProjectionLeases` row, at broker time `now`.
pub(super) fn lease(
    raw: &[Option<String>],
    targets: &TargetMap,
    now: Millis,
) -> Result<LeaseRecord, AdoptionRefused> {
    let row = StoredRow::new(TABLE_NAMES[0], &LEASE_COLUMNS, raw)?;
    let target_id = targets.map(&row, 0)?;
    let state = row.text(6)?;
    if !matches!(state, "held" | "released") {
        return Err(row.refuse(6, ValueProblem::UnknownState(state.to_owned())));
    }
    let epoch = row.integer(1)?;
    if epoch < 1 {
        return Err(row.refuse(1, ValueProblem::EpochBelowOne(epoch)));
    }
    let digest = row.text(3)?;
    let holder_instance_digest = InstanceDigest::parse(digest)
        .map_err(|_| row.refuse(3, ValueProblem::BadName(digest.to_owned())))?;
    let acquired_at = row.integer(4)?;
    if millis(acquired_at) >= now {
        return Err(row.refuse(
            4,
            ValueProblem::AcquiredNotBeforeNow {
                acquired_at,
                now: now.0,
            },
        ));
    }
    let expires_at = row.integer(5)?;
    let grant = |holder_token_hash, expires_at| RecordedGrant {
        holder_token_hash,
        holder_instance_digest,
        acquired_at: millis(acquired_at),
        expires_at,
    };
    let state = if state == "held" {
        let hash = row.text(2)?;
        let hash = crate::hex::decode32(hash)
            .ok_or_else(|| row.refuse(2, ValueProblem::BadHex(hash.to_owned())))?;
        if expires_at <= acquired_at {
            return Err(row.refuse(
                5,
                ValueProblem::EndsBeforeStart {
                    acquired_at,
                    expires_at,
                },
            ));
        }
        LeaseState::Held(grant(
            TokenHash::from_bytes(hash),
            millis(expires_at).min(now),
        ))
    } else {
        row.null(2)?;
        if expires_at != 0 {
            return Err(row.refuse(5, ValueProblem::ReleasedExpiry(expires_at)));
        }
        LeaseState::Released(grant(TokenHash::from_bytes(NO_SURVIVING_HASH), now))
    };
    Ok(LeaseRecord {
        target_id,
        fencing_epoch: epoch.unsigned_abs(),
        state,
    })
}

/// A watermark the writer stored as text, as a watermark of `kind`: for `integer`, the
/// integer it spells (decimal digits without sign or leading zero); for the other kinds, the
/// text itself, which must be of the kind.
fn watermark(kind: WatermarkKind, text: &str) -> Option<Watermark> {
    let watermark = match kind {
        WatermarkKind::Integer => {
            let canonical =
                text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
            Watermark::Integer(text.parse::<u64>().ok().filter(|_| canonical)?)
        }
        _ => Watermark::Text(text.to_owned()),
    };
    kind.key(&watermark).ok().map(|_| watermark)
}

/// The solewriter row of one stored `HookProjectionChannels` row.
pub(super) fn channel(
    raw: &[Option<String>],
    targets: &TargetMap,
    registry: &ChannelRegistry,
) -> Result<ChannelRecord, AdoptionRefused> {
    let row = StoredRow::new(TABLE_NAMES[1], &CHANNEL_COLUMNS, raw)?;
    let target_id = targets.map(&row, 0)?;
    let name = row.text(1)?;
    let channel = ChannelName::parse(name)
        .map_err(|_| row.refuse(1, ValueProblem::BadName(name.to_owned())))?;
    // A channel no longer registered: under the Memory Core profile its watermark is kept as
    // text (nothing orders against it until the channel is registered again, with the kind
    // its producer emits); under the generic profile, whose document carries integers only,
    // it must be an integer.
    let kind = registry.get(&channel).map_or(
        match targets {
            TargetMap::Kept => WatermarkKind::Text,
            TargetMap::Tuples(_) => WatermarkKind::Integer,
        },
        |spec| spec.watermark,
    );
    let watermark_text = row.text(2)?;
    let source_watermark = watermark(kind, watermark_text).ok_or_else(|| {
        row.refuse(
            2,
            ValueProblem::UnorderableWatermark {
                watermark: watermark_text.to_owned(),
                kind,
            },
        )
    })?;
    let envelope_json = row.text(3)?;
    if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(envelope_json).is_err() {
        return Err(row.refuse(3, ValueProblem::NotJsonObject));
    }
    let time = |index: usize| -> Result<Millis, AdoptionRefused> {
        let text = row.text(index)?;
        iso::parse(text)
            .ok_or_else(|| row.refuse(index, ValueProblem::UnparsableTime(text.to_owned())))
    };
    let (captured_at, expires_at, updated_at) = (time(4)?, time(5)?, time(6)?);
    let degraded_reason = match row.optional_text(7)? {
        None => None,
        Some(reason) if reason == js_writer::conflict_reason(watermark_text) => {
            Some(DegradedReason::SourceConflict)
        }
        Some(reason) => {
            return Err(row.refuse(7, ValueProblem::UnknownConflictReason(reason.to_owned())))
        }
    };
    Ok(ChannelRecord {
        target_id,
        channel,
        source_watermark,
        envelope_json: envelope_json.to_owned(),
        captured_at,
        expires_at,
        updated_at,
        degraded_reason,
    })
}
