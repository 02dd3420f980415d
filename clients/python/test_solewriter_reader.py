"""Tests of the Python reference reader: hand-made documents (every error type, the shared
cases of `clients/testdata/documents.json`, checked against solewriter's own parser too), the
status and coverage at the reader's clock, the target_id vector of docs/format.md, symlinks, the size
bound, and documents published by the real CLI.
"""

import base64
import json
import os
import subprocess
import tempfile
import time
import unittest

import solewriter_reader as r
from cli_support import VECTOR_ID, VECTOR_TUPLE, Scratch, load_cases

CASES = load_cases()


def case_bytes(case):
    """The bytes of a shared case."""
    if "textBase64" in case:
        return base64.b64decode(case["textBase64"])
    return case["text"].encode("utf-8")


def verdict(data, target):
    """`ok` or the error code of parsing `data` for `target`."""
    return outcome(data, target)[0]


def outcome(data, target):
    """(`ok`, None) or (the error code, the error message) of parsing `data` for `target`."""
    try:
        r.parse_document(data, target)
        return "ok", None
    except r.ReaderError as e:
        return e.code, str(e)


def status(name, reason):
    """One channel's entry of `status_at`."""
    return {"status": name, "reason": reason}


FRESH = status("fresh", None)
STALE = status("stale", "expired")
CONFLICT = status("degraded", "source-conflict")
CORRUPT = status("degraded", "corrupt-envelope")


def plant(root, target, data):
    """Writes `data` as the target's current.json under `root`; returns its path."""
    directory = os.path.join(root, "hook-projections", target)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "current.json")
    with open(path, "wb") as f:
        f.write(data)
    return path


class TargetIdTest(unittest.TestCase):
    def test_readme_vector(self):
        self.assertEqual(
            r.canonical_bytes(VECTOR_TUPLE),
            b"solewriter.target.v1\nschemaVersion=1:1\ncapability=15:hook-projection\n"
            b"agentId=7:agent-7\nharnessType=11:claude-code\ninstanceKeyDigest=6:inst-1\n"
            b"workspaceKeyDigest=4:ws-1\nprojectionKind=9:live-lane\n",
        )
        self.assertEqual(r.target_id(VECTOR_TUPLE), VECTOR_ID)

    def test_lengths_are_utf8_bytes(self):
        tuple_ = dict(VECTOR_TUPLE, agentId="é")
        self.assertIn("agentId=2:é\n".encode(), r.canonical_bytes(tuple_))

    def test_refused_tuples(self):
        refused = {
            "session id": dict(VECTOR_TUPLE, sessionId="s"),
            "path": dict(VECTOR_TUPLE, path="/x"),
            "field absent": {k: v for k, v in VECTOR_TUPLE.items() if k != "agentId"},
            "not a string": dict(VECTOR_TUPLE, agentId=7),
            "empty": dict(VECTOR_TUPLE, agentId=""),
            "257 bytes": dict(VECTOR_TUPLE, agentId="a" * 257),
            "control character": dict(VECTOR_TUPLE, agentId="a\u0085"),
            "lone surrogate": dict(VECTOR_TUPLE, agentId="\udc00"),
            "not an object": ["1"],
        }
        for name, tuple_ in refused.items():
            with self.subTest(name), self.assertRaises(r.InvalidTuple) as caught:
                r.target_id(tuple_)
            self.assertEqual(caught.exception.code, "invalid-tuple")
        r.target_id(dict(VECTOR_TUPLE, agentId="a" * 256))

    def test_current_path_refuses_a_path_for_a_target(self):
        for bad in ["../x", VECTOR_ID.upper(), VECTOR_ID[:63], "../" + VECTOR_ID[3:]]:
            with self.subTest(bad), self.assertRaises(r.InvalidTuple):
                r.current_path("root", bad)
        self.assertEqual(
            r.current_path("root", VECTOR_ID),
            os.path.join("root", "hook-projections", VECTOR_ID, "current.json"),
        )


class DocumentTest(unittest.TestCase):
    def test_shared_cases(self):
        for case in CASES["cases"]:
            with self.subTest(case["name"]):
                code, message = outcome(case_bytes(case), CASES["targetId"])
                self.assertEqual(code, case["expect"], message)
                if code != "ok":
                    self.assertIn(case["error"], message)

    def test_every_refused_case_says_why(self):
        for case in CASES["cases"]:
            with self.subTest(case["name"]):
                self.assertEqual("error" in case, case["expect"] != "ok")

    def test_size_bound(self):
        doc = case_bytes(CASES["cases"][0])
        at_bound = doc + b" " * (r.MAX_DOCUMENT_BYTES - len(doc))
        self.assertEqual(verdict(at_bound, VECTOR_ID), "ok")
        self.assertEqual(verdict(at_bound + b" ", VECTOR_ID), "too-large")

    def test_status_is_the_readers(self):
        doc = r.parse_document(case_bytes(CASES["cases"][0]), VECTOR_ID)
        expires = doc["channels"][0]["expiresAt"]
        self.assertGreater(expires, doc["publishedAt"])
        published = {
            "computed-route": FRESH, "lifecycle-frontier": STALE, "old-notes": CONFLICT, "route-plan": CORRUPT,
        }
        self.assertEqual({c["channel"]: status(c["status"], c["reason"]) for c in doc["channels"]}, published)
        self.assertEqual(r.status_at(doc, doc["publishedAt"]), published)
        self.assertEqual(r.status_at(doc, expires - 1), published)
        # expiresAt == now is stale: the boundary.
        self.assertEqual(r.status_at(doc, expires), dict(published, **{"computed-route": STALE}))
        # Published stale stays stale, degraded stays degraded, at any clock (even behind
        # publishedAt, where the stale channel's expiresAt is still ahead).
        self.assertEqual(r.status_at(doc, 0), published)
        later = r.status_at(doc, r.U64_MAX)
        self.assertEqual(later, dict(published, **{"computed-route": STALE}))
        route_plan = doc["channels"][3]
        self.assertEqual(r.status_at(doc, route_plan["expiresAt"] - 1)["route-plan"], CORRUPT)

    def test_coverage_is_the_readers(self):
        doc = r.parse_document(case_bytes(CASES["cases"][0]), VECTOR_ID)
        expires = doc["channels"][0]["expiresAt"]
        published = {"registered": 5, "fresh": 1, "stale": 1, "degraded": 2, "missing": 2, "unregistered": 1}
        self.assertEqual(doc["coverage"], published)
        self.assertEqual(r.coverage_at(doc, expires - 1), published)
        self.assertEqual(r.coverage_at(doc, 0), published)
        self.assertEqual(r.coverage_at(doc, expires), dict(published, fresh=0, stale=2))
        self.assertEqual(list(r.coverage_at(doc, 0)), list(r.COVERAGE_KEYS))
        self.assertEqual(doc["coverage"], published, "coverage_at leaves the document as published")

    def test_a_v1_document_is_refused_naming_the_format_expected(self):
        v1 = next(c for c in CASES["cases"] if c["name"] == "a v1 document")
        with self.assertRaises(r.InvalidDocument) as caught:
            r.parse_document(case_bytes(v1), VECTOR_ID)
        self.assertIn(r.FORMAT, str(caught.exception))
        self.assertEqual(r.FORMAT, "solewriter.hook-projection.v2")


class FileTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.root = self._tmp.name
        self.doc = case_bytes(CASES["cases"][0])

    def tearDown(self):
        self._tmp.cleanup()

    def code(self, root=None):
        try:
            r.read_current(self.root if root is None else root, VECTOR_TUPLE, now_ms=0)
            return "ok"
        except r.ReaderError as e:
            self.assertEqual(e.path, r.current_path(self.root if root is None else root, VECTOR_ID))
            self.assertIn(e.path, str(e))
            return e.code

    def test_reads_a_planted_document_with_the_readers_clock(self):
        plant(self.root, VECTOR_ID, self.doc)
        reading = r.read_current(self.root, VECTOR_TUPLE, now_ms=1796016002883)
        self.assertEqual(reading.target_id, VECTOR_ID)
        self.assertEqual(reading.path, r.current_path(self.root, VECTOR_ID))
        self.assertEqual(reading.read_at_ms, 1796016002883)
        self.assertEqual(
            reading.status,
            {"computed-route": STALE, "lifecycle-frontier": STALE, "old-notes": CONFLICT, "route-plan": CORRUPT},
        )
        self.assertEqual(
            reading.coverage,
            {"registered": 5, "fresh": 0, "stale": 2, "degraded": 2, "missing": 2, "unregistered": 1},
        )
        just_before = r.read_current(self.root, VECTOR_TUPLE, now_ms=1796016002882)
        self.assertEqual(just_before.status["computed-route"], FRESH)
        self.assertEqual(reading.document, json.loads(self.doc))
        before = int(time.time() * 1000)
        self.assertGreaterEqual(r.read_current(self.root, VECTOR_TUPLE).read_at_ms, before)

    def test_absent(self):
        self.assertEqual(self.code(os.path.join(self.root, "no-such-root")), "absent")
        self.assertEqual(self.code(), "absent")
        os.makedirs(os.path.join(self.root, "hook-projections", VECTOR_ID))
        self.assertEqual(self.code(), "absent")

    def test_invalid_foreign_and_too_large_carry_the_path(self):
        plant(self.root, VECTOR_ID, self.doc[:100])
        self.assertEqual(self.code(), "invalid")
        plant(self.root, VECTOR_ID, self.doc.replace(VECTOR_ID.encode(), b"0" * 64))
        self.assertEqual(self.code(), "foreign")
        plant(self.root, VECTOR_ID, self.doc + b" " * r.MAX_DOCUMENT_BYTES)
        self.assertEqual(self.code(), "too-large")

    def test_reads_at_most_one_byte_past_the_bound(self):
        path = plant(self.root, VECTOR_ID, b"")
        with open(path, "wb") as f:
            f.truncate(r.MAX_DOCUMENT_BYTES * 2)
        self.assertEqual(len(r.read_bytes(self.root, VECTOR_ID)), r.MAX_DOCUMENT_BYTES + 1)

    def test_symlinked_current_json_is_refused(self):
        elsewhere = plant(os.path.join(self.root, "elsewhere"), VECTOR_ID, self.doc)
        os.makedirs(os.path.join(self.root, "hook-projections", VECTOR_ID))
        os.symlink(elsewhere, r.current_path(self.root, VECTOR_ID))
        self.assertEqual(self.code(), "unsafe-path")

    def test_symlinked_target_directory_is_refused(self):
        elsewhere = plant(os.path.join(self.root, "elsewhere"), VECTOR_ID, self.doc)
        os.makedirs(os.path.join(self.root, "hook-projections"))
        os.symlink(os.path.dirname(elsewhere), os.path.join(self.root, "hook-projections", VECTOR_ID))
        self.assertEqual(self.code(), "unsafe-path")

    def test_symlinked_projections_directory_is_refused(self):
        elsewhere = plant(os.path.join(self.root, "elsewhere"), VECTOR_ID, self.doc)
        os.symlink(os.path.dirname(os.path.dirname(elsewhere)), os.path.join(self.root, "hook-projections"))
        self.assertEqual(self.code(), "unsafe-path")

    def test_a_fifo_or_directory_is_not_read(self):
        directory = os.path.join(self.root, "hook-projections", VECTOR_ID)
        os.makedirs(directory)
        os.mkfifo(os.path.join(directory, "current.json"))
        self.assertEqual(self.code(), "unsafe-path")
        os.remove(os.path.join(directory, "current.json"))
        os.mkdir(os.path.join(directory, "current.json"))
        self.assertEqual(self.code(), "unsafe-path")

    @unittest.skipIf(os.geteuid() == 0, "root reads any file")
    def test_unreadable_is_io(self):
        path = plant(self.root, VECTOR_ID, self.doc)
        os.chmod(path, 0)
        self.assertEqual(self.code(), "io")


class PublishedByTheCliTest(unittest.TestCase):
    """Documents published by the real `solewriter` binary."""

    def setUp(self):
        self.env = Scratch()
        self.target = self.env.admit(VECTOR_TUPLE)

    def tearDown(self):
        self.env.close()

    def test_not_published_then_published_then_foreign(self):
        with self.assertRaises(r.NotPublished):
            r.read_current(self.env.runtime_root, VECTOR_TUPLE)
        now = int(time.time() * 1000)
        self.env.submit(self.target, "computed-route", "router", 1,
                        {"schema": "computed-route.v1", "notAuthority": True, "steps": ["plan"]},
                        now, 3_600_000)
        answer = self.env.publish(self.target)
        reading = r.read_current(self.env.runtime_root, VECTOR_TUPLE, now_ms=now)
        doc = reading.document
        self.assertEqual(self.target, reading.target_id)
        self.assertEqual(doc["fencingEpoch"], answer["fencingEpoch"])
        self.assertEqual(doc["missing"], ["lifecycle-frontier"])
        self.assertEqual(doc["channels"][0]["envelope"]["steps"], ["plan"])
        self.assertEqual(doc["producerWatermarks"], {"router": {"computed-route": 1}})
        self.assertEqual(reading.status, {"computed-route": FRESH})
        coverage = {"registered": 2, "fresh": 1, "stale": 0, "degraded": 0, "missing": 1, "unregistered": 0}
        self.assertEqual(doc["coverage"], coverage)
        self.assertEqual(reading.coverage, coverage)
        later = r.read_current(self.env.runtime_root, VECTOR_TUPLE, now_ms=now + 3_600_000)
        self.assertEqual(later.status, {"computed-route": STALE})
        self.assertEqual(later.coverage, dict(coverage, fresh=0, stale=1))
        other = dict(VECTOR_TUPLE, agentId="agent-8")
        other_dir = os.path.dirname(r.current_path(self.env.runtime_root, r.target_id(other)))
        os.makedirs(other_dir)
        os.link(self.env.current_json(self.target), os.path.join(other_dir, "current.json"))
        with self.assertRaises(r.ForeignDocument):
            r.read_current(self.env.runtime_root, other)

    def test_a_corrupt_envelope_degrades_its_channel_alone(self):
        now = int(time.time() * 1000)
        route = {"schema": "computed-route.v1", "notAuthority": True, "steps": ["plan"]}
        self.env.submit(self.target, "computed-route", "router", 1, route, now, 3_600_000)
        self.env.submit(self.target, "lifecycle-frontier", "lifecycle", 2,
                        {"schema": "lifecycle-frontier.v1", "notAuthority": True}, now, 3_600_000)
        self.env.corrupt_envelope(self.target, "lifecycle-frontier")
        self.env.publish(self.target)
        reading = r.read_current(self.env.runtime_root, VECTOR_TUPLE, now_ms=now)
        route_channel, frontier = reading.document["channels"]
        self.assertEqual((route_channel["status"], route_channel["envelope"]), ("fresh", route))
        self.assertEqual((frontier["status"], frontier["reason"], frontier["envelope"]),
                         ("degraded", "corrupt-envelope", None))
        self.assertEqual(reading.status, {"computed-route": FRESH, "lifecycle-frontier": CORRUPT})
        self.assertEqual(
            reading.document["producerWatermarks"],
            {"lifecycle": {"lifecycle-frontier": 2}, "router": {"computed-route": 1}},
        )
        self.assertEqual(
            reading.coverage,
            {"registered": 2, "fresh": 1, "stale": 0, "degraded": 1, "missing": 0, "unregistered": 0},
        )

    def test_shared_cases_agree_with_solewriters_own_parser(self):
        """`solewriter read` (the Rust reader) gives the verdict the cases' `rust` field says."""
        path = self.env.current_json(self.target)
        os.makedirs(os.path.dirname(path))
        exits = {"ok": 0, "invalid": 11, "foreign": 11}
        for case in CASES["cases"]:
            with self.subTest(case["name"]):
                with open(path, "wb") as f:
                    f.write(case_bytes(case))
                code = self.env.run("read", self.target, check=False).returncode
                self.assertEqual(code, exits[case.get("rust", case["expect"])])


if __name__ == "__main__":
    unittest.main()
