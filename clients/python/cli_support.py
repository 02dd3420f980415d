"""Test support: a scratch store and runtime root driven through the real `solewriter` binary.

The binary is `$SOLEWRITER_BIN`, or `target/debug/solewriter` at the repository root (build it
with `cargo build -p solewriter-cli`). A missing binary fails the tests that need it, loudly.
Two states the CLI cannot make are made behind its back, as an operator's mistake would: a
stored envelope that is not JSON (written into the store with `sqlite3`) and a channel that
is no longer registered (dropped from the scratch's `sw.toml`).
"""

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(REPO, "clients", "testdata")
VECTOR_TUPLE = {
    "schemaVersion": "1",
    "capability": "hook-projection",
    "agentId": "agent-7",
    "harnessType": "claude-code",
    "instanceKeyDigest": "inst-1",
    "workspaceKeyDigest": "ws-1",
    "projectionKind": "live-lane",
}
VECTOR_ID = "29a47a1e0854db43f7fb283e889c03c45ccfaf73f15385d8c69120edad6cb06a"


def binary():
    """Path of the solewriter binary; raises if it was not built."""
    path = os.environ.get("SOLEWRITER_BIN") or os.path.join(REPO, "target", "debug", "solewriter")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} not found: run `cargo build -p solewriter-cli` first")
    return path


def load_cases():
    """The shared hand-made documents of `clients/testdata/documents.json`."""
    with open(os.path.join(TESTDATA, "documents.json"), encoding="utf-8") as f:
        return json.load(f)


class Scratch:
    """A temporary directory with a config, an initialized store and a runtime root."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.runtime_root = os.path.join(self.dir, "runtime")
        shutil.copyfile(os.path.join(TESTDATA, "sw.toml"), os.path.join(self.dir, "sw.toml"))
        self.run("init")

    def close(self):
        """Removes the directory."""
        self._tmp.cleanup()

    def command(self, *args):
        """The argv of `solewriter --config sw.toml ARGS…` (run in `self.dir`)."""
        return [binary(), "--config", "sw.toml", *args]

    def run(self, *args, check=True):
        """Runs the CLI; returns the CompletedProcess (stdout text)."""
        return subprocess.run(
            self.command(*args), cwd=self.dir, capture_output=True, text=True, check=check
        )

    def admit(self, attested_tuple):
        """Admits the tuple; returns the target id the CLI derived."""
        return self.run("admit", json.dumps(attested_tuple)).stdout.strip()

    def submit(self, target, channel, producer, watermark, envelope, captured_at, expires_in_ms):
        """Submits one envelope (a dict) to a channel."""
        self.run(
            "submit", "--producer", producer, "--target", target, "--channel", channel,
            "--watermark", str(watermark), "--envelope", json.dumps(envelope),
            "--captured-at", str(captured_at), "--expires-in-ms", str(expires_in_ms),
        )

    def publish(self, target, instance="ops-1"):
        """Publishes the target's document; returns the CLI's `--json` answer."""
        return json.loads(self.run("--json", "publish", target, "--instance", instance).stdout)

    def current_json(self, target):
        """Path of the target's current.json."""
        return os.path.join(self.runtime_root, "hook-projections", target, "current.json")

    def corrupt_envelope(self, target, channel, text="{\"schema\":"):
        """Overwrites the stored envelope of `channel` with `text` (not JSON) in the store."""
        connection = sqlite3.connect(os.path.join(self.dir, "store.sqlite"), timeout=5)
        try:
            with connection:
                changed = connection.execute(
                    "UPDATE HookProjectionChannels SET envelope_json = ? WHERE target_id = ? AND channel = ?",
                    (text, target, channel),
                ).rowcount
        finally:
            connection.close()
        if changed != 1:
            raise RuntimeError(f"no stored row of {channel} to corrupt")

    def unregister(self, channel):
        """Drops `channel` from the scratch's `sw.toml`: its stored row stays, its producer is gone."""
        path = os.path.join(self.dir, "sw.toml")
        with open(path, encoding="utf-8") as f:
            head, *blocks = f.read().split("\n[[channels]]\n")
        kept = [b for b in blocks if not b.startswith(f'name = "{channel}"\n')]
        if len(kept) != len(blocks) - 1:
            raise RuntimeError(f"{channel} is not registered in {path}")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n[[channels]]\n".join([head, *kept]))
