#!/usr/bin/env python3
"""Gives chosen threads of running `snapinformer-sim` workers a shorter EEVDF slice (Linux 6.12+:
`sched_setattr` with SCHED_OTHER and `sched_runtime`, which the kernel clamps to 0.1-100 ms; no
privilege needed). A shorter slice lets a waking thread preempt the running one sooner. Used for
the scheduling experiment in BENCHMARKS.md ("Three machine-level levers, tried").

    python3 scripts/eevdf-slice.py <thread-name-prefixes,comma-separated> <slice-ns> &
    ./target/release/snapinformer-sim store --rows snapinformer --repeat 1 --out out/slice
    kill %1

It polls every 2 ms for worker processes (`snapinformer-sim ... --worker`), sets the slice of
each new thread whose name (`/proc/<pid>/task/<tid>/comm`, 15 characters) starts with one of the
prefixes, and prints every thread it set with the call's result. Check the effect with
`grep se.slice /proc/<pid>/task/<tid>/sched`.
"""
import ctypes
import os
import sys
import time

SYS_SCHED_SETATTR = 314  # x86_64


class SchedAttr(ctypes.Structure):
    """`struct sched_attr` of sched_setattr(2)."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
        ("sched_util_min", ctypes.c_uint32),
        ("sched_util_max", ctypes.c_uint32),
    ]


def set_slice(libc, tid, slice_ns):
    attr = SchedAttr(size=ctypes.sizeof(SchedAttr), sched_policy=0, sched_runtime=slice_ns)
    if libc.syscall(SYS_SCHED_SETATTR, tid, ctypes.byref(attr), 0) == 0:
        return "ok"
    return os.strerror(ctypes.get_errno())


def workers():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"snapinformer-sim") and b"--worker" in args:
            yield pid


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    prefixes = [p for p in sys.argv[1].split(",") if p]
    slice_ns = int(sys.argv[2])
    libc = ctypes.CDLL(None, use_errno=True)
    seen = set()
    while True:
        for pid in workers():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                if (pid, tid) in seen:
                    continue
                try:
                    with open(f"/proc/{pid}/task/{tid}/comm") as f:
                        name = f.read().strip()
                except OSError:
                    continue
                if any(name.startswith(p) for p in prefixes):
                    seen.add((pid, tid))
                    print(pid, tid, name, set_slice(libc, int(tid), slice_ns), flush=True)
        time.sleep(0.002)


if __name__ == "__main__":
    main()
