#!/usr/bin/env python3
"""Where an interleaved set's informer rows spent the open loop (scripts/interleave.sh runs): per
run and row, the p99 of each stage (slot -> sent, sent -> queued, queued -> published,
published -> handler), the pipeline's CPU per update (the runtime's workers, the processing
thread if any, the handler's thread), the store reclaimer's CPU and run-queue wait, and the CPU
of the handler threads and of the handler reclaimer; then the median and min-max of each
variant. Reads <out-dir>/<n>-<label>/report.json, or the
thinned copies committed under docs/runs/.

    python3 scripts/interleave-threads.py <out-dir> [row,row,...]

Rows default to snapinformer,snapinformer-compact. Updates per run come from the report's
parameters (rate x duration).
"""
import json
import statistics
import sys

from runfiles import interleaved_paths

if len(sys.argv) not in (2, 3):
    sys.exit(__doc__)
out = sys.argv[1]
rows = (sys.argv[2] if len(sys.argv) == 3 else 'snapinformer,snapinformer-compact').split(',')
runs = interleaved_paths(out)


def is_pipeline(group):
    return group.startswith('informer') or group.startswith('handler')


variants = {}
print('| run | variant | row | p99 | sent | to queue | to publication | to handler | pipeline CPU/update | pipeline wait | reclaimer CPU / wait | handler thread / handler reclaimer CPU |')
print('|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for number, label, path in runs:
    report = json.load(open(path))
    if not isinstance(report, dict) or 'rows' not in report:
        sys.exit(f'{path}: not a snapinformer-sim report (no rows)')
    params = report.get('params', {})
    updates = params.get('rate', 0) * params.get('duration_s', 0)
    if updates <= 0:
        sys.exit(f'{path}: no open loop (rate x duration is 0)')
    for row in report['rows']:
        if row['name'] not in rows:
            continue
        stages = row.get('open_loop_stages')
        threads = row.get('open_loop_threads')
        if not stages or not threads:
            sys.exit(f'{path}: row {row["name"]} has no open-loop stages or thread times')
        pipe_cpu = sum(t['cpu_s'] for g, t in threads.items() if is_pipeline(g))
        pipe_wait = sum(t['wait_s'] for g, t in threads.items() if is_pipeline(g))
        rec = threads.get('snapinformer-re', {'cpu_s': 0.0, 'wait_s': 0.0})
        # The handler threads (handler-*) and the informer's handler reclaimer (its thread's name,
        # snapinformer-handler-reclaim, cut to Linux's 15 bytes).
        handler_cpu = sum(t['cpu_s'] for g, t in threads.items() if g.startswith('handler'))
        handler_rec = threads.get('snapinformer-ha', {'cpu_s': 0.0})['cpu_s']
        figures = {
            'p99 ms': row['staleness_us']['p99'] / 1e3,
            'to queue ms': stages['arrival_us']['p99'] / 1e3,
            'to publication ms': stages['queued_us']['p99'] / 1e3,
            'pipeline us/update': pipe_cpu / updates * 1e6,
            'pipeline wait s': pipe_wait,
            'reclaimer cpu s': rec['cpu_s'],
            'reclaimer wait s': rec['wait_s'],
            'handler thread cpu s': handler_cpu,
            'handler reclaimer cpu s': handler_rec,
        }
        variants.setdefault((label, row['name']), []).append(figures)
        print(f"| {number} | {label} | {row['name']} | {figures['p99 ms']:.1f} ms"
              f" | {stages['sent_us']['p99'] / 1e3:.1f} | {figures['to queue ms']:.1f}"
              f" | {figures['to publication ms']:.1f} | {stages['delivery_us']['p99'] / 1e3:.1f}"
              f" | {figures['pipeline us/update']:.1f} us | {pipe_wait:.1f} s"
              f" | {rec['cpu_s']:.2f} / {rec['wait_s']:.2f} s | {handler_cpu:.2f} / {handler_rec:.2f} s |")
print()
for (label, name), runs in sorted(variants.items()):
    parts = []
    for key in runs[0]:
        values = [r[key] for r in runs]
        parts.append(f'{key} {statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]')
    print(f'- {label}, {name} ({len(runs)} runs): ' + '; '.join(parts))
