#!/usr/bin/env python3
"""Per-variant medians of interleaved `store` sets (scripts/interleave.sh), for the tables of the
batch-window sections of BENCHMARKS.md: our staleness p50 and p99, client-go's p50 and p99, the
same-run ratio of the p99s, the queued -> published p99, publications, and the CPU our process's
threads used in the open loop. interleave-summary.py gives the apply rates and queue depths;
this gives the rest, grouped by read rate and variant.

Reads every `store` run file under the given directories: <out>/<n>-<label>/runs/store-*.json
as written by interleave.sh, or <n>-<label>-store-*.json as thinned under docs/runs/. Rows
`snapinformer` (or the row named by --row) and `client-go` are required. The per-run lines also
give the source's lateness behind its slots (p99) and its time to build an update, and for
client-go the same build time, its namespace lists' median in the loop and its deepest queue.

    python3 scripts/interleave-medians.py [--row <row>] <dir> [<dir> ...]
"""
import glob
import json
import os
import statistics
import sys

from runfiles import interleaved_run

args = sys.argv[1:]
row = 'snapinformer'
if args[:1] == ['--row']:
    if len(args) < 2:
        sys.exit(__doc__)
    row, args = args[1], args[2:]
if not args:
    sys.exit(__doc__)
runs = []
for top in args:
    for path in sorted(glob.glob(os.path.join(top, '**', '*.json'), recursive=True)):
        named = interleaved_run(path)
        if named is None or os.path.basename(path) == 'report.json':
            continue
        report = json.load(open(path))
        if not isinstance(report, dict) or report.get('scenario') != 'store':
            continue
        by = {r['name']: r for r in report['rows']}
        if row not in by or 'client-go' not in by:
            sys.exit(f'{path}: needs rows {row} and client-go, has {", ".join(by)}')
        ours, theirs = by[row], by['client-go']
        stages = ours['open_loop_stages']
        pacing = report['params'].get('reader_pacing', {})
        runs.append({
            'n': named[0], 'label': named[1], 'started': report['environment']['started_at'],
            'rate': pacing.get('rate', {}).get('per_s'),
            'p50': ours['staleness_us']['p50'] / 1e3, 'p99': ours['staleness_us']['p99'] / 1e3,
            'cg50': theirs['staleness_us']['p50'] / 1e3, 'cg99': theirs['staleness_us']['p99'] / 1e3,
            'x': theirs['staleness_us']['p99'] / ours['staleness_us']['p99'],
            'queued99': stages['queued_us']['p99'] / 1e3, 'publications': stages['batches'],
            'cpu': sum(t['cpu_s'] for t in ours['open_loop_threads'].values()),
            'reads': (ours['reader_ops_per_s'], theirs['reader_ops_per_s']),
            'late99': stages['sent_us']['p99'] / 1e3,
            'build': ours.get('open_loop_build_us_per_update') or 0,
            'cg_build': theirs.get('open_loop_build_us_per_update') or 0,
            'cg_ns_list': (theirs.get('ns_list_us') or {}).get('p50', 0) / 1e3,
            'cg_queue': theirs['queue_depth_max'],
        })
if not runs:
    sys.exit(f'no store run files under {", ".join(args)}')
runs.sort(key=lambda r: (r['rate'] or 0, r['started']))
for r in runs:
    print(f"{r['rate']:g} reads/s {r['started']} {r['n']}-{r['label']}: p50 {r['p50']:.2f} ms, p99 {r['p99']:.1f} ms; "
          f"client-go p50 {r['cg50']:,.2f} ms, p99 {r['cg99'] / 1e3:,.2f} s, {r['x']:,.0f}x; queued -> published p99 "
          f"{r['queued99']:.1f} ms; {r['publications']:,} publications; loop CPU {r['cpu']:.1f} s; "
          f"reads/s {r['reads'][0]:.2f} / {r['reads'][1]:.2f}; source late p99 {r['late99']:.1f} ms, "
          f"{r['build']:.1f} µs an update; client-go's {r['cg_build']:.1f} µs, its namespace lists "
          f"{r['cg_ns_list']:,.0f} ms at the median, its queue {r['cg_queue']:,} at most")
print()
print('| reads/s, variant (runs) | our p50 | our p99 | client-go p50 | client-go p99 | x lower | '
      'queued -> published p99 | publications | process CPU in the loop |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')


def fig(group, key, fmt, scale=1):
    values = [r[key] * scale for r in group]
    return f'{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]'


for rate in dict.fromkeys(r['rate'] for r in runs):
    for label in sorted({r['label'] for r in runs if r['rate'] == rate}):
        g = [r for r in runs if r['rate'] == rate and r['label'] == label]
        print(f"| {rate:g}, {label} ({len(g)}) | {fig(g, 'p50', '{:.2f}')} ms | {fig(g, 'p99', '{:.1f}')} ms "
              f"| {fig(g, 'cg50', '{:,.2f}')} ms | {fig(g, 'cg99', '{:,.2f}', 1e-3)} s | {fig(g, 'x', '{:,.0f}')}x "
              f"| {fig(g, 'queued99', '{:.1f}')} ms | {fig(g, 'publications', '{:,.0f}')} | {fig(g, 'cpu', '{:.1f}')} s |")
