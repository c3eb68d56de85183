#!/usr/bin/env python3
"""Summarises an interleaved set from scripts/interleave.sh: one line per run for a row and its
anchor (staleness p99, apply rate with readers, queue max, and their ratios), then the median and
min-max of each variant. Reads <out-dir>/<n>-<label>/report.json, or <out-dir>/<n>-<label>.json
(the run files as committed under docs/runs/), or <out-dir>/<n>-<label>-store-*.json (thinned
copies of a run's own report).

    python3 scripts/interleave-summary.py <out-dir> <row> <anchor-row>
"""
import json
import statistics
import sys

from runfiles import interleaved_paths

if len(sys.argv) != 4:
    sys.exit(__doc__)
out, row, anchor = sys.argv[1:]
runs = []
for number, label, path in interleaved_paths(out):
    report = json.load(open(path))
    if not isinstance(report, dict) or 'rows' not in report:
        sys.exit(f'{path}: not a snapinformer-sim report (no rows)')
    by = {r['name']: r for r in report['rows']}
    if row not in by or anchor not in by:
        sys.exit(f'{path}: needs rows {row} and {anchor}, has {", ".join(by)}')
    ours, theirs = by[row], by[anchor]
    runs.append({
        'run': number, 'label': label,
        'p99': ours['staleness_us']['p99'] / 1000, 'p99_a': theirs['staleness_us']['p99'] / 1000,
        'apply': ours['apply_per_s_with_readers'], 'apply_a': theirs['apply_per_s_with_readers'],
        'queue': ours['queue_depth_max'], 'queue_a': theirs['queue_depth_max'],
    })
if not runs:
    sys.exit(f'no runs under {out}')
runs.sort(key=lambda r: r['run'])
for r in runs:
    r['stale_x'] = r['p99_a'] / r['p99']
    r['apply_x'] = r['apply'] / r['apply_a']
print(f'| run | variant | {row} p99 | {anchor} p99 | p99 ratio | {row} apply/s | {anchor} apply/s | apply ratio | queue max |')
print('|---:|---|---:|---:|---:|---:|---:|---:|---:|')
for r in runs:
    print(f"| {r['run']} | {r['label']} | {r['p99']:,.1f} ms | {r['p99_a']:,.1f} ms | {r['stale_x']:.1f}x "
          f"| {r['apply']:,.0f} | {r['apply_a']:,.0f} | {r['apply_x']:.2f}x | {r['queue']:,} / {r['queue_a']:,} |")
print()
for label in dict.fromkeys(r['label'] for r in runs):
    g = [r for r in runs if r['label'] == label]

    def fig(key, fmt):
        v = [r[key] for r in g]
        return f'{fmt(statistics.median(v))} [{fmt(min(v))}-{fmt(max(v))}]'
    ms = lambda x: f'{x:,.1f} ms'
    times = lambda x: f'{x:.2f}x'
    count = lambda x: f'{x:,.0f}'
    print(f'- {label} ({len(g)} runs): {row} p99 {fig("p99", ms)}, {anchor} {fig("p99_a", ms)}, '
          f'ratio {fig("stale_x", times)}; apply with readers {fig("apply", count)} against '
          f'{fig("apply_a", count)}, ratio {fig("apply_x", times)}; queue max {fig("queue", count)} '
          f'against {fig("queue_a", count)}')
