#!/usr/bin/env python3
"""Runs the workspace's compiled test binaries several at a time.

`cargo test` runs one test binary after another. Ours spend most of their
time waiting on a control plane (each binary starts its own), so two or
more binaries side by side finish the suite sooner on the same cores.

Reads the JSON messages of `cargo test --no-run --message-format=json` on
stdin, runs every test binary (as `cargo test` would: from its package's
folder, with CARGO and CARGO_MANIFEST_DIR set) and the doc tests, and
prints each binary's output whole when it ends, so outputs never
interleave. Exits 1 if any failed, after all have run, naming them.

Usage: cargo test --workspace --no-run --message-format=json \\
         | scripts/run-tests.py [--jobs N] [-- ARGS FOR EVERY BINARY]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass


@dataclass
class Job:
    name: str
    command: list
    cwd: str
    env: dict
    # Integration tests (they start control planes and take longest) go
    # first, so the short unit tests fill the lanes at the end.
    first: bool
    # The cargo command that runs this binary alone.
    rerun: str


def test_binaries(messages, args):
    jobs = []
    for line in messages:
        line = line.strip()
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact":
            continue
        if not message["profile"]["test"] or not message.get("executable"):
            continue
        package = os.path.dirname(message["manifest_path"])
        target = message["target"]
        env = dict(os.environ, CARGO_MANIFEST_DIR=package)
        env.setdefault("CARGO", "cargo")
        kind = target["kind"][0]
        where = os.path.relpath(package, os.getcwd())
        # package_id: "path+file:///…/crates/cli#tether-cli@0.1.0"
        name = message["package_id"].rsplit("#", 1)[-1].split("@")[0]
        select = "--lib" if kind == "lib" else f"--{kind} {target['name']}"
        jobs.append(
            Job(
                name=f"{where} {kind} {target['name']}",
                command=[message["executable"], *args],
                cwd=package,
                env=env,
                first=kind == "test",
                rerun=f"cargo test -p {name} {select}",
            )
        )
    return jobs


def run(job, log):
    started = time.monotonic()
    process = subprocess.Popen(
        job.command, cwd=job.cwd, env=job.env, stdout=log, stderr=subprocess.STDOUT
    )
    running.add(process)
    code = process.wait()
    running.discard(process)
    return code, time.monotonic() - started


running = set()
printing = threading.Lock()


def lane(queue, failed, take):
    while True:
        with take:
            if not queue:
                return
            job = queue.pop(0)
        with tempfile.TemporaryFile(mode="w+") as log:
            code, took = run(job, log)
            log.seek(0)
            output = log.read()
        with printing:
            print(f"     Running {job.name} ({took:.1f} s)", flush=True)
            sys.stdout.write(output)
            sys.stdout.flush()
            if code != 0:
                failed.append(f"{job.name} (exit {code}); again: {job.rerun}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    args = options.args[1:] if options.args[:1] == ["--"] else options.args

    jobs = test_binaries(sys.stdin, args)
    if not jobs:
        print("run-tests: no test binary in cargo's messages", file=sys.stderr)
        return 1
    doc = ["cargo", "test", "--workspace", "--doc", "--", *args]
    jobs.append(Job("doc tests", doc, os.getcwd(), dict(os.environ), False, " ".join(doc[:4])))
    jobs.sort(key=lambda job: not job.first)
    failed, take = [], threading.Lock()

    def stop(signum, _frame):
        with take:
            jobs.clear()
        for process in list(running):
            process.terminate()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    started = time.monotonic()
    lanes = [
        threading.Thread(target=lane, args=(jobs, failed, take), daemon=True)
        for _ in range(max(1, options.jobs))
    ]
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join()
    took = time.monotonic() - started
    if failed:
        print(f"run-tests: {len(failed)} failed after {took:.0f} s:", file=sys.stderr)
        for name in failed:
            print(f"  {name}", file=sys.stderr)
        return 1
    print(f"run-tests: all test binaries passed in {took:.0f} s, {options.jobs} at a time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
