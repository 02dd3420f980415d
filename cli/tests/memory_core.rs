//! A store of the Memory Core profile from the command line: `init` makes it from the
//! configuration's `profile`, `admit` prints the Memory Core's 32-hex id, `submit` takes the
//! route producer's `<instant>:<n>` watermarks in their own order and applies the channel's
//! JSON Schema, `publish` needs the consumer binding and writes the Memory Core's document.

mod support;

use support::*;

const PROFILE: &str = "live-lane-awareness-projection.v1";
const BINDING: &str = r#"{"capability":"hook-projection","agentId":"agent-7","harnessType":"claude-code","status":"attested","scopeResolution":"agent-instance","provenance":{"producer":"ops"},"conflicts":[],"assertedAt":"2026-07-28T18:00:00.000Z","expiresAt":"2026-07-28T19:00:00.000Z"}"#;

fn memory_core_env() -> Env {
    let env = Env::with(LONG_LEASE);
    let config = format!(
        r#"store = "store.sqlite"
runtime_root = "runtime"
{LONG_LEASE}
profile = "{PROFILE}"

[[channels]]
name = "computed-route"
owner = "golden-path"
envelope_schema = "computed-route.v1"
max_envelope_bytes = 4096
watermark = "instant-sequence"
envelope_json_schema = '{{"type": "object", "required": ["route"]}}'
"#
    );
    std::fs::write(&env.config, config).unwrap();
    env
}

fn submit(env: &Env, target: &str, watermark: &str, envelope: &str) -> std::process::Output {
    env.run(&[
        "submit",
        "--producer",
        "golden-path",
        "--target",
        target,
        "--channel",
        "computed-route",
        "--watermark",
        watermark,
        "--envelope",
        envelope,
        "--captured-at",
        "1785263340000",
        "--expires-in-ms",
        "4102444800000",
    ])
}

/// Where the target's document is published.
fn current_of(env: &Env, target: &str) -> std::path::PathBuf {
    env.dir
        .path()
        .join(format!("runtime/hook-projections/{target}/current.json"))
}

/// A file holding [`BINDING`], and its path.
fn binding_file(env: &Env) -> String {
    let path = env.dir.path().join("binding.json");
    std::fs::write(&path, BINDING).unwrap();
    path.to_str().unwrap().to_owned()
}

fn route(watermark: &str) -> String {
    format!(
        r#"{{"schemaVersion":"computed-route.v1","sourceWatermark":"{watermark}","notAuthority":true,"route":{{"items":[]}}}}"#
    )
}

#[test]
fn a_memory_core_store_from_the_command_line() {
    let env = memory_core_env();
    assert!(env.ok(&["init"]).starts_with("initialized store"));
    let target = env.ok(&["admit", TUPLE]).trim().to_owned();
    assert_eq!(
        target, "ade4faf905981c8a3abe4c13ef31779f",
        "the Memory Core's own id"
    );
    let (nine, ten) = ("2026-07-28T18:29:00.000Z:9", "2026-07-28T18:29:00.000Z:10");
    for watermark in [nine, ten] {
        let out = submit(&env, &target, watermark, &route(watermark));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // `:9` after `:10` is a regression in the channel's own order (not in text order).
    expect_failure(
        &submit(&env, &target, nine, &route(nine)),
        5,
        "regressed",
        &"nine",
    );
    let no_route = format!(
        r#"{{"schemaVersion":"computed-route.v1","sourceWatermark":"{0}:11","notAuthority":true}}"#,
        "2026-07-28T18:29:00.000Z"
    );
    let eleven = "2026-07-28T18:29:00.000Z:11";
    expect_failure(
        &submit(&env, &target, eleven, &no_route),
        5,
        "JSON Schema refuses it",
        &"no route",
    );
    // No binding: refused, nothing written.
    env.fails(
        &["publish", &target, "--instance", "ops-1"],
        5,
        "consumer binding",
    );
    let current = current_of(&env, &target);
    assert!(!current.exists());
    let binding = binding_file(&env);
    let binding = binding.as_str();
    env.ok(&[
        "publish",
        &target,
        "--instance",
        "ops-1",
        "--consumer-binding-file",
        binding,
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&current).unwrap()).unwrap();
    assert_eq!(doc["schemaVersion"], PROFILE);
    assert_eq!(doc["publication"]["targetId"], target.as_str());
    assert_eq!(
        doc["publication"]["producerWatermarks"]["computed-route"],
        ten
    );
    assert_eq!(doc["consumerBinding"]["agentId"], "agent-7");
    // The store's profile is fixed: a generic `init` over it is refused.
    let generic = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace(&format!("profile = \"{PROFILE}\"\n"), "")
        .replace("watermark = \"instant-sequence\"\n", "");
    std::fs::write(&env.config, generic).unwrap();
    env.fails(&["init"], 4, "profile");
}

/// The scripted `holder` publishes a store of the Memory Core profile with the consumer
/// binding of its `--consumer-binding-file` (without one, its one-shot is refused and
/// nothing is written), and answers `ping` with `pong`.
#[test]
fn the_holder_publishes_a_memory_core_store_with_its_binding() {
    let env = memory_core_env();
    env.ok(&["init"]);
    let target = env.ok(&["admit", TUPLE]).trim().to_owned();
    let watermark = "2026-07-28T18:29:00.000Z:1";
    assert!(submit(&env, &target, watermark, &route(watermark))
        .status
        .success());
    let config = env.config.display().to_string();
    let args = ["holder", "--config", &config, "--target", &target];
    let mut unbound = Holder::command(env.command(), &[&args[..], &["--instance", "a"]].concat());
    assert_eq!(unbound.ask("ping"), "pong");
    let refused = unbound.ask("publish-now");
    assert!(
        refused.starts_with("error") && refused.contains("consumer binding"),
        "{refused}"
    );
    unbound.quit();
    let current = current_of(&env, &target);
    assert!(!current.exists());

    let binding = binding_file(&env);
    let bound_args = ["--instance", "b", "--consumer-binding-file"];
    let binding = binding.as_str();
    let mut bound = Holder::command(
        env.command(),
        &[&args[..], &bound_args, &[binding]].concat(),
    );
    // The refused one-shot granted nothing: the first publication is epoch 1.
    for epoch in [1, 2] {
        let answer = bound.ask("publish-now");
        assert!(
            answer.starts_with(&format!("published {epoch} ")),
            "{answer}"
        );
    }
    assert_eq!(bound.ask("ping"), "pong");
    bound.quit();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&current).unwrap()).unwrap();
    assert_eq!(doc["schemaVersion"], PROFILE);
    assert_eq!(doc["consumerBinding"]["agentId"], "agent-7");

    // A binding file that is not a binding: the holder does not start.
    let bad = env.dir.path().join("bad.json");
    std::fs::write(&bad, "[1]").unwrap();
    let bad = bad.to_str().unwrap();
    let out = env.run(
        &[
            &args[..],
            &["--instance", "c", "--consumer-binding-file", bad],
        ]
        .concat(),
    );
    expect_failure(&out, 5, "nothing was written", &"a bad binding");
    // A binding file that is not there: an I/O failure, and no holder either.
    let missing = env.dir.path().join("missing.json");
    let missing = missing.to_str().unwrap();
    let flags = ["--instance", "d", "--consumer-binding-file", missing];
    let out = env.run(&[&args[..], &flags].concat());
    expect_failure(
        &out,
        7,
        "reading the consumer binding",
        &"a missing binding",
    );
}
