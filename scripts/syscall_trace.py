#!/usr/bin/env python3
"""The syscall-trace helper of the tests: runs a command under strace and writes what it saw.

    python3 scripts/syscall_trace.py --out EVENTS.json [--calls fsync,fdatasync,...]
        [--hold FROM TO]... [--hold-target FROM TO]... [--free MARK]...
        [--count-syncs [--kind NAME=REGEX]...] -- CMD ARGS...

Tests that must observe what the running code does at the lowest layer — that a commit's WAL
fsync happens before a call returns, that a lock is held from one step to another — run the
program under test through this one helper and assert on its events. It traces the given system
calls (default: fsync, fdatasync, flock, fcntl, close) in every thread and child process (`strace -f`),
with each file descriptor's path (`strace -y`), plus the program's *marks*: a program marks a
point of its own by writing `@@mark TEXT` followed by a newline to any file descriptor (a
descriptor of /dev/null is enough), and the mark appears among the events in order.

EVENTS.json is a JSON array, in the order the calls completed:
  {"pid": 12, "mark": "acquire:begin"}
  {"pid": 12, "call": "fdatasync", "fd": 7, "path": "/tmp/x/host.sqlite-wal", "args": "", "result": "0"}
`fd` and `path` are null when the first argument is not a descriptor; `args` is the rest of the
argument list as strace printed it (e.g. `F_SETLK, {l_type=F_WRLCK, ...}`).

`--hold FROM TO` checks lock spans on the events: at every mark FROM, the process holds both
  - the target's kernel lock: a successful `flock(LOCK_EX)` on a `<runtime>/hook-projections/
    <target>.lock` file, not yet undone by `flock(LOCK_UN)` or a `close` of that descriptor; and
  - SQLite's write lock: a successful `fcntl` write lock on the `-shm` file covering its byte 120
    (WAL_WRITE_LOCK, what `BEGIN IMMEDIATE` takes in WAL mode), not yet undone by an `F_UNLCK`
    covering that byte or a `close` of any descriptor of the `-shm` file (POSIX locks belong to
    the process: closing any descriptor drops them);
and neither is let go before the next mark TO (a downgrade — `flock(LOCK_SH)`, an `F_RDLCK` over
byte 120 — counts as letting go). `--hold-target FROM TO` checks the target lock alone (after
the commit, SQLite's lock is rightly gone). `--free MARK` checks the opposite: at every mark
MARK, the process holds NEITHER lock (a point where a frozen process must not stop anyone). All
three imply tracing flock, fcntl and close. The findings are written to EVENTS.json as well
(`{"events": [...], "spans": [{"from", "to", "violations": [...]}]}` instead of the bare list).

`--count-syncs` counts the calls that make data durable — fsync, fdatasync, sync_file_range,
syncfs, sync (all traced then) — in each *region* of the program: from a mark `NAME:begin` to the
next mark `NAME:end` (regions may nest or overlap; once closed, a name may open a new one). Each
call is counted under its file's *kind*: the NAME of the first `--kind NAME=REGEX` whose REGEX
matches (re.search) the descriptor's path, else `other:PATH` (so an fsync of an unexpected file
shows up by name); `-` for a call without a descriptor. EVENTS.json then holds
`{"events": [...], "regions": [{"name", "syncs": {KIND: {CALL: COUNT}}}], ...}`, the regions in
the order they began, and every call is counted whatever its result (an attempt is a cost too).

Exit status: the traced command's if it failed; else 3 when a `--hold` span was broken or never
seen, a `--free` mark was reached holding a lock or never reached, or a `--count-syncs` region
was opened and never closed; 2 when strace is missing or could not trace (no ptrace
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
DEFAULT_CALLS = "fsync,fdatasync,flock,fcntl,close"

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


TARGET_LOCK = re.compile(r"/hook-projections/[0-9a-f]+\.lock$")
SHM = re.compile(r"-shm$")
WAL_WRITE_BYTE = 120
FLOCK = re.compile(r"(LOCK_EX|LOCK_SH|LOCK_UN)")
RANGE = re.compile(r"l_type=(F_WRLCK|F_RDLCK|F_UNLCK).*?l_start=(\d+), l_len=(\d+)")
# The calls --hold needs to see every way a lock is taken or let go.
HOLD_CALLS = {"flock", "fcntl", "close"}
# The calls --count-syncs counts: every way a program asks for its data to be made durable.
SYNC_CALLS = {"fsync", "fdatasync", "sync_file_range", "syncfs", "sync"}


def covers(start, length, byte):
    """Whether an fcntl lock range (`l_len` 0: to the end of the file) covers `byte`."""
    return start <= byte and (length == 0 or byte < start + length)


class Locks:
    """The locks a publication must hold, followed through the events of the traced processes,
    each keyed by its file: a target lock by the descriptor that holds it (flock belongs to the
    open file description), SQLite's write lock by the -shm file (POSIX locks belong to the
    process and the file)."""

    def __init__(self):
        self.target = {}  # descriptor -> lock file path, for every target lock held
        self.write = set()  # -shm paths whose write lock (byte 120) is held

    def held(self, target_only=False):
        return bool(self.target) and (target_only or bool(self.write))

    def apply(self, e):
        """Applies one event; a description of the lock it let go, if it let one go."""
        if e.get("result", "").split(" ")[0] != "0":
            return None
        path, fd = e.get("path") or "", e.get("fd")
        if e["call"] == "flock" and TARGET_LOCK.search(path):
            op = FLOCK.search(e["args"])
            if op and op.group(1) == "LOCK_EX":
                self.target[fd] = path
            elif op and self.target.get(fd) == path:
                del self.target[fd]
                return f"flock {op.group(1)} on {path}"
        elif e["call"] == "close":
            if TARGET_LOCK.search(path) and self.target.get(fd) == path:
                del self.target[fd]
                return f"close of the target lock {path}"
            if SHM.search(path) and path in self.write:
                self.write.discard(path)
                return f"close of a descriptor of {path}"
        elif e["call"] == "fcntl" and SHM.search(path) and "F_SETLK" in e["args"]:
            lock = RANGE.search(e["args"])
            if lock and covers(int(lock.group(2)), int(lock.group(3)), WAL_WRITE_BYTE):
                if lock.group(1) == "F_WRLCK":
                    self.write.add(path)
                elif path in self.write:
                    # F_UNLCK, or F_RDLCK: a downgrade lets the write lock go too.
                    self.write.discard(path)
                    return f"{lock.group(1)} of SQLite's write lock on {path}"
        return None


def spans(events, holds, target_only=False):
    """For each (FROM, TO): every window from a mark FROM to the next mark TO, and what broke it
    (with `target_only`, the target lock alone is checked)."""
    found = []
    for start, end in holds:
        locks, window, windows = Locks(), None, []
        for e in events:
            if "mark" in e:
                if e["mark"] == start and window is None:
                    held = locks.held(target_only)
                    window = {"from": start, "to": end, "locks": "target" if target_only else "both",
                              "held_at_start": held, "violations": []}
                    if not held:
                        what = "the target lock" if target_only else "the target lock or SQLite's write lock"
                        window["violations"].append(f"at {start}: {what} is not held")
                elif e["mark"] == end and window is not None:
                    windows.append(window)
                    window = None
                continue
            let_go = locks.apply(e)
            if let_go and window is not None and (not target_only or "target lock" in let_go or "flock" in let_go):
                window["violations"].append(let_go)
        if window is not None:
            window["violations"].append(f"mark {end} never reached")
            windows.append(window)
        if not windows:
            windows.append({"from": start, "to": end, "held_at_start": False, "violations": [f"mark {start} never reached"]})
        found.extend(windows)
    return found


def free(events, marks):
    """For each MARK: every time it is reached, and the locks held there (a violation each)."""
    found = []
    for mark in marks:
        locks, seen = Locks(), []
        for e in events:
            if e.get("mark") == mark:
                held = [f"the target lock {p} is held at {mark}" for p in locks.target.values()]
                held += [f"SQLite's write lock on {p} is held at {mark}" for p in sorted(locks.write)]
                seen.append({"from": mark, "to": mark, "locks": "none", "held_at_start": bool(held), "violations": held})
            elif "mark" not in e:
                locks.apply(e)
        if not seen:
            seen.append({"from": mark, "to": mark, "locks": "none", "held_at_start": False,
                         "violations": [f"mark {mark} never reached"]})
        found.extend(seen)
    return found


def kind_of(path, kinds):
    """The kind of a synced file: the first (name, pattern) whose pattern matches its path."""
    if path is None:
        return "-"
    for name, pattern in kinds:
        if pattern.search(path):
            return name
    return f"other:{path}"


def sync_regions(events, kinds):
    """The durability calls of each region `NAME:begin` .. `NAME:end`, per file kind and call;
    and the names of the regions never closed."""
    regions, open_regions = [], {}
    for e in events:
        if "mark" in e:
            name, _, edge = e["mark"].rpartition(":")
            if edge == "begin" and name and name not in open_regions:
                region = {"name": name, "syncs": {}}
                regions.append(region)
                open_regions[name] = region
            elif edge == "end" and name in open_regions:
                del open_regions[name]
            continue
        if e["call"] not in SYNC_CALLS:
            continue
        kind = kind_of(e["path"], kinds)
        for region in open_regions.values():
            calls = region["syncs"].setdefault(kind, {})
            calls[e["call"]] = calls.get(e["call"], 0) + 1
    return regions, sorted(open_regions)


def kind_option(text):
    """`NAME=REGEX` of --kind."""
    name, sep, pattern = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--kind wants NAME=REGEX, not {text!r}")
    try:
        return name, re.compile(pattern)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"--kind {name}: {e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="where to write the events (JSON)")
    parser.add_argument("--calls", default=DEFAULT_CALLS, help="system calls to trace")
    parser.add_argument("--hold", nargs=2, action="append", default=[], metavar=("FROM", "TO"),
                        help="check that both locks are held from each mark FROM to the next mark TO")
    parser.add_argument("--hold-target", nargs=2, action="append", default=[], metavar=("FROM", "TO"),
                        help="check that the target lock alone is held from each mark FROM to the next mark TO")
    parser.add_argument("--free", action="append", default=[], metavar="MARK",
                        help="check that neither lock is held at each mark MARK")
    parser.add_argument("--count-syncs", action="store_true",
                        help="count fsync, fdatasync, ... per file kind in each region NAME:begin .. NAME:end")
    parser.add_argument("--kind", type=kind_option, action="append", default=[], metavar="NAME=REGEX",
                        help="with --count-syncs: files whose path matches REGEX are of kind NAME (first match wins)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("no command given")
    strace = shutil.which("strace")
    if strace is None:
        print("syscall_trace: strace is not installed", file=sys.stderr)
        return 2
    wanted = set(options.calls.split(",")) | {"write"}
    checks = options.hold or options.hold_target or options.free
    if checks:
        wanted |= HOLD_CALLS
    if options.count_syncs:
        wanted |= SYNC_CALLS
    calls = ",".join(sorted(wanted))
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
    if not checks and not options.count_syncs:
        with open(options.out, "w") as f:
            json.dump(events, f, indent=0)
        return status
    report = {"events": events}
    broken = []
    if checks:
        checked = (spans(events, options.hold) + spans(events, options.hold_target, target_only=True)
                   + free(events, options.free))
        report["spans"] = checked
        for w in checked:
            if w["violations"]:
                broken.append(f"{w['from']} -> {w['to']}: " + "; ".join(w["violations"]))
    if options.count_syncs:
        regions, unclosed = sync_regions(events, options.kind)
        report["regions"] = regions
        broken.extend(f"region {name} never closed (no mark {name}:end)" for name in unclosed)
    with open(options.out, "w") as f:
        json.dump(report, f, indent=0)
    for problem in broken:
        print(f"syscall_trace: {problem}", file=sys.stderr)
    if status != 0:
        return status
    return 3 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
