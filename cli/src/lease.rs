//! `solewriter lease end TARGET`: an operator ends the target's current grant, whoever holds
//! it. The store decides and writes in one serialized transaction
//! (`ProjectionStore::end_lease`): a live grant is released at its epoch, so its holder's next
//! publication or release is refused as fenced and writes nothing, and the next grant gets a
//! higher epoch. An expired grant has no live holder, but it is marked released all the same,
//! so that a broker clock set back cannot make it live again. A lease that is unheld or
//! released has nothing to end: nothing is written. Every case succeeds (what was asked for —
//! no live grant, now or after any clock step — holds).

use crate::config::Settings;
use crate::error::CliResult;
use crate::parse_target;
use crate::say;
use crate::time::rfc3339;
use serde_json::json;
use solewriter::{EndOutcome, ProjectionStore};

/// Ends the current grant of `target` and says what it did.
pub fn end(settings: &Settings, target: &str, as_json: bool) -> CliResult<()> {
    let target = parse_target(target)?;
    let store = ProjectionStore::open(&settings.store_options()?)?;
    match store.end_lease(&target)? {
        EndOutcome::Ended(plan) => {
            let epoch = plan.release.epoch;
            let grant = &plan.grant;
            if as_json {
                say!(
                    "{}",
                    json!({
                        "targetId": target,
                        "ended": true,
                        "found": "held",
                        "fencingEpoch": epoch,
                        "holder": grant.holder_instance_digest,
                        "expiresAt": grant.expires_at,
                        "expiresAtRfc3339": rfc3339(grant.expires_at),
                    })
                );
            } else {
                say!(
                    "ended epoch {epoch} of target {target}, held by {} until {}: the holder is fenced (its next publish or release is refused and writes nothing); the next grant gets a higher epoch",
                    grant.holder_instance_digest,
                    rfc3339(grant.expires_at)
                );
            }
        }
        EndOutcome::Closed(plan) => {
            let epoch = plan.release.epoch;
            if as_json {
                say!("{}", nothing_ended(&target, "expired", epoch));
            } else {
                say!(
                    "nothing held: the lease of target {target} is expired at epoch {epoch}; marked released, so a clock set back cannot revive it"
                );
            }
        }
        EndOutcome::NothingHeld { epoch, why } => {
            if as_json {
                say!("{}", nothing_ended(&target, why.name(), epoch));
            } else {
                say!(
                    "nothing held: the lease of target {target} is {} at epoch {epoch}; nothing was written",
                    why.name()
                );
            }
        }
    }
    Ok(())
}

/// The JSON answer when no live grant was ended (`found`: the lease state found).
fn nothing_ended(target: &impl serde::Serialize, found: &str, epoch: u64) -> serde_json::Value {
    json!({
        "targetId": target,
        "ended": false,
        "found": found,
        "fencingEpoch": epoch,
        "holder": null,
        "expiresAt": null,
        "expiresAtRfc3339": null,
    })
}
