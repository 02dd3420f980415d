//! The fenced projection writer (seed 000), its pure half.
//!
//! - [`target`]: the attested target tuple and its derived [`target::TargetId`].
//! - [`lease`]: the lease type-state (`Lease<Unheld|Held|Expired|Released>`) and its plans.
//! - [`adoption`]: taking over the tables of the Memory Core's own JavaScript writer.
//! - [`channel`]: producers, channels, the channel registry and channel rows.
//! - [`envelope_schema`]: a channel's envelope JSON Schema, compiled once.
//! - [`watermark`]: watermarks of every kind, and producer-submission admission.
//! - [`profile`]: what a store's documents, target ids and envelopes look like (solewriter's
//!   own, or the Memory Core's).
//! - [`composition`]: what a publication composes with (registry, profile, binding), checked
//!   once for every executor.
//! - [`memory_core`]: composition of the Memory Core's `live-lane-awareness-projection.v1`.
//! - the document (this module's own items: [`ProjectionDocument`], [`compose`]): composition
//!   of committed channel rows into the published `current.json`.
//! - the epoch of the document in place ([`published_epoch`]), read from a bounded prefix.
//! - [`publication`]: the named steps of the fenced publication sequence.
//! - [`columns`]: the strict decoding of stored lease and channel rows.
//! - [`schema`]: the two tables' statements and their schema marker.
//! - [`machine`]: acquisition, publication and release as sans-IO step machines — the one
//!   sequence both the SQLite adapter and the model checkers execute.

pub mod adoption;
pub mod channel;
pub mod columns;
pub mod composition;
mod document;
mod draft;
pub mod envelope_schema;
mod epoch;
pub mod lease;
pub mod machine;
pub mod memory_core;
pub mod profile;
pub mod publication;
pub mod schema;
pub mod target;
pub mod watermark;

pub use document::{
    channel_status, producer_watermarks, ChannelStatus, Coverage, DocumentError,
    ProducerWatermarks, ProjectionDocument, PublishedChannel, StatusReason, FORMAT,
    MAX_DOCUMENT_BYTES,
};
pub use draft::Draft;
pub use epoch::{published_epoch, EPOCH_PREFIX_BYTES};
