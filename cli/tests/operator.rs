//! The operator's commands across real processes: `lease end` (a holder process is fenced
//! and writes nothing; a lease with no live grant has nothing to end) and `lock clear` (only
//! an unknown owner's record, only with its nonce).
//!
//! Holders share one broker clock that only the test moves (`Env::clocked`); nothing waits
//! for a real deadline.

mod support;

use serde_json::Value;
use support::*;

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The holder process acquires, the operator ends its grant, and the holder's publication is
/// refused as fenced: `current.json` stays byte for byte the earlier publication. Ending
/// again finds the lease released (exit 0, nothing written), and the next grant's epoch is
/// higher than the ended one.
#[test]
fn lease_end_fences_the_holder_process_and_leaves_current_json_untouched() {
    let env = Env::clocked(LONG_LEASE);
    assert!(env
        .submit("router", "computed-route", "1", "a")
        .status
        .success());
    env.ok(&["publish", TARGET, "--instance", "first"]);
    let before = std::fs::read(env.current()).unwrap();
    let mut a = env.holder("a", &[]);
    expect_answer(&a.ask("acquire"), "acquired 2", &"acquire");
    let out = env.ok(&["lease", "end", TARGET]);
    assert!(
        out.starts_with(&format!(
            "ended epoch 2 of target {TARGET}, held by a until "
        )),
        "{out}"
    );
    assert!(out.contains("the holder is fenced"), "{out}");
    assert_eq!(a.ask("publish"), "fenced released");
    assert_eq!(
        std::fs::read(env.current()).unwrap(),
        before,
        "the fenced holder wrote nothing"
    );
    let again = json(&env.ok(&["--json", "lease", "end", TARGET]));
    assert_eq!(again["ended"], false, "{again}");
    assert_eq!(again["found"], "released", "{again}");
    assert_eq!(again["fencingEpoch"], 2, "{again}");
    expect_answer(&a.ask("acquire"), "acquired 3", &"the next grant");
    let ended = json(&env.ok(&["lease", "end", TARGET, "--json"]));
    assert_eq!(
        (&ended["ended"], &ended["found"], &ended["fencingEpoch"]),
        (&Value::Bool(true), &"held".into(), &3.into()),
        "{ended}"
    );
    assert_eq!(ended["holder"], "a", "{ended}");
    assert_eq!(a.ask("release"), "not-holder released");
    a.quit();
}

/// A lease never granted, and an expired one, have nothing to end: exit 0, the state named,
/// nothing written (the expired holder stays fenced as expired, not released). A target
/// never admitted is refused (exit 5), as is a malformed target id.
#[test]
fn lease_end_of_a_free_or_expired_lease_ends_nothing_and_an_unknown_target_is_refused() {
    let env = Env::clocked(LONG_LEASE);
    assert_eq!(
        env.ok(&["lease", "end", TARGET]).trim(),
        format!(
            "nothing held: the lease of target {TARGET} is unheld at epoch 0; nothing was written"
        )
    );
    let mut a = env.holder("a", &[]);
    let answer = a.ask("acquire");
    expect_answer(&answer, "acquired 1", &"acquire");
    env.expire(word(&answer, 2));
    let out = json(&env.ok(&["--json", "lease", "end", TARGET]));
    assert_eq!(
        (&out["ended"], &out["found"], &out["fencingEpoch"]),
        (&Value::Bool(false), &"expired".into(), &1.into()),
        "{out}"
    );
    assert_eq!(a.ask("publish"), "fenced expired");
    let inspect = json(&env.ok(&["--json", "inspect", TARGET]));
    assert_eq!(inspect["targets"][0]["state"], "released", "{inspect}");
    a.quit();
    env.fails(
        &["lease", "end", &"e".repeat(64)],
        5,
        "is not admitted; nothing was written",
    );
    env.fails(&["lease", "end", "nope"], 5, "target id `nope` refused");
}
