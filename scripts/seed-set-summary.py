#!/usr/bin/env python3
"""Summarises a repeated `seed` set (`seed --repeat N --out <dir>`), row by row, as the headline
tables give it: the median [min-max] over the runs of the staleness p50 and p99, the stream's
own lateness, the queue's maximum, the time until every pod ran, the peak heap and the syncs,
the wrong decisions summed over the runs, and the median of the same-run ratios of the p99 and
the queue maximum against an anchor row (locked-batch+ryw by default).

    python3 scripts/seed-set-summary.py <dir> [<dir> ...] [anchor-row]

<dir> is a `seed --out` directory (its runs/*.json) or a directory of committed run files
(docs/runs/<set>/seed-*.json). Several directories pool their runs.
"""
import sys

from runfiles import heading, row_names, set_reports, spread

out, anchor, anchor_named, reports = set_reports(__doc__, 'seed', 'locked-batch+ryw')
runs = []
for path, report in reports:
    if len(report.get('modes') or []) != 1:
        sys.exit(f'{path}: {len(report.get("modes") or [])} modes; summarise one mode at a time')
    runs.append({r['name']: r for r in report['modes'][0]['rows']})
print(heading(runs, out, anchor))


for name in row_names(runs, anchor, anchor_named):
    per = [r[name] for r in runs if name in r]
    print(f'\n{name} ({len(per)} runs)')
    print(f'  staleness p50      {spread([r["staleness_us"]["p50"] / 1e3 for r in per], 1, " ms")}')
    print(f'  staleness p99      {spread([r["staleness_us"]["p99"] / 1e3 for r in per], 1, " ms")}')
    print(f'  from queue p99     {spread([r["staleness_from_queue_us"]["p99"] / 1e3 for r in per], 1, " ms")}')
    print(f'  stream late p99    {spread([r["stream_lateness_us"]["p99"] / 1e3 for r in per], 1, " ms")}')
    print(f'  queue max          {spread([r["queue_depth_max"] for r in per], 0)}')
    running = [r['time_to_all_running_s'] for r in per]
    shown = ', '.join(f'{t:.1f} s' if t else 'not in time' for t in running)
    print(f'  all Running        {shown}')
    print(f'  peak heap          {spread([r["peak_heap_bytes"] / 2**30 for r in per], 1, " GiB")}')
    print(f'  syncs              {spread([r["syncs"] for r in per], 0)}')
    print(f'  kernel CPU         {spread([r.get("kernel_cpu_s") for r in per], 1, " s")}')
    print(f'  409s / duplicates / ryw timeouts / write errors, summed: '
          f'{sum(r["conflicts_409"] for r in per)} / {sum(r["duplicate_daemon_pods"] for r in per)} / '
          f'{sum(r["ryw_timeouts"] for r in per)} / {sum(r["write_errors"] for r in per)}')
    held = sum(r['cache_pods'] == r['cluster_pods'] for r in per)
    print(f'  cache held the cluster\'s pods once drained: {held} of {len(per)}')
    if name == anchor:
        continue
    pairs = [(r[name], r[anchor]) for r in runs if name in r and anchor in r]
    if pairs:
        print(f'  p99 x lower than {anchor}: '
              f'{spread([a["staleness_us"]["p99"] / o["staleness_us"]["p99"] for o, a in pairs], 1, "x")}')
        print(f'  queue x {anchor}: '
              f'{spread([o["queue_depth_max"] / a["queue_depth_max"] for o, a in pairs], 3, "x")}')
