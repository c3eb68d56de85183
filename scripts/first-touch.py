#!/usr/bin/env python3
"""What a first touch of memory costs on this machine, and how fast freed memory goes cold.

Maps SIZE GiB of anonymous memory (transparent huge pages asked for), writes one byte per
2 MiB, unmaps it, then does the same again after each rest in RESTS (seconds). On a virtual
machine whose host takes freed guest memory back (free page reporting), the touch right after
an unmap is cheap and one after a long rest costs as much as a cold one.

    python3 scripts/first-touch.py [SIZE_GIB] [RESTS...]     # default: 8 0 0 1 3 6 12 0
"""
import mmap
import sys
import time


def touch(size: int) -> float:
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE)
    started = time.time()
    for offset in range(0, size, 2 << 20):
        m[offset] = 1
    took = time.time() - started
    m.close()
    return took


def main() -> None:
    gib = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    rests = [float(r) for r in sys.argv[2:]] or [0, 0, 1, 3, 6, 12, 0]
    for rest in rests:
        time.sleep(rest)
        print(f"after {rest:g} s of rest: {gib} GiB first-touched in {touch(gib << 30):.2f} s", flush=True)


if __name__ == "__main__":
    main()
