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


def _has(stack, *words):
    return any(word in stack for word in words)


# A RESP drain (`--resp`): the samples of HTTP requests (the preload) are
# left out; the round is split into its head read and riding acks.
RESP_CATEGORIES = [
    ("store commit thread: fsync (kernel)", lambda comm, s: comm.startswith("hotq-committer") and _has(s, "sync_all", "do_fsync")),
    ("store commit thread: fjall memtable and journal", lambda comm, s: comm.startswith("hotq-committer") and "WriteBatch::commit" in s),
    ("store commit thread: resolver, watches, answers", lambda comm, s: comm.startswith("hotq-committer")),
    ("other threads (fjall flush)", lambda comm, s: not comm.startswith("tokio-rt")),
    ("round: reading the head (read_end)", lambda comm, s: "fulfill::fulfill_round" in s and "read_end" in s),
    ("round: riding acks (ack_in)", lambda comm, s: "fulfill::fulfill_round" in s and _has(s, "ack_in", "ack_riding", "riding.rs")),
    ("round: the rest (requests, take, lease, commit call)", lambda comm, s: "fulfill::fulfill_round" in s),
    ("round loop: hand-over, gather, watches", lambda comm, s: _has(s, "fulfill_rounds", "fulfill_loop", "hand_over_round")),
    ("RESP: socket writes (kernel)", lambda comm, s: "resp::connection" in s and _has(s, "poll_write", "write_all")),
    ("RESP: socket reads (kernel)", lambda comm, s: "resp::connection" in s and _has(s, "poll_read", "read_buf")),
    ("RESP: the pop call (join the line, wait, metrics)", lambda comm, s: "resp::connection" in s and _has(s, "pop_acks", "staging::")),
    ("RESP: decode, dispatch, encode", lambda comm, s: "resp::" in s),
    ("tokio scheduler, epoll, idle", lambda comm, s: "tokio::runtime" in s),
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
    parser.add_argument("--resp", action="store_true", help="a RESP drain: from its first RESP sample on, HTTP samples left out")
    args = parser.parse_args()
    categories = RESP_CATEGORIES if args.resp else CATEGORIES
    counts, first = collections.Counter(), None
    # Over RESP the drain starts with the first RESP sample: the preload
    # goes over HTTP.
    drained = not args.resp
    for comm, at, stack in samples(args.perf_script):
        drained = drained or "resp::connection" in stack
        if not drained:
            continue
        first = at if first is None else first
        if at - first < args.from_s or (args.resp and _has(stack, "axum", "hyper")):
            continue
        name = next((name for name, test in categories if test(comm, stack)), "other: " + comm)
        counts[name] += 1
    total = sum(counts.values())
    print(f"{total} samples")
    for name, count in counts.most_common():
        share = count / total
        cost = f"  {share * args.srv_us:6.1f} µs/pop" if args.srv_us else ""
        print(f"{100 * share:5.1f}%{cost}  {name}")


if __name__ == "__main__":
    main()
