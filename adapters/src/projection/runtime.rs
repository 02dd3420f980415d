//! The runtime root, the output paths derived from it, and the reader hooks use. They live in
//! `solewriter-files` (shared with the Node binding); this module re-exports them with the
//! adapters' error type.

use crate::error::Result;
use solewriter_core::projection::target::TargetId;
use solewriter_core::projection::ProjectionDocument;
pub use solewriter_files::runtime::{RuntimeRoot, CURRENT_FILE, PROJECTIONS_DIR};

/// Reads and validates the published document of `target`
/// ([`solewriter_files::runtime::read_projection`]). Returns the whole document or an error,
/// never a partial document.
pub fn read_projection(root: &RuntimeRoot, target: &TargetId) -> Result<ProjectionDocument> {
    Ok(solewriter_files::runtime::read_projection(root, target)?)
}
