//! A document composed before the serialized transaction, and the check that lets it be
//! published.
//!
//! A publication composes its document, writes it to a temp sibling and fsyncs it while it
//! holds only the target's lock, so that the store's write lock — one per store, shared by
//! every target — is held for the revalidation, the rename and the commit alone. Inside the
//! transaction the holder's [`Authority`] confirms the draft ([`Draft::confirmed`]): same
//! target, same epoch, and exactly the channel rows it was composed from, read again under the
//! write lock, none of them expired since the draft's clock. A draft that is not confirmed is
//! composed again from the rows read inside the transaction. Either way the document renamed
//! into place lists the rows committed at the rename, each with its freshness at the
//! revalidation.

use crate::projection::channel::ChannelRecord;
use crate::projection::composition::Composition;
use crate::projection::document::{check_size, DocumentError};
use crate::projection::lease::Authority;
use crate::projection::target::TargetId;
use crate::time::Millis;

/// A composed, size-checked document and what it was composed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Draft {
    target_id: TargetId,
    epoch: u64,
    rows: Vec<ChannelRecord>,
    bytes: Vec<u8>,
    composed_at: Millis,
}

impl Draft {
    /// Composes the document of the grant at `epoch` on `target_id` from the committed `rows`
    /// at broker time `now`, in the profile of `composition` (refused past
    /// [`crate::projection::MAX_DOCUMENT_BYTES`]).
    pub fn compose<'r>(
        target_id: &TargetId,
        epoch: u64,
        composition: impl Into<Composition<'r>>,
        rows: Vec<ChannelRecord>,
        now: Millis,
    ) -> Result<Self, DocumentError> {
        let bytes = composition.into().compose(target_id, epoch, &rows, now);
        check_size(bytes.len())?;
        Ok(Draft {
            target_id: target_id.clone(),
            epoch,
            rows,
            bytes,
            composed_at: now,
        })
    }

    /// The document's bytes (what the temp file holds).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The broker time the document was composed at (its `publishedAt`).
    pub fn composed_at(&self) -> Millis {
        self.composed_at
    }

    /// Whether the holder of `authority`, having read `rows` inside its transaction at broker
    /// time `now`, may publish this draft: the same target and epoch, composed before the
    /// grant's expiry (a draft whose clock already saw the expiry is never published, even if
    /// the clock has since stepped back), from exactly these rows, and no row expired between
    /// the draft's clock and `now` (so every channel's freshness in the draft is its freshness
    /// at `now`).
    pub fn confirmed(&self, authority: &Authority, rows: &[ChannelRecord], now: Millis) -> bool {
        self.target_id == *authority.target_id()
            && self.epoch == authority.epoch()
            && self.composed_at < authority.expires_at()
            && self.rows == rows
            && rows
                .iter()
                .all(|r| (r.expires_at <= self.composed_at) == (r.expires_at <= now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LeaseTtl;
    use crate::projection::channel::{ChannelName, ChannelSpec, ProducerId};
    use crate::projection::lease::{observe, AcquireRequest, Credential, LeaseRecord};
    use crate::token::HolderToken;

    fn tid(c: char) -> TargetId {
        TargetId::parse(&c.to_string().repeat(64)).unwrap()
    }

    /// The authority of the first grant on `target`.
    fn authority(target: TargetId) -> Authority {
        let token = HolderToken::from_bytes([3; 32]);
        let req = AcquireRequest {
            token_hash: token.hash(),
            holder_instance_digest: crate::names::InstanceDigest::parse("i").unwrap(),
            now: Millis(0),
            ttl: LeaseTtl::from_millis(Some(20_000)).unwrap(),
            published_epoch: None,
        };
        let plan = observe(LeaseRecord::admitted(target.clone()), Millis(0))
            .unwrap()
            .decide_acquire(req)
            .unwrap();
        let cred = Credential {
            target_id: target,
            epoch: plan.epoch,
            token_hash: token.hash(),
        };
        observe(plan.record(), Millis(1))
            .unwrap()
            .authorize_publish(&cred)
            .unwrap()
    }

    fn registry() -> crate::projection::channel::ChannelRegistry {
        crate::projection::channel::ChannelRegistry::new(vec![ChannelSpec {
            name: ChannelName::parse("c").unwrap(),
            owner: ProducerId::parse("p").unwrap(),
            envelope_schema: "s".into(),
            max_envelope_bytes: 100,
            watermark: crate::projection::watermark::value::WatermarkKind::Integer,
            envelope_json_schema: None,
        }])
        .unwrap()
    }

    fn row(target: &TargetId, watermark: u64) -> ChannelRecord {
        ChannelRecord {
            target_id: target.clone(),
            channel: ChannelName::parse("c").unwrap(),
            source_watermark: watermark.into(),
            envelope_json: format!(r#"{{"schema":"s","w":{watermark}}}"#),
            captured_at: Millis(1),
            expires_at: Millis(10_000),
            updated_at: Millis(2),
            degraded_reason: None,
        }
    }

    #[test]
    fn only_the_same_target_epoch_and_unexpired_rows_confirm_a_draft() {
        let a = tid('a');
        let rows = vec![row(&a, 1)];
        let draft = Draft::compose(&a, 1, &registry(), rows.clone(), Millis(5)).unwrap();
        assert_eq!(draft.composed_at(), Millis(5));
        assert!(draft.bytes().ends_with(b"\n"));
        assert!(draft.confirmed(&authority(a.clone()), &rows, Millis(6)));
        // A row that expired between the draft's clock and the transaction's.
        assert!(draft.confirmed(&authority(a.clone()), &rows, Millis(9_999)));
        assert!(!draft.confirmed(&authority(a.clone()), &rows, Millis(10_000)));
        // A row that had expired exactly at the draft's clock was composed as expired already.
        let expired = Draft::compose(&a, 1, &registry(), rows.clone(), Millis(10_000)).unwrap();
        assert!(expired.confirmed(&authority(a.clone()), &rows, Millis(10_001)));
        // Another epoch (the one-shot's prediction missed), another target, moved rows.
        let other_epoch = Draft::compose(&a, 2, &registry(), rows.clone(), Millis(5)).unwrap();
        assert!(!other_epoch.confirmed(&authority(a.clone()), &rows, Millis(6)));
        let b = tid('b');
        let other_target = Draft::compose(&b, 1, &registry(), vec![row(&b, 1)], Millis(5)).unwrap();
        assert!(!other_target.confirmed(&authority(a.clone()), &[row(&b, 1)], Millis(6)));
        assert!(!draft.confirmed(&authority(a.clone()), &[row(&a, 2)], Millis(6)));
        assert!(!draft.confirmed(&authority(a.clone()), &[], Millis(6)));
        assert!(!draft.confirmed(&authority(a.clone()), &[row(&a, 1), row(&a, 1)], Millis(6)));
    }

    #[test]
    fn a_draft_composed_at_or_past_the_expiry_is_never_confirmed() {
        // The grant of `authority` expires at 20_000. A draft whose clock read 20_000 or later
        // is refused even when the transaction's clock has stepped back before the expiry.
        let a = tid('a');
        let rows = vec![row(&a, 1)];
        let at = |ms| Draft::compose(&a, 1, &registry(), rows.clone(), Millis(ms)).unwrap();
        assert!(at(19_999).confirmed(&authority(a.clone()), &rows, Millis(19_999)));
        assert!(!at(20_000).confirmed(&authority(a.clone()), &rows, Millis(19_999)));
        assert!(!at(u64::MAX >> 11).confirmed(&authority(a.clone()), &rows, Millis(19_999)));
    }
}
