#!/usr/bin/env python3
"""Names the frames of `perf script` output that perf left `[unknown]`.

perf 6.1 (Debian 12) finds no symbols in hotq's release binary: the
linker lays its code out at a virtual address 0x1000 above its file
offset, which that perf does not follow. This asks `llvm-addr2line` for
each address (inlined frames included, with file:line), so
`perf_breakdown.py` can sort the samples:

    perf script -i perf.data > perf.txt
    scripts/perf_symbolize.py target/release/hotq < perf.txt > perf.sym.txt
    scripts/perf_breakdown.py perf.sym.txt --resp --srv-us 22.5

`--bias` is the difference between the binary's virtual addresses and
the offsets perf prints (`readelf -lW`: the executable LOAD's VirtAddr
minus its Offset, rounded to pages).
"""

import argparse
import re
import subprocess
import sys


def names_of(binary, addresses):
    """address -> [function @file:line, ...], innermost first."""
    text = "\n".join(hex(a) for a in addresses) + "\n"
    out = subprocess.run(
        ["llvm-addr2line", "-a", "-f", "-i", "-C", "-e", binary],
        input=text, capture_output=True, text=True, check=True,
    ).stdout
    names, current = {}, None
    for line in out.splitlines():
        if line.startswith("0x"):
            current = int(line, 16)
            names[current] = []
        elif current is None:
            continue
        elif line.startswith("/") or line.startswith("??:"):
            if names[current]:
                parts = line.split(" ")[0].split("/")
                names[current][-1] += " @" + "/".join(parts[-3:])
        else:
            names[current].append(line)
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--bias", default="0x1000", help="virtual address minus printed offset")
    args = parser.parse_args()
    bias = int(args.bias, 16)
    frame = re.compile(r"^(\s+)([0-9a-f]+) \[unknown\] \((" + re.escape(args.binary) + r")\)")
    lines = sys.stdin.read().splitlines()
    addresses = sorted({int(m.group(2), 16) + bias for m in map(frame.match, lines) if m})
    names = names_of(args.binary, addresses)
    for line in lines:
        found = frame.match(line)
        if not found:
            print(line)
            continue
        address = int(found.group(2), 16) + bias
        for name in names.get(address) or [hex(address)]:
            print(f"{found.group(1)}{found.group(2)} {name} ({args.binary})")


if __name__ == "__main__":
    main()
