//! The shipped `solewriter` carries no test seam: the flags that park a transaction
//! (`holder --stall-at`, `publish --stall-at`, `submit --stall-before-commit`) are usage errors
//! there, and a `SOLEWRITER_TEST_CLOCK_FILE` in its environment changes no time it reads or
//! writes. The test binary `solewriter-testkit` has all three, so these checks are not vacuous.

mod support;

use serde_json::Value;
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};
use support::*;

/// A clock file's reading far from now: 2100-01-01T00:00:00Z.
const FAR_FUTURE_MS: u64 = 4_102_444_800_000;

fn system_now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_millis()).unwrap()
}

/// The arguments of `command` given one seam flag, for a store that `env` configures.
fn seamed(env: &Env) -> [(Vec<String>, &'static str); 3] {
    let config = env.config.display().to_string();
    let holder = [
        "holder",
        "--config",
        &config,
        "--target",
        TARGET,
        "--instance",
        "a",
    ];
    let mut holder: Vec<String> = holder.map(str::to_owned).to_vec();
    holder.extend(["--stall-at".into(), "composed".into()]);
    let publish = ["--config", &config, "publish", TARGET, "--instance", "a"];
    let mut publish: Vec<String> = publish.map(str::to_owned).to_vec();
    publish.extend(["--stall-at".into(), "composed".into()]);
    let mut submit = vec!["--config".to_owned(), config.clone()];
    submit.extend(submit_args("router", "computed-route", "1", "a"));
    submit.push("--stall-before-commit".into());
    [
        (holder, "unexpected argument '--stall-at'"),
        (publish, "unexpected argument '--stall-at'"),
        (submit, "unexpected argument '--stall-before-commit'"),
    ]
}

#[test]
fn the_shipped_binary_refuses_the_stall_flags() {
    let env = Env::admitted("lease_ttl_ms = 5000\nbusy_timeout_ms = 2000");
    for (args, needle) in seamed(&env) {
        let out = Command::new(EXE).args(&args).output().unwrap();
        expect_failure(&out, 2, needle, &args);
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
    assert!(!env.current().exists(), "nothing was published");
    let inspect: Value = serde_json::from_str(&env.ok(&["--json", "inspect"])).unwrap();
    assert_eq!(inspect["targets"][0]["channels"], Value::Array(vec![]));
    assert_eq!(inspect["targets"][0]["state"], "unheld");
    // The same command lines park in the test binary (ended by closing stdin).
    for (args, _) in seamed(&env) {
        let mut child = Holder::command(Command::new(TESTKIT), &args_of(&args));
        if args[0] == "holder" {
            expect_answer(&child.ask("publish-now"), "stalled composed", &args);
        } else {
            let want = if args.contains(&"submit".to_owned()) {
                "stalled row-written"
            } else {
                "stalled composed"
            };
            assert_eq!(child.recv(), want, "{args:?}");
        }
        child.send("go on");
        drop(child);
    }
    for (binary, has) in [(EXE, false), (TESTKIT, true)] {
        for command in ["holder", "publish", "submit"] {
            let out = Command::new(binary)
                .args([command, "--help"])
                .output()
                .unwrap();
            let help = String::from_utf8_lossy(&out.stdout);
            assert_eq!(help.contains("--stall-"), has, "{binary} {command}: {help}");
        }
    }
}

fn args_of(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `publish --json`, `read --json` and `inspect --json` of `binary` with the clock file set:
/// the publication's time, the released grant's expiry and inspect's `now`.
fn times_with_clock_file(env: &Env, binary: &str) -> [u64; 3] {
    let clock = env.dir.path().join("far-clock");
    std::fs::write(&clock, FAR_FUTURE_MS.to_string()).unwrap();
    let run = |args: &[&str]| -> Value {
        let out: Output = Command::new(binary)
            .env(CLOCK_ENV, &clock)
            .arg("--config")
            .arg(&env.config)
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{binary} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    run(&["publish", TARGET, "--instance", "ops"]);
    let read = run(&["read", TARGET]);
    let inspect = run(&["inspect", TARGET]);
    [
        read["publishedAt"].as_u64().unwrap(),
        inspect["targets"][0]["expiresAt"].as_u64().unwrap(),
        inspect["now"].as_u64().unwrap(),
    ]
}

#[test]
fn the_shipped_binary_ignores_the_clock_file() {
    let ttl = 5_000;
    let env = Env::admitted(&format!("lease_ttl_ms = {ttl}\nbusy_timeout_ms = 2000"));
    let before = system_now_ms();
    let [published, expires, now] = times_with_clock_file(&env, EXE);
    let after = system_now_ms();
    let near = |at: u64, what: &str| {
        assert!(
            (before..=after).contains(&at),
            "{what} {at} is not the system clock's ({before}..={after}): the shipped binary read the clock file"
        );
    };
    near(published, "publishedAt");
    near(
        expires - ttl,
        "the grant's acquiredAt (expiresAt - lease_ttl_ms)",
    );
    near(now, "inspect's now");
    // The test binary does read it.
    let [published, expires, now] = times_with_clock_file(&env, TESTKIT);
    assert_eq!(published, FAR_FUTURE_MS);
    assert_eq!(expires, FAR_FUTURE_MS + ttl);
    assert_eq!(now, FAR_FUTURE_MS);
}
