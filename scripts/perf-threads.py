#!/usr/bin/env python3
"""Splits a `perf record` profile's samples per thread into kernel and user space (our code,
libc and the rest), for the threads named: the table of BENCHMARKS.md's section on where the
250 µs window's CPU goes in `seed`. Needs `perf` on the PATH.

    python3 scripts/perf-threads.py <perf.data> [<perf.data> ...] [-- <thread> ...]

Threads default to our informer's pipeline in `seed`: informer, snapinformer-re,
handler-control, handler-handler, snapinformer-ha, tokio-rt-worker (Linux keeps 15 bytes of a
thread's name).
"""
import collections
import subprocess
import sys

args = sys.argv[1:]
threads = ['informer', 'snapinformer-re', 'handler-control', 'handler-handler',
           'snapinformer-ha', 'tokio-rt-worker']
if '--' in args:
    i = args.index('--')
    args, threads = args[:i], args[i + 1:]
if not args or not threads:
    sys.exit(__doc__)

for path in args:
    try:
        out = subprocess.run(
            ['perf', 'report', '-i', path, '--comms', ','.join(threads), '--sort', 'comm,dso',
             '-n', '--stdio'], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        sys.exit('perf is not installed')
    except subprocess.CalledProcessError as e:
        sys.exit(f'{path}: perf report failed: {e.stderr.strip()}')
    samples = collections.defaultdict(collections.Counter)
    for line in out.splitlines():
        if line.startswith('#') or not line.strip():
            continue
        fields = line.split()
        count, comm, dso = int(fields[1]), fields[2], fields[3]
        samples[comm]['kernel' if 'kernel' in dso else 'user'] += count
    print(f'{path}: samples in the kernel / in user space')
    for t in threads:
        print(f'  {t:16} {samples[t]["kernel"]:7,} / {samples[t]["user"]:7,}')
    kernel = sum(c['kernel'] for c in samples.values())
    user = sum(c['user'] for c in samples.values())
    print(f'  {"all":16} {kernel:7,} / {user:7,}')
