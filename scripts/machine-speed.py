#!/usr/bin/env python3
"""Sets the machine's speed before each row (`machine_speed`, timed in the parent with the same
fixed work every time) beside how fast the row then ran: its own build time per update in the
loop, and its staleness p99. One line per row-run, then how well the two agree over the set.

    python3 scripts/machine-speed.py <dir> [<dir> ...]

<dir> as for store-summary.py (a `store --out` directory or committed run files). Each row's
loop build time is divided by that row's median over the set, so that rows whose generators
differ (Rust, Go, arenas) pool; the agreement is Spearman's rank correlation over all
row-runs. Reports without `machine_speed` (before 2026-12-08) are left out, with a count.
"""
import statistics
import sys

from runfiles import set_reports

out, _, _, reports = set_reports(__doc__, 'store', 'client-go')


def ranks(values):
    """Ranks from 1, ties given their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(xs, ys):
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else None


rows, skipped = [], 0
for run, (path, report) in enumerate(reports, start=1):
    order = report.get('run_order') or [r['name'] for r in report['rows']]
    for r in report['rows']:
        m = r.get('machine_speed')
        build = r.get('open_loop_build_us_per_update')
        if not m or build is None:
            skipped += 1
            continue
        rows.append({
            'run': run, 'row': r['name'], 'place': order.index(r['name']) + 1 if r['name'] in order else 0,
            'started': report['environment']['started_at'],
            'pod_us': m['pod_build_ns'] / 1000, 'load_ns': m['memory_load_ns'],
            'build_us': build, 'p99_ms': r['staleness_us']['p99'] / 1000,
        })
if not rows:
    sys.exit(f'{out}: no row-run has both machine_speed and a loop build time ({skipped} left out)')
medians = {name: statistics.median(x['build_us'] for x in rows if x['row'] == name)
           for name in dict.fromkeys(x['row'] for x in rows)}
for x in rows:
    x['build_rel'] = x['build_us'] / medians[x['row']]

print(f'{out}: {len(rows)} row-runs' + (f' ({skipped} without machine_speed left out)' if skipped else ''))
print('| run | row | place | machine: pod build | machine: memory load | loop build per update | / row median | p99 |')
print('|---:|---|---:|---:|---:|---:|---:|---:|')
for x in rows:
    print(f"| {x['run']} | {x['row']} | {x['place']} | {x['pod_us']:.2f} µs | {x['load_ns']:.1f} ns "
          f"| {x['build_us']:.1f} µs | {x['build_rel']:.3f} | {x['p99_ms']:,.1f} ms |")
rel = [x['build_rel'] for x in rows]
pods = [x['pod_us'] for x in rows]
loads = [x['load_ns'] for x in rows]
print()
print(f'loop build / row median: {min(rel):.3f}-{max(rel):.3f} (max over min {max(rel) / min(rel):.3f})')
print(f'machine pod build: {min(pods):.2f}-{max(pods):.2f} µs (max over min {max(pods) / min(pods):.3f})')
print(f'machine memory load: {min(loads):.1f}-{max(loads):.1f} ns (max over min {max(loads) / min(loads):.3f})')
for label, xs in (('pod build', pods), ('memory load', loads)):
    rho = spearman(xs, rel)
    print(f'Spearman, machine {label} against loop build / row median: '
          + (f'{rho:.2f}' if rho is not None else 'n/a') + f' over {len(rows)} row-runs')
ours = [x for x in rows if x['row'] != 'client-go']
for label, key in (('pod build', 'pod_us'), ('memory load', 'load_ns')):
    rho = spearman([x[key] for x in ours], [x['p99_ms'] for x in ours])
    print(f'Spearman, machine {label} against p99, our rows: '
          + (f'{rho:.2f}' if rho is not None else 'n/a') + f' over {len(ours)} row-runs')
