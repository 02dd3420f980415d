//! Producer submissions: one serialized transaction reads the stored row, the core decides,
//! and the plan is executed before commit. A rejection writes nothing.
//!
//! [`ProjectionStore::submit_observed`] calls a probe after the plan was executed and before
//! the commit, so crash tests can kill a producer there (the `--stall-before-commit` flag of
//! the CLI's `submit`).

use crate::error::Result;
use crate::projection::rows;
use crate::projection::store::ProjectionStore;
use solewriter_core::projection::channel::{ProducerId, Submission};
use solewriter_core::projection::watermark::{decide_submission, SubmissionPlan};

/// What an accepted submission did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// First row of this channel for the target.
    Inserted,
    /// Higher watermark stored (any degradation cleared).
    Advanced,
    /// Byte-identical replay; nothing written.
    Replayed,
    /// Equal watermark, different content: the channel is now degraded (`source-conflict`)
    /// and keeps its stored envelope.
    Degraded,
}

impl ProjectionStore {
    /// Submits `producer`'s envelope for one channel of one admitted target.
    pub fn submit(&self, producer: &ProducerId, submission: &Submission) -> Result<SubmitOutcome> {
        self.submit_observed(producer, submission, &|_| {})
    }

    /// [`Self::submit`], calling `before_commit` with the outcome once the row is written
    /// (nothing for a replay) and before the transaction commits. It runs inside the
    /// transaction: while it blocks, every other writer of the store waits (or gets `Busy`).
    pub fn submit_observed(
        &self,
        producer: &ProducerId,
        submission: &Submission,
        before_commit: &dyn Fn(SubmitOutcome),
    ) -> Result<SubmitOutcome> {
        let tx = self.begin()?;
        let admitted = rows::read_lease(&tx, &submission.target_id)?.is_some();
        let existing = rows::read_channel(&tx, &submission.target_id, &submission.channel)?;
        let now = self.options.clock.now();
        let decision = decide_submission(
            self.profile,
            &self.options.registry,
            producer,
            admitted,
            existing.as_ref(),
            submission,
            now,
        );
        let plan = match decision {
            Ok(plan) => plan,
            Err(rejected) => {
                tracing::warn!(target_id = %submission.target_id, channel = %submission.channel,
                    producer = %producer, reason = %rejected, "submission rejected");
                return Err(rejected.into());
            }
        };
        let outcome = match &plan {
            SubmissionPlan::Insert(record) => {
                rows::upsert_channel(&tx, record).map(|()| SubmitOutcome::Inserted)
            }
            SubmissionPlan::Advance(record) => {
                rows::upsert_channel(&tx, record).map(|()| SubmitOutcome::Advanced)
            }
            SubmissionPlan::Replay => Ok(SubmitOutcome::Replayed),
            SubmissionPlan::Degrade { record } => {
                rows::upsert_channel(&tx, record).map(|()| SubmitOutcome::Degraded)
            }
        }?;
        before_commit(outcome);
        tx.commit().map_err(|e| self.map_err(e))?;
        tracing::info!(target_id = %submission.target_id, channel = %submission.channel,
            watermark = %submission.source_watermark, ?outcome, "submission accepted");
        Ok(outcome)
    }
}
