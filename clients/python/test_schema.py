"""The JSON Schemas of `schema/` against real documents published by the `solewriter` CLI,
the shared hand-made documents and attested tuples, checked with `schema_subset.py`."""

import json
import os
import pathlib
import time
import unittest

import schema_subset
from cli_support import REPO, VECTOR_TUPLE, Scratch, load_cases
from test_solewriter_reader import case_bytes


def load_schema(name):
    """A schema of the repository's `schema/` folder."""
    with open(os.path.join(REPO, "schema", name), encoding="utf-8") as f:
        return json.load(f)


DOCUMENT = load_schema("current.v1.schema.json")
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
        env.publish(target)  # no rows: both channels missing
        seen.append(pathlib.Path(path).read_bytes())
        env.submit(target, "computed-route", "router", 1, route, now, 60_000)
        env.submit(target, "lifecycle-frontier", "lifecycle", 4, {"schema": "lifecycle-frontier.v1", "notAuthority": True}, now - 10, 5)
        env.publish(target)  # one fresh, one expired
        seen.append(pathlib.Path(path).read_bytes())
        conflict = env.run(
            "submit", "--producer", "router", "--target", target, "--channel", "computed-route",
            "--watermark", "1", "--envelope", json.dumps(dict(route, steps=[])),
            "--captured-at", str(now), "--expires-in-ms", "60000", check=False,
        )
        self.assertEqual(conflict.returncode, 12, conflict.stderr)
        env.publish(target)  # degraded: source-conflict
        seen.append(pathlib.Path(path).read_bytes())
        docs = [json.loads(data) for data in seen]
        self.assertEqual([d["missing"] for d in docs], [["computed-route", "lifecycle-frontier"], [], []])
        self.assertEqual([c["freshness"] for c in docs[1]["channels"]], ["fresh", "expired"])
        self.assertEqual(docs[2]["channels"][0]["degraded"], "source-conflict")
        for data in seen:
            self.assertEqual(schema_subset.errors(DOCUMENT, json.loads(data)), [])

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
            schema_subset.errors({"type": "object", "propertyNames": {}}, {})
        with self.assertRaises(ValueError):
            schema_subset.errors({"additionalProperties": {"type": "string"}}, {})


if __name__ == "__main__":
    unittest.main()
