//! The demo's subtree write guard section: two agents edit one in-memory component tree
//! through the host path (a Bridge frame parsed, the write admitted by the guard, and only
//! then "mutated"): an overlapping write of the other agent is denied with a copy of the held
//! lock, a disjoint one is admitted beside it, and the disconnect sweep frees the first agent's
//! locks and refuses its write still in flight.

use super::Tally;
use crate::error::{Class, CliError, CliResult};
use crate::say;
use solewriter::subtree::{
    admit_write, parse_bridge_frame, Admitted, BridgeFrame, Envelope, Parent, WriteDenied,
    WriteGuard,
};

/// app ─┬─ panel ─┬─ left ── button
///      │         └─ right
///      └─ toolbar
fn tree(id: &str) -> Parent<'static> {
    match id {
        "app" => Parent::Root,
        "panel" | "toolbar" => Parent::Id("app"),
        "left" | "right" => Parent::Id("panel"),
        "button" => Parent::Id("left"),
        _ => Parent::Unknown,
    }
}

fn frame(agent: &str, session: &str, id: &str) -> String {
    format!(
        r#"{{"type":"agent_message","agentId":"{agent}","sessionId":"{session}","message":{{"jsonrpc":"2.0","id":1,"method":"set_instance_properties","params":{{"id":"{id}"}}}}}}"#
    )
}

fn refused(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::new(Class::Invariant, format!("{what}: {e}"))
}

/// Parses an agent's write frame (the part of the host path before admission).
fn parse(agent: &str, session: &str, id: &str) -> CliResult<Envelope> {
    match parse_bridge_frame(&frame(agent, session, id)) {
        Ok(BridgeFrame::Message(envelope)) => Ok(envelope),
        Ok(BridgeFrame::Disconnected(_)) => Err(refused("a write frame", "read as a disconnect")),
        Err(e) => Err(refused("a write frame", e)),
    }
}

/// Admits a parsed write of component `id`, printing the answer.
fn admit(guard: &WriteGuard, envelope: &Envelope, id: &str) -> Result<Admitted, WriteDenied> {
    let who = envelope
        .context
        .as_ref()
        .and_then(|c| c.writer())
        .map_or_else(|| "legacy".to_owned(), |w| w.to_string());
    let answer = admit_write(envelope.context.as_ref(), id, tree, Some(guard));
    match &answer {
        Ok(admitted) => say!(
            "   {who} writes `{id}`: {} ({})",
            admitted.reason(),
            admitted
                .lock()
                .map_or_else(String::new, |l| l.path.to_string())
        ),
        Err(denied) => say!(
            "   {who} writes `{id}`: denied {} ({denied})",
            denied.reason()
        ),
    }
    answer
}

/// Runs the section; counts admitted and denied writes in `t`.
pub(super) fn run(t: &mut Tally) -> CliResult<()> {
    say!("\n10. The subtree write guard: two agents edit one component tree");
    let guard = WriteGuard::new();
    let first = admit(&guard, &parse("agent-a", "s1", "left")?, "left");
    t.check(
        matches!(&first, Ok(Admitted::Granted(l)) if l.path.to_string() == "/app/panel/left"),
        "agent-a#s1 is admitted and holds the subtree /app/panel/left",
    );
    let held = guard.snapshot().map_err(|e| refused("snapshot", e))?;
    let overlap = admit(&guard, &parse("agent-b", "s2", "button")?, "button");
    t.check(
        matches!(&overlap, Err(WriteDenied::Conflict { held: copy, .. }) if held.contains(copy)),
        "agent-b#s2's write inside it is denied `conflict`, with a copy of the held lock",
    );
    t.check(
        guard.snapshot().map_err(|e| refused("snapshot", e))? == held,
        "the denial left the held locks unchanged",
    );
    let beside = admit(&guard, &parse("agent-b", "s2", "toolbar")?, "toolbar");
    t.check(
        matches!(beside, Ok(Admitted::Granted(_))),
        "agent-b#s2's write of a disjoint subtree is admitted beside it",
    );
    // agent-a's next write is parsed (in flight) before its connection's disconnect frame.
    let in_flight = parse("agent-a", "s1", "right")?;
    let sweep = r#"{"type":"agent_disconnected","agentId":"agent-a","sessionId":"s1"}"#;
    let Ok(BridgeFrame::Disconnected(gone)) = parse_bridge_frame(sweep) else {
        return Err(refused("the disconnect frame", "not read as a disconnect"));
    };
    let swept = guard
        .release_writer(&gone)
        .map_err(|e| refused("the sweep", e))?;
    say!(
        "   agent_disconnected {gone}: {} lock(s) swept",
        swept.len()
    );
    let late = admit(&guard, &in_flight, "right");
    t.check(
        matches!(late, Err(WriteDenied::Disconnected(_))),
        "agent-a#s1's write still in flight after the sweep is denied `writer-disconnected`",
    );
    let after = admit(&guard, &parse("agent-b", "s2", "button")?, "button");
    t.check(
        matches!(after, Ok(Admitted::Granted(_))),
        "the sweep freed agent-a#s1's subtree: agent-b#s2 now writes inside it",
    );
    for answer in [first, overlap, beside, late, after] {
        match answer {
            Ok(_) => t.admitted += 1,
            Err(_) => t.denied += 1,
        }
    }
    Ok(())
}
