#!/usr/bin/env python3
"""How much mimalloc 3's size classes add to the bytes a run asks for, per thread name.

The simulator's heap figures count the bytes requested from the allocator (`cap`); mimalloc hands
out blocks rounded up to its size classes (one per 8 bytes up to 64 B, then four per doubling),
and Go's HeapAlloc counts objects at their size class. This reads `perf script` output of uprobes
on the allocation entry points and prints, per thread name, the allocations seen, their mean
size, and how much larger the same requests are at mimalloc's classes:

    perf probe -x target/release/snapinformer-sim -a 'mi_malloc_aligned size' \\
        -a 'mi_zalloc_aligned size' -a 'mi_realloc_aligned newsize'
    perf record -m 1024 -e 'probe_snapinformer:*' -o alloc.data -- \\
        target/release/snapinformer-sim store --quick --rows snapinformer --out out/alloc
    perf script -i alloc.data -F comm,tid,cpu,time,event,trace | python3 scripts/alloc-rounding.py
    perf probe -d 'probe_snapinformer:*'

Every allocation counts once, freed or not (a reallocation counts its new size), so a thread's
figure is the rounding of what it asks for, not of what it holds at one moment. Requests above
1 MiB (mimalloc's huge objects, rounded to pages) are left out.
"""
import bisect
import collections
import re
import sys

# mimalloc 3's block sizes in machine words: 1 to 8, then four classes per doubling.
BLOCK_WORDS = list(range(1, 9))
_w = 8
while _w < (1 << 22):
    BLOCK_WORDS += [_w + k * (_w // 4) for k in range(1, 5)]
    _w *= 2


def at_class(size):
    """The size of the block mimalloc hands out for a request of `size` bytes."""
    words = max(1, -(-size // 8))
    return BLOCK_WORDS[bisect.bisect_left(BLOCK_WORDS, words)] * 8


LINE = re.compile(r'^\s*(\S.*?)\s+\d+\s+\[\d+\].*?(?:size|newsize)=(0x[0-9a-f]+|\d+)')


def main():
    asked, handed, count = collections.Counter(), collections.Counter(), collections.Counter()
    for line in sys.stdin:
        m = LINE.match(line)
        if not m:
            continue
        name, size = m.group(1), int(m.group(2), 0)
        if size == 0 or size > (1 << 20):
            continue
        asked[name] += size
        handed[name] += at_class(size)
        count[name] += 1
    if not count:
        sys.exit("no allocation events on standard input (see this script's docstring)")
    for name in sorted(asked, key=lambda n: -asked[n]):
        print(f"{name:16} {count[name]:>10} allocations, {asked[name] / count[name]:8.1f} B on "
              f"average; at mimalloc's classes {100 * (handed[name] / asked[name] - 1):5.1f}% more")


if __name__ == "__main__":
    main()
