"""The JSON Schemas of `schema/` against real documents published by the `solewriter` CLI
(every channel status, a withheld corrupt envelope, an unregistered channel), the shared
hand-made documents and attested tuples, checked with `schema_subset.py`."""

import json
import os
import pathlib
import time
import unittest

import schema_subset
import solewriter_reader as r
from cli_support import REPO, VECTOR_TUPLE, Scratch, load_cases
from test_solewriter_reader import case_bytes


def load_schema(name):
    """A schema of the repository's `schema/` folder."""
    with open(os.path.join(REPO, "schema", name), encoding="utf-8") as f:
        return json.load(f)


DOCUMENT = load_schema("current.v2.schema.json")
TUPLE = load_schema("attested-tuple.schema.json")


def schema_verdict(data):
    """`ok` if `data` is JSON valid against the document schema, else `invalid`."""
    try:
        instance = json.loads(data.decode("utf-8"))
    except ValueError:
        return "invalid"
    return "invalid" if schema_subset.errors(DOCUMENT, instance) else "ok"


class SchemaTest(unittest.TestCase):
    def test_documents_published_by_the_cli(self):
        env = Scratch()
        self.addCleanup(env.close)
        target = env.admit(VECTOR_TUPLE)
        path = env.current_json(target)
        seen = []
        now = int(time.time() * 1000)
        route = {"schema": "computed-route.v1", "notAuthority": True, "steps": ["plan", 1.5, None]}
        frontier = {"schema": "lifecycle-frontier.v1", "notAuthority": True}
        env.publish(target)  # no rows: both channels missing
        seen.append(pathlib.Path(path).read_bytes())
        env.submit(target, "computed-route", "router", 1, route, now, 60_000)
        env.submit(target, "lifecycle-frontier", "lifecycle", 4, frontier, now - 10, 5)
        env.publish(target)  # one fresh, one stale
        seen.append(pathlib.Path(path).read_bytes())
        conflict = env.run(
            "submit", "--producer", "router", "--target", target, "--channel", "computed-route",
            "--watermark", "1", "--envelope", json.dumps(dict(route, steps=[])),
            "--captured-at", str(now), "--expires-in-ms", "60000", check=False,
        )
        self.assertEqual(conflict.returncode, 12, conflict.stderr)
        env.publish(target)  # degraded: source-conflict
        seen.append(pathlib.Path(path).read_bytes())
        env.corrupt_envelope(target, "lifecycle-frontier")
        env.publish(target)  # degraded: corrupt-envelope, its envelope withheld
        seen.append(pathlib.Path(path).read_bytes())
        env.unregister("computed-route")
        env.publish(target)  # computed-route's producer gone
        seen.append(pathlib.Path(path).read_bytes())
        docs = [json.loads(data) for data in seen]
        self.assertEqual(
            [d["missing"] for d in docs], [["computed-route", "lifecycle-frontier"], [], [], [], []]
        )
        self.assertEqual(
            [[(c["status"], c["reason"]) for c in d["channels"]] for d in docs[1:]],
            [
                [("fresh", None), ("stale", "expired")],
                [("degraded", "source-conflict"), ("stale", "expired")],
                [("degraded", "source-conflict"), ("degraded", "corrupt-envelope")],
                [("degraded", "source-conflict"), ("degraded", "corrupt-envelope")],
            ],
        )
        self.assertEqual([c["envelope"] for c in docs[3]["channels"]], [route, None])
        self.assertEqual([c["producer"] for c in docs[4]["channels"]], [None, "lifecycle"])
        self.assertEqual(
            [d["producerWatermarks"] for d in docs],
            [{}] + [{"lifecycle": {"lifecycle-frontier": 4}, "router": {"computed-route": 1}}] * 3
            + [{"lifecycle": {"lifecycle-frontier": 4}}],
        )
        self.assertEqual(
            [[d["coverage"][k] for k in r.COVERAGE_KEYS] for d in docs],
            [[2, 0, 0, 0, 2, 0], [2, 1, 1, 0, 0, 0], [2, 0, 1, 1, 0, 0], [2, 0, 0, 2, 0, 0], [1, 0, 0, 2, 0, 1]],
        )
        for data in seen:
            self.assertEqual(schema_subset.errors(DOCUMENT, json.loads(data)), [])
            r.parse_document(data, target)

    def test_shared_cases(self):
        cases = load_cases()
        for case in cases["cases"]:
            with self.subTest(case["name"]):
                self.assertEqual(schema_verdict(case_bytes(case)), case.get("schema", case["expect"]))

    def test_attested_tuples(self):
        self.assertEqual(schema_subset.errors(TUPLE, VECTOR_TUPLE), [])
        self.assertEqual(schema_subset.errors(TUPLE, dict(VECTOR_TUPLE, agentId="é" * 256)), [])
        refused = [
            dict(VECTOR_TUPLE, sessionId="s"),
            {k: v for k, v in VECTOR_TUPLE.items() if k != "agentId"},
            dict(VECTOR_TUPLE, agentId=7),
            dict(VECTOR_TUPLE, agentId=""),
            dict(VECTOR_TUPLE, agentId="a" * 257),
            dict(VECTOR_TUPLE, agentId="a\u0085"),
            dict(VECTOR_TUPLE, agentId="a\n"),
        ]
        for tuple_ in refused:
            with self.subTest(tuple_):
                self.assertNotEqual(schema_subset.errors(TUPLE, tuple_), [])

    def test_the_checker_refuses_keywords_it_does_not_implement(self):
        with self.assertRaises(ValueError):
            schema_subset.errors({"type": "object", "patternProperties": {}}, {})
        with self.assertRaises(ValueError):
            schema_subset.errors({"additionalProperties": True}, {})

    def test_the_checkers_composition_keywords(self):
        """Each keyword the v2 schema added to the subset can fail (the shared cases alone
        could not tell `oneOf` from `anyOf`: the schema's branches exclude each other)."""
        one_of = {"oneOf": [{"type": "string"}, {"pattern": "^a"}]}
        self.assertEqual(schema_subset.errors(one_of, "b"), [])
        self.assertEqual(schema_subset.errors(one_of, 3), [])  # `pattern` ignores a non-string
        self.assertNotEqual(schema_subset.errors(one_of, "a"), [])  # both branches
        self.assertNotEqual(schema_subset.errors({"oneOf": [{"type": "string"}]}, 3), [])  # none
        self.assertNotEqual(schema_subset.errors({"not": {"type": "null"}}, None), [])
        self.assertEqual(schema_subset.errors({"not": {"type": "null"}}, 0), [])
        names = {"propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "integer"}}
        self.assertEqual(schema_subset.errors(names, {"a": 1}), [])
        self.assertNotEqual(schema_subset.errors(names, {"A": 1}), [])
        self.assertNotEqual(schema_subset.errors(names, {"a": "1"}), [])
        declared = {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}
        self.assertEqual(schema_subset.errors(declared, {"a": "x", "b": 1}), [])
        self.assertNotEqual(schema_subset.errors({"minProperties": 1}, {}), [])
        self.assertEqual(schema_subset.errors({"minProperties": 1}, {"a": 1}), [])
        self.assertEqual(schema_subset.errors({"const": None}, None), [])
        self.assertNotEqual(schema_subset.errors({"const": None}, 0), [])


if __name__ == "__main__":
    unittest.main()
