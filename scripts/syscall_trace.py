#!/usr/bin/env python3
"""The syscall-trace helper of the tests: runs a command under strace and writes what it saw.

    python3 scripts/syscall_trace.py --out EVENTS.json [--calls fsync,fdatasync,...] -- CMD ARGS...

Tests that must observe what the running code does at the lowest layer — that a commit's WAL
fsync happens before a call returns, that a lock is held from one step to another — run the
program under test through this one helper and assert on its events. It traces the given system
calls (default: fsync, fdatasync, flock, fcntl) in every thread and child process (`strace -f`),
with each file descriptor's path (`strace -y`), plus the program's *marks*: a program marks a
point of its own by writing `@@mark TEXT` followed by a newline to any file descriptor (a
descriptor of /dev/null is enough), and the mark appears among the events in order.

EVENTS.json is a JSON array, in the order the calls completed:
  {"pid": 12, "mark": "acquire:begin"}
  {"pid": 12, "call": "fdatasync", "fd": 7, "path": "/tmp/x/host.sqlite-wal", "args": "", "result": "0"}
`fd` and `path` are null when the first argument is not a descriptor; `args` is the rest of the
argument list as strace printed it (e.g. `F_SETLK, {l_type=F_WRLCK, ...}`).

Exit status: the traced command's, or 2 when strace is missing or could not trace (no ptrace
permission): a test must fail then, never pass without having looked.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARK = "@@mark "
DEFAULT_CALLS = "fsync,fdatasync,flock,fcntl"

# `1234  name(args) = result`, possibly split by -f into `<unfinished ...>` and `<... name resumed>`.
LINE = re.compile(r"^(\d+)\s+(.*)$")
COMPLETE = re.compile(r"^(\w+)\((.*)\)\s+=\s+(.*)$")
UNFINISHED = re.compile(r"^(\w+)\((.*?)\s*<unfinished \.\.\.>$")
RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)\)\s+=\s+(.*)$")
FD = re.compile(r"^(-?\d+)(?:<(.*?)>)?(?:,\s*(.*))?$", re.S)
WRITTEN = re.compile(r'^\d+(?:<.*?>)?,\s*"((?:[^"\\]|\\.)*)"')


def unescape(text):
    """The bytes strace printed as a C string literal, as text."""
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


def event(pid, call, args, result):
    """The event of one completed call, or None when it is a write that is no mark."""
    if call == "write":
        written = WRITTEN.match(args)
        if not written:
            return None
        text = unescape(written.group(1))
        if not text.startswith(MARK):
            return None
        return {"pid": pid, "mark": text[len(MARK):].rstrip("\n")}
    fd = FD.match(args)
    if fd:
        return {
            "pid": pid,
            "call": call,
            "fd": int(fd.group(1)),
            "path": fd.group(2),
            "args": (fd.group(3) or "").strip(),
            "result": result.strip(),
        }
    return {"pid": pid, "call": call, "fd": None, "path": None, "args": args, "result": result.strip()}


def parse(lines):
    """The events of an strace -f -y output, in completion order."""
    pending = {}
    events = []
    for raw in lines:
        line = LINE.match(raw.rstrip("\n"))
        if not line:
            continue
        pid, rest = int(line.group(1)), line.group(2)
        done = COMPLETE.match(rest)
        if done and not rest.startswith("<..."):
            call, args, result = done.groups()
        else:
            unfinished = UNFINISHED.match(rest)
            if unfinished:
                pending[pid] = unfinished.groups()
                continue
            resumed = RESUMED.match(rest)
            if not resumed or pid not in pending:
                continue
            call, started = pending.pop(pid)
            args, result = started + resumed.group(2), resumed.group(3)
        found = event(pid, call, args, result)
        if found is not None:
            events.append(found)
    return events


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="where to write the events (JSON)")
    parser.add_argument("--calls", default=DEFAULT_CALLS, help="system calls to trace")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("no command given")
    strace = shutil.which("strace")
    if strace is None:
        print("syscall_trace: strace is not installed", file=sys.stderr)
        return 2
    calls = ",".join(sorted(set(options.calls.split(",")) | {"write"}))
    with tempfile.TemporaryDirectory() as scratch:
        log = os.path.join(scratch, "strace.log")
        status = subprocess.call(
            [strace, "-f", "-qq", "-y", "-s", "256", "-e", "signal=none", "-e", f"trace={calls}", "-o", log, "--", *command]
        )
        if not os.path.exists(log) or os.path.getsize(log) == 0:
            print("syscall_trace: strace recorded nothing (is ptrace permitted?)", file=sys.stderr)
            return 2
        with open(log, encoding="latin-1") as f:
            events = parse(f)
    with open(options.out, "w") as f:
        json.dump(events, f, indent=0)
    return status


if __name__ == "__main__":
    sys.exit(main())
