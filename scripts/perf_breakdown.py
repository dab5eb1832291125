#!/usr/bin/env python3
"""Where the daemon's CPU goes, by concern, from `perf script` output.

Record the daemon during a drain, with DWARF call stacks (release builds
keep debug info), then read the samples from the drain's start on:

    perf record -F 499 --call-graph dwarf,32768 -p $(pgrep -nx hotq) -o perf.data &
    peerbench --http-base http://127.0.0.1:17070 --target http-leased -w 64
    kill -INT %1
    perf script -i perf.data > perf.txt
    scripts/perf_breakdown.py perf.txt --from-s 2.2   # skip the preload

Each sample goes to the first category whose test its stack passes, in
the order below; a sample's share times the daemon's CPU per pop
(peerbench's `srv us`) is what that concern costs a pop.
"""

import argparse
import collections
import re

CATEGORIES = [
    ("store commit thread (fjall write, fsync, resolver)", lambda comm, s: comm.startswith("hotq-committer")),
    ("fulfill rounds (pop line)", lambda comm, s: "fulfill_rounds" in s),
    ("settle rounds (ack line)", lambda comm, s: "settler::" in s),
    ("timer and reaper", lambda comm, s: "timer_loop" in s or "spawn_reaper" in s),
    ("HTTP: socket writes (kernel, loopback delivery)", lambda comm, s: "handle_connection" in s and ("poll_write_vectored" in s or "poll_flush" in s)),
    ("HTTP: socket reads", lambda comm, s: "handle_connection" in s and "AsyncRead>::poll_read" in s),
    ("HTTP: handlers (pop, ack)", lambda comm, s: "handle_connection" in s and "as axum::handler::Handler" in s),
    ("HTTP: hyper, axum routing, middleware", lambda comm, s: "handle_connection" in s),
    ("tokio scheduler, idle", lambda comm, s: "tokio::runtime" in s),
]


def samples(path):
    """Yields (comm, seconds, stack text) per sample."""
    comm, at, frames = None, None, []
    with open(path, errors="replace") as lines:
        for line in lines:
            if not line.strip():
                if comm is not None:
                    yield comm, at, " | ".join(frames)
                comm, frames = None, []
            elif line[0] in "\t ":
                parts = line.strip().split(None, 1)
                if len(parts) == 2:
                    frames.append(parts[1])
            else:
                found = re.search(r" (\d+\.\d+):", line)
                comm, at, frames = line.split()[0], float(found.group(1)) if found else 0.0, []
    if comm is not None:
        yield comm, at, " | ".join(frames)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("perf_script", help="output of `perf script`")
    parser.add_argument("--from-s", type=float, default=0.0, help="skip the first seconds of the recording")
    parser.add_argument("--srv-us", type=float, help="the daemon's CPU per pop, to print µs per concern")
    args = parser.parse_args()
    counts, first = collections.Counter(), None
    for comm, at, stack in samples(args.perf_script):
        first = at if first is None else first
        if at - first < args.from_s:
            continue
        name = next((name for name, test in CATEGORIES if test(comm, stack)), "other: " + comm)
        counts[name] += 1
    total = sum(counts.values())
    print(f"{total} samples")
    for name, count in counts.most_common():
        share = count / total
        cost = f"  {share * args.srv_us:6.1f} µs/pop" if args.srv_us else ""
        print(f"{100 * share:5.1f}%{cost}  {name}")


if __name__ == "__main__":
    main()
