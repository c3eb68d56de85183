#!/usr/bin/env python3
"""Where a `seed` set's CPU went while the controllers ran: per run and row, the CPU seconds of
the controllers' threads, the cluster model's stream, and the cache's own pipeline (every other
thread group: our informer's runtime, handler threads and reclaimer, or a baseline's applier and
handler thread), then each row's median [min-max]. Reads the per-run reports a `seed --repeat N
--out <dir>` run writes under <dir>/runs/ (or their thinned copies, docs/runs/*/seed-*.json), or the <n>-<label>/report.json files of
scripts/interleave.sh (or their thinned copies), each variant apart.

    python3 scripts/seed-cpu.py <out-dir>
"""
import glob
import json
import os
import statistics
import sys

from runfiles import interleaved_paths

if len(sys.argv) != 2:
    sys.exit(__doc__)
out = sys.argv[1]
# (path, variant): an interleaved set's runs keep their variant's label, so that each variant's
# runs are summarised apart.
paths = [(p, '') for p in (sorted(glob.glob(os.path.join(out, 'runs', '*.json')))
                           or sorted(glob.glob(os.path.join(out, 'seed-*.json'))))]
if not paths:
    paths = [(p, label) for _, label, p in interleaved_paths(out)]
rows = {}
print('| run | row | all Running | controllers | stream | pipeline | pipeline by group | total |')
print('|---|---|---:|---:|---:|---:|---|---:|')
for path, variant in paths:
    run = os.path.relpath(path, out)
    for mode in json.load(open(path))['modes']:
        for r in mode['rows']:
            cpu = r.get('cpu_by_thread_s') or {}
            if not cpu:
                continue
            ctl, stream = cpu.get('controller', 0.0), cpu.get('watch-stream', 0.0)
            pipe = {g: s for g, s in cpu.items() if g not in ('controller', 'watch-stream')}
            t = r.get('time_to_all_running_s')
            vals = dict(ctl=ctl, stream=stream, pipe=sum(pipe.values()), total=sum(cpu.values()))
            rows.setdefault(f"{variant} {r['name']}".strip(), []).append(vals)
            groups = ', '.join(f'{g} {s:.1f}' for g, s in sorted(pipe.items(), key=lambda x: -x[1]) if s >= 0.1)
            print(f"| {run} | {r['name']} | {f'{t:.1f} s' if t else 'not in time'} | {ctl:.1f} s | {stream:.1f} s "
                  f"| {vals['pipe']:.1f} s | {groups} | {vals['total']:.1f} s |")
print()
for name, runs in rows.items():
    parts = []
    for key in ('ctl', 'stream', 'pipe', 'total'):
        v = [x[key] for x in runs]
        parts.append(f'{key} {statistics.median(v):.1f} s [{min(v):.1f}-{max(v):.1f}]')
    print(f'- {name} ({len(runs)} runs): ' + '; '.join(parts))
