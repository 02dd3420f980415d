"""Cross-language test: Rust publishers churn while a Python and a Node reader check every
document they see.

Two `solewriter holder` processes contend for the target's lease and publish in a loop while a
producer keeps submitting envelopes of varying size through `solewriter submit`. A Python reader
(`churn_reader.py`) and a Node reader (`clients/node/churn-reader.js`) read `current.json` in a
tight loop. Synchronisation is by pipes and files only: the churn starts once both readers
printed `ready` (they read a first document), and they stop once they have seen the final
epoch written to a stop file. Each reader must report zero errors (torn, invalid, absent, …),
zero epoch regressions and at least MIN_EPOCHS distinct epochs.
"""

import json
import os
import subprocess
import sys
import threading
import unittest

import solewriter_reader as r
from cli_support import REPO, VECTOR_TUPLE, Scratch

PUBLICATIONS = int(os.environ.get("CHURN_PUBLICATIONS", "200"))
MIN_EPOCHS = PUBLICATIONS // 10
HERE = os.path.dirname(os.path.abspath(__file__))


class Holder:
    """One `solewriter holder` process, driven a line at a time."""

    def __init__(self, env, target, instance):
        self.proc = subprocess.Popen(
            env.command("holder", "--target", target, "--instance", instance),
            cwd=env.dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def ask(self, command):
        """Sends one command; returns its one-line answer."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def churn(self, remaining, published, lock, failures):
        """Acquires and publishes until `remaining` publications were made by all holders;
        an unexpected answer ends the loop and is appended to `failures`."""
        try:
            self._churn(remaining, published, lock)
        except AssertionError as e:
            failures.append(str(e))

    def _churn(self, remaining, published, lock):
        while True:
            with lock:
                if published[0] >= remaining:
                    return
            answer = self.ask("acquire")
            if not answer.startswith("acquired"):
                continue
            answer = self.ask("publish")
            assert answer.startswith("published"), answer
            with lock:
                published[0] += 1

    def quit(self):
        """Ends the process."""
        assert self.ask("quit") == "bye"
        self.proc.stdin.close()
        self.proc.stdout.close()
        assert self.proc.wait() == 0


class CrossLanguageTest(unittest.TestCase):
    def test_readers_see_only_whole_documents_and_rising_epochs(self):
        env = Scratch()
        self.addCleanup(env.close)
        target = env.admit(VECTOR_TUPLE)
        envelope = {"schema": "computed-route.v1", "notAuthority": True, "pad": ""}
        env.submit(target, "computed-route", "router", 1, envelope, 1, 3_600_000)
        env.publish(target)
        stop_file = os.path.join(env.dir, "stop")
        tuple_json = json.dumps(VECTOR_TUPLE)
        readers = {
            "python": [sys.executable, os.path.join(HERE, "churn_reader.py")],
            "node": ["node", os.path.join(REPO, "clients", "node", "churn-reader.js")],
        }
        procs = {}
        for name, argv in readers.items():
            procs[name] = subprocess.Popen(
                argv + [env.runtime_root, tuple_json, stop_file],
                cwd=HERE, stdout=subprocess.PIPE, text=True,
            )
            self.addCleanup(procs[name].wait)
            self.addCleanup(procs[name].stdout.close)
            self.addCleanup(procs[name].kill)
        for name, proc in procs.items():
            self.assertEqual(proc.stdout.readline().strip(), "ready", name)

        holders = [Holder(env, target, f"holder-{i}") for i in range(2)]
        published, lock, failures = [0], threading.Lock(), []
        threads = [
            threading.Thread(target=h.churn, args=(PUBLICATIONS, published, lock, failures))
            for h in holders
        ]
        for t in threads:
            t.start()
        watermark = 1
        while any(t.is_alive() for t in threads):
            watermark += 1
            envelope["pad"] = "x" * (watermark * 97 % 4000)
            submitted = env.run(
                "submit", "--producer", "router", "--target", target, "--channel",
                "computed-route", "--watermark", str(watermark), "--envelope", json.dumps(envelope),
                "--captured-at", str(watermark), "--expires-in-ms", "3600000", check=False,
            )
            # 6: the store was busy (retry later); the watermark is simply skipped.
            self.assertIn(submitted.returncode, (0, 6), submitted.stderr)
        for t in threads:
            t.join()
        self.assertEqual(failures, [])
        for h in holders:
            h.quit()

        final = r.read_current(env.runtime_root, VECTOR_TUPLE).document["fencingEpoch"]
        with open(stop_file + ".tmp", "w", encoding="utf-8") as f:
            f.write(str(final))
        os.rename(stop_file + ".tmp", stop_file)
        for name, proc in procs.items():
            counts = json.loads(proc.stdout.readline())
            self.assertEqual(proc.wait(), 0, name)
            print(f"\ncross-language {name}: {counts} (publications {published[0]}, "
                  f"submissions {watermark - 1}, final epoch {final})", file=sys.stderr)
            self.assertEqual(counts["errors"], {}, name)
            self.assertEqual(counts["regressions"], 0, name)
            self.assertEqual(counts["lastEpoch"], final, name)
            self.assertGreaterEqual(counts["epochs"], MIN_EPOCHS, name)
        self.assertGreaterEqual(published[0], PUBLICATIONS)


if __name__ == "__main__":
    unittest.main()
