#!/usr/bin/env python3
"""Top allocation sites of a dhat-rs heap profile (docs/memory.md).

usage: scripts/dhat-top.py dhat-heap.json [--at end|peak] [--top N] [--depth D]

Groups the live bytes at the end of the run (or at the peak) by the first
D frames that lie in Tether's own crates (tether_*), so a site reads as
"who in Tether holds this", and prints the largest groups with their share.
"""
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
    ours = [frames[i] for i in pp["fs"] if "tether_" in frames[i]]
    key = " ← ".join(short(fr) for fr in ours[: args.depth]) or "(no Tether frame) " + short(
        frames[pp["fs"][-1]] if pp["fs"] else "?"
    )
    groups[key][0] += b
    groups[key][1] += k

print(f"live heap at {args.at}: {total_bytes / 1e6:.2f} MB in {total_blocks} blocks")
for key, (b, k) in sorted(groups.items(), key=lambda kv: -kv[1][0])[: args.top]:
    print(f"{b / 1e6:8.2f} MB {100 * b / total_bytes:5.1f}% {k:>9} blocks  {key}")
