//! The Memory Core profile's document, `live-lane-awareness-projection.v1`: composed from the
//! committed channel rows exactly as the Memory Core's own JavaScript writer composes it.
//! (Composition lands with the profile's publication.)

use crate::projection::channel::ChannelRecord;
use crate::projection::profile::ConsumerBinding;
use crate::projection::target::TargetId;
use crate::time::Millis;

/// The document's `schemaVersion`, and the profile's name.
pub const SCHEMA_VERSION: &str = "live-lane-awareness-projection.v1";

/// The document of the grant at `epoch` on `target_id`, from the committed `rows` at broker
/// time `now`, with the publication's consumer `binding`.
pub(crate) fn compose(
    target_id: &TargetId,
    epoch: u64,
    binding: &ConsumerBinding,
    rows: &[ChannelRecord],
    now: Millis,
) -> Vec<u8> {
    let _ = (target_id, epoch, binding, rows, now);
    unimplemented!("composition of the Memory Core document")
}

/// The `publication.fencingEpoch` of `bytes` if they are a document of this format.
pub fn published_epoch(bytes: &[u8]) -> Option<u64> {
    let _ = bytes;
    None
}
