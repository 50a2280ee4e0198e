#!/usr/bin/env python3
"""Top allocation sites of a dhat-rs heap profile (docs/memory.md).

usage: scripts/dhat-top.py dhat-heap.json [--at end|peak] [--top N] [--depth D]

Groups the live bytes at the end of the profile (or at the peak) by the
first D frames that lie in Tether's own sources (a frame's file is one of
crates/*/src/**), so a site reads as "who in Tether holds this", and
prints the largest groups with their share. `tether run` built with
`--features dhat-heap` writes its profile TETHER_DHAT_SECONDS after it
starts (else when it exits, when the caches are already gone).
"""
import os
import argparse
import json
import re
from collections import defaultdict

ap = argparse.ArgumentParser()
ap.add_argument("profile")
ap.add_argument("--at", choices=["end", "peak"], default="end")
ap.add_argument("--top", type=int, default=25)
ap.add_argument("--depth", type=int, default=2)
args = ap.parse_args()

with open(args.profile) as f:
    profile = json.load(f)
frames = profile["ftbl"]
key_bytes, key_blocks = ("eb", "ebk") if args.at == "end" else ("gb", "gbk")


root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")
ours_files = set()
for crate in os.listdir(root):
    for base, _, names in os.walk(os.path.join(root, crate, "src")):
        for name in names:
            rel = os.path.relpath(os.path.join(base, name), os.path.join(root, crate))
            ours_files.add(rel)
            ours_files.add(f"{crate}/{rel}")


def is_ours(frame):
    if "__rust_" in frame:  # the global allocator's shim
        return False
    place = frame.rpartition(" (")[2].rstrip(")")
    path = place.split(":")[0]
    return path in ours_files and not path.endswith(("src/lib.rs", "src/sync/mod.rs"))


def short(frame):
    # "0x…: tether_controller::observe::live::f (crates/…/live.rs:12:5)"
    text = frame.split(": ", 1)[-1]
    name, _, place = text.partition(" (")
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    name = re.sub(r"<[^<>]*>", "<…>", name)
    place = place.rstrip(")")
    place = re.sub(r"^.*/(crates/)", r"\1", place)
    return f"{name} ({place})" if place else name


groups = defaultdict(lambda: [0, 0])
total_bytes = total_blocks = 0
for pp in profile["pps"]:
    b, k = pp.get(key_bytes, 0), pp.get(key_blocks, 0)
    if not b:
        continue
    total_bytes += b
    total_blocks += k
    ours = [frames[i] for i in pp["fs"] if is_ours(frames[i])]
    key = " ← ".join(short(fr) for fr in ours[: args.depth]) or "(no Tether frame) " + short(
        frames[pp["fs"][-1]] if pp["fs"] else "?"
    )
    groups[key][0] += b
    groups[key][1] += k

print(f"live heap at {args.at}: {total_bytes / 1e6:.2f} MB in {total_blocks} blocks")
for key, (b, k) in sorted(groups.items(), key=lambda kv: -kv[1][0])[: args.top]:
    print(f"{b / 1e6:8.2f} MB {100 * b / total_bytes:5.1f}% {k:>9} blocks  {key}")
