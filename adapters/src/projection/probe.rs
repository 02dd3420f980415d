//! The publication probe: what a test (or an operator's tracing) sees of a publication between
//! its steps. The executor calls it before every effect and at every named step; leases and
//! releases run with [`NoProbe`].

use solewriter_core::projection::publication::PublishStep;
use solewriter_core::projection::target::TargetId;

/// Observes the publication sequence: tests pause or crash a publisher between steps. The
/// probe runs inside the transaction, so while it blocks, every other writer of the store
/// waits (or gets `Busy`).
pub trait PublishProbe {
    /// Called when `step` has been reached.
    fn reached(&self, step: PublishStep, target: &TargetId, epoch: u64);

    /// Called before every effect of the machine is executed (`effect` is its name, e.g.
    /// `write-temp`; see `solewriter_core::projection::machine::Effect::name`). Does nothing by default.
    fn before(&self, effect: &'static str, target: &TargetId, epoch: u64) {
        let _ = (effect, target, epoch);
    }

    /// Whether the probe observes anything. A batch shows each effect of its lock-free parts
    /// (which run on threads of their own) to the probe on the batch's thread, the part
    /// waiting until it has been seen; a probe that answers `false` (as [`NoProbe`] does)
    /// spares the parts those hand-overs. `true` by default.
    fn observes(&self) -> bool {
        true
    }
}

/// The probe that does nothing.
#[derive(Clone, Copy, Debug)]
pub struct NoProbe;

impl PublishProbe for NoProbe {
    fn reached(&self, _: PublishStep, _: &TargetId, _: u64) {}

    fn observes(&self) -> bool {
        false
    }
}
