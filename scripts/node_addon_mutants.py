#!/usr/bin/env python3
"""Mutation testing of the Node addon's Rust (bindings/node/src), which only the Node tests run.

    python3 scripts/node_addon_mutants.py [NAME...]

cargo-mutants runs `cargo test`, and the addon has no Rust tests: its behaviour is pinned by
`npm test` in bindings/node. So this script applies, one at a time, the mutants a reviewer
would try on the addon's decisions (each a literal replacement in one file), rebuilds both
addons (`npm run build`, `npm run build:seams`), runs the Node tests, and restores the file. A
mutant is caught when the tests fail. Prints one line per mutant and a summary; exits 1 when a
mutant is missed. Run it from a clean tree (it restores each file it changes, also on Ctrl-C).
"""

import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE = os.path.join(ROOT, "bindings", "node")

# (name, file under bindings/node/src, text, replacement)
MUTANTS = [
    ("credential takes the token as the hash", "store.rs",
     "token_hash: HolderToken::from_hex(&grant.token)\n            .ok_or_else(|| invalid(\"token must be 64 hex characters\"))?\n            .hash(),",
     "token_hash: TokenHash::from_bytes(*HolderToken::from_hex(&grant.token)\n            .ok_or_else(|| invalid(\"token must be 64 hex characters\"))?\n            .as_bytes()),"),
    ("the unused grant is never released", "lib.rs",
     "    !matches!(failure.code, Code::InTransaction | Code::Host)\n}", "    false\n}"),
    ("the unused grant is released after IN_TRANSACTION too", "lib.rs",
     "    !matches!(failure.code, Code::InTransaction | Code::Host)\n}", "    true\n}"),
    ("a zero timing is accepted", "config.rs",
     "    if ms == 0 {", "    if ms == u64::MAX {"),
    ("no ceiling on the lease TTL", "config.rs",
     "if ttl_ms > MAX_LEASE_TTL_MS {", "if ttl_ms > MAX_SAFE {"),
    ("a missing channels answer is no channels", "lib.rs",
     ".ok_or_else(|| {\n                                Failure::new(\n                                    Code::Host,\n                                    \"`readChannels` answered without `channels`\",\n                                )\n                            })?",
     ".unwrap_or_default()"),
    ("the shipped addon honours a chosen token", "lib.rs",
     "        #[cfg(not(feature = \"test-seams\"))]\n        Some(_) => Err(invalid(",
     "        #[cfg(not(feature = \"test-seams\"))]\n        Some(text) => HolderToken::from_hex(&text).ok_or_else(|| invalid(\"x\")),\n        #[cfg(any())]\n        Some(_) => Err(invalid("),
    ("the panic boundary catches nothing", "boundary.rs",
     "    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| Err(internal(payload)))",
     "    let _ = (catch_unwind(|| 0), internal as fn(_) -> _);\n    AssertUnwindSafe(body).0()"),
    ("a panic on the pool is not caught", "turns.rs",
     "            let ran = caught(|| run.with_dependent_mut(|_, running| pool_turn(running)));",
     "            let ran: Result<(), Failure> = Ok(run.with_dependent_mut(|_, running| pool_turn(running)).unwrap_or(()));"),
    ("abandon keeps the run (and its target lock)", "turns.rs",
     "        *lock(&self.state) = State::Answered;", "        drop(lock(&self.state));"),
    ("a store's clock is never asked at a clock step", "config.rs",
     "        host_clock: call.and_then(|c| c.host_clock) == Some(true),",
     "        host_clock: call.and_then(|c| c.host_clock) == Some(false),"),
    ("a clock that failed lets the run go on", "lib.rs",
     "        match stopped {\n            Some(failure) => Err(failure),",
     "        match stopped.filter(|_| false) {\n            Some(failure) => Err(failure),"),
    ("a hookProjectionRoot is a runtime root", "config.rs",
     "(None, Some(dir)) => RuntimeRoot::projections_at(dir).ok_or_else(|| {",
     "(None, Some(dir)) => Some(RuntimeRoot::new(dir)).ok_or_else(|| {"),
    # Timing only (tests never assert times): the release still happens or fails the same way;
    # kept to show it is known and why it survives.
    ("the unused grant's release waits a second busy timeout", "lib.rs",
     "FileSteps::new(&config.root, target, &RealFs, &DURABLE, Duration::ZERO)",
     "FileSteps::new(&config.root, target, &RealFs, &DURABLE, config.busy_timeout)"),
    ("a missing timing gets a default", "config.rs",
     "let value = value.ok_or_else(|| bad_config(field, \"missing (there is no default)\"))?;",
     "let value = value.unwrap_or(5000.0);"),
]


# A test run that takes longer than this is stopped and counts as caught (a hang is a failure).
TIMEOUT_S = 600


def run(*command, cwd=NODE):
    """The command's exit status, or "timeout" (its whole process group is then killed)."""
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        return child.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        return "timeout"


def tests():
    return run("node", "--test", *sorted(
        os.path.join("test", t) for t in os.listdir(os.path.join(NODE, "test")) if t.endswith(".test.js")
    ))


def main():
    # SIGTERM restores the mutated file too (the `finally` below runs).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    wanted = set(sys.argv[1:])
    # The unmutated code must pass first, or every mutant would look caught (no strace, say).
    if run("npm", "run", "build") != 0 or run("npm", "run", "build:seams") != 0 or tests() != 0:
        print("the unmutated addon fails its tests: nothing to measure", flush=True)
        return 2
    missed, caught = [], []
    for name, file, text, replacement in MUTANTS:
        if wanted and name not in wanted:
            continue
        path = os.path.join(NODE, "src", file)
        with open(path) as f:
            original = f.read()
        if original.count(text) != 1:
            print(f"STALE  {name}: the text to mutate is not in {file} exactly once", flush=True)
            missed.append(name)
            continue
        try:
            with open(path, "w") as f:
                f.write(original.replace(text, replacement))
            if run("npm", "run", "build") != 0 or run("npm", "run", "build:seams") != 0:
                print(f"UNVIABLE {name}: does not build", flush=True)
                continue
            outcome = tests()
            failed = outcome != 0
        finally:
            with open(path, "w") as f:
                f.write(original)
        (caught if failed else missed).append(name)
        how = f" (the tests hung: stopped after {TIMEOUT_S} s)" if outcome == "timeout" else ""
        print(f"{'caught' if failed else 'MISSED'} {name}{how}", flush=True)
    run("npm", "run", "build")
    run("npm", "run", "build:seams")
    print(f"{len(caught)} caught, {len(missed)} missed of {len(caught) + len(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
