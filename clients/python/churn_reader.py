"""Reader side of the cross-language test: reads one target's current.json in a tight loop.

    python3 churn_reader.py RUNTIME_ROOT TUPLE_JSON STOP_FILE

Prints `ready` once it has read a first document, then checks every document it reads until
STOP_FILE exists and it has seen the epoch written there; then prints one JSON line of counts:
`reads`, `epochs` (distinct epochs seen), `regressions` (an epoch lower than the one before),
`errors` (by error code: torn, invalid, absent, …), `lastEpoch`. The test publishes before it
starts the readers, so the first read must succeed: if it fails, the reader prints
`error CODE: MESSAGE` instead of `ready` and exits 1 (rather than retrying forever, as it
would against a publisher of another format).
"""

import json
import os
import sys

import solewriter_reader as r


def main(root, tuple_json, stop_file):
    """Runs the loop; returns the counts."""
    attested = json.loads(tuple_json)
    reads, epochs, regressions, errors, last, stop = 0, set(), 0, {}, -1, None
    while stop is None or last < stop:
        if stop is None and os.path.exists(stop_file):
            with open(stop_file, encoding="utf-8") as f:
                stop = int(f.read())
        try:
            epoch = r.read_current(root, attested).document["fencingEpoch"]
        except r.ReaderError as e:
            if reads == 0:
                print(f"error {e.code}: {e}", flush=True)
                sys.exit(1)
            errors[e.code] = errors.get(e.code, 0) + 1
            continue
        if reads == 0:
            print("ready", flush=True)
        reads += 1
        regressions += epoch < last
        epochs.add(epoch)
        last = epoch
    return {"reads": reads, "epochs": len(epochs), "regressions": regressions,
            "errors": errors, "lastEpoch": last}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])), flush=True)
