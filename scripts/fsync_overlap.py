#!/usr/bin/env python3
"""Whether the publication's last two fsyncs can overlap on this file system.

A durable fenced publication fsyncs its temp file, renames it over current.json, then needs
two more fsyncs before it reports success: SQLite's WAL commit and the target directory (the
rename). Only those two may run at the same time (the temp file's must precede the rename,
the rename must precede the commit). This measures, in one run, on the directory given:

  floor      temp file + fsync, rename, directory fsync (the unfenced atomic write)
  sequential the same, then a 4 KiB WAL append + fsync, then the directory fsync
  overlapped  the same, the directory fsync on a worker thread while the WAL append + fsync
             runs, then waiting for both

and prints the median of each and the ratios to the floor. If `overlapped` is no faster than
`sequential`, the file system serializes the two fsyncs (ext4's journal commits one
transaction at a time) and overlapping them in the publisher would buy nothing there.

It also times the rename alone, the one file step a publication takes under the store's write
lock, two ways: over a current.json whose last link it removes (the replaced document is
deleted by the rename), and over one still linked under another name (the rename only drops a
link; the document is deleted later, when that name is removed). The difference between the
two is what deleting the replaced document costs inside the rename.

usage: fsync_overlap.py DIR [N]   (N publications per kind and round, default 400)
       fsync_overlap.py DIR --test (3 of each: runs the code, measures nothing)
"""

import os
import queue
import statistics
import sys
import tempfile
import threading
import time


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    test = sys.argv[2:] == ["--test"]
    n = 3 if test else int(sys.argv[2]) if len(sys.argv) > 2 else 400
    with tempfile.TemporaryDirectory(dir=sys.argv[1]) as d:
        wal = os.open(os.path.join(d, "wal"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        dfd = os.open(d, os.O_RDONLY)
        requests, done = queue.Queue(), queue.Queue()

        def syncer():
            while True:
                fd = requests.get()
                os.fsync(fd)
                done.put(None)

        threading.Thread(target=syncer, daemon=True).start()

        current = os.path.join(d, "current.json")
        renames = {"its last link (freed)": [], "a document linked elsewhere": []}

        def draft(i):
            temp = os.path.join(d, f"current.json.tmp-{i}")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, b"x" * 1024)
            os.fsync(fd)
            os.close(fd)
            return temp

        def draft_and_rename(i):
            os.rename(draft(i), current)

        def timed_rename(i, kept):
            temp, retired = draft(i), os.path.join(d, "retired")
            if kept:
                os.link(current, retired)
            started = time.perf_counter()
            os.rename(temp, current)
            took = time.perf_counter() - started
            if kept:
                os.unlink(retired)
            os.fsync(dfd)
            return took

        def floor(i):
            draft_and_rename(i)
            os.fsync(dfd)

        def sequential(i):
            draft_and_rename(i)
            os.write(wal, b"w" * 4096)
            os.fsync(wal)
            os.fsync(dfd)

        def overlapped(i):
            draft_and_rename(i)
            requests.put(dfd)
            os.write(wal, b"w" * 4096)
            os.fsync(wal)
            done.get()

        kinds = [("floor", floor), ("sequential", sequential), ("overlapped", overlapped)]
        medians = {name: [] for name, _ in kinds}
        for _ in range(2):
            for name, run in kinds:
                times = []
                for i in range(n):
                    started = time.perf_counter()
                    run(i)
                    times.append(time.perf_counter() - started)
                medians[name].append(statistics.median(times) * 1e6)
        for _ in range(2):
            for name, kept in (("its last link (freed)", False), ("a document linked elsewhere", True)):
                times = [timed_rename(i, kept) for i in range(n)]
                renames[name].append(statistics.median(times) * 1e6)
        if test:
            print("fsync_overlap: ok (test mode, nothing measured)")
            return
        base = statistics.mean(medians["floor"])
        for name, _ in kinds:
            m = statistics.mean(medians[name])
            rounds = " / ".join(f"{x:.0f}" for x in medians[name])
            print(f"{name:<11} median {m:7.0f} us (rounds: {rounds})  {m / base:.2f}x the floor")
        seq, ovl = statistics.mean(medians["sequential"]), statistics.mean(medians["overlapped"])
        print(f"overlapped / sequential: {ovl / seq:.2f}x")
        for name, medians in renames.items():
            rounds = " / ".join(f"{x:.0f}" for x in medians)
            print(f"rename over {name}: median {statistics.mean(medians):.0f} us (rounds: {rounds})")


if __name__ == "__main__":
    main()
