#!/usr/bin/env python3
"""Copies a set's run reports for committing under docs/runs/, thinned: every list longer than
200 entries (staleness CDFs, depth and memory series) keeps 201 of them, evenly spaced, first
and last included; every other field is kept as it is. The summary scripts read the result as
they read the originals.

    python3 scripts/thin-runs.py <out-dir> <dest-dir>

<out-dir> is either what `--out` wrote (runs/*.json and report.json: copied as
<dest>/<file>), or what scripts/interleave.sh wrote (<n>-<label>/runs/*.json: copied as
<dest>/<n>-<label>-<file>, the names scripts/runfiles.py reads).
"""
import glob
import json
import os
import sys

KEEP = 200


def thin(value):
    if isinstance(value, dict):
        return {k: thin(v) for k, v in value.items()}
    if isinstance(value, list):
        n = len(value)
        if n > KEEP:
            value = [value[i * (n - 1) // KEEP] for i in range(KEEP + 1)]
        return [thin(v) for v in value]
    return value


def copy(src, dest):
    with open(src) as f:
        doc = json.load(f)
    with open(dest, 'w') as f:
        json.dump(thin(doc), f, separators=(',', ':'))
    print(f'{src} -> {dest} ({os.path.getsize(src):,} -> {os.path.getsize(dest):,} bytes)')


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, dest = sys.argv[1:]
    pairs = [(p, os.path.join(dest, os.path.basename(p)))
             for p in sorted(glob.glob(os.path.join(out, 'runs', '*.json')))]
    if pairs and os.path.exists(os.path.join(out, 'report.json')):
        pairs.append((os.path.join(out, 'report.json'), os.path.join(dest, 'report.json')))
    for p in sorted(glob.glob(os.path.join(out, '*-*', 'runs', '*.json'))):
        run = os.path.basename(os.path.dirname(os.path.dirname(p)))
        pairs.append((p, os.path.join(dest, f'{run}-{os.path.basename(p)}')))
    if not pairs:
        sys.exit(f'{out}: no runs/*.json and no <n>-<label>/runs/*.json')
    os.makedirs(dest, exist_ok=True)
    for src, target in pairs:
        copy(src, target)


if __name__ == '__main__':
    main()
