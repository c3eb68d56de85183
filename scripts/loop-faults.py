#!/usr/bin/env python3
"""Page faults at the open loop's start, row by row and run by run, beside the loop's backlog
there (scripts/interleave.sh runs, or any store runs): for each of our rows in each run, its
place in the run, the largest queue depth in the loop's first seconds (from `depth_series`),
its staleness p99, and the process's minor / major faults in those first seconds, over the
whole loop, and (major) before it (`open_loop_faults`). A row-run whose backlog reached
--stall (1,000 by default) in the first seconds is marked as a stall, and each stall's faults
are set beside its row's median over the runs without one.

    python3 scripts/loop-faults.py <out-dir> [--stall N]

Reads <out-dir>/<n>-<label>/report.json as interleave.sh writes them, or the thinned copies
committed under docs/runs/. Reports from before `open_loop_faults` existed show "-".
"""
import json
import statistics
import sys

from runfiles import interleaved_paths

args = sys.argv[1:]
stall_at = 1000
if '--stall' in args:
    i = args.index('--stall')
    try:
        stall_at = int(args[i + 1])
    except (IndexError, ValueError):
        sys.exit(__doc__)
    del args[i:i + 2]
if len(args) != 1:
    sys.exit(__doc__)

lines = []
for n, label, path in interleaved_paths(args[0]):
    try:
        report = json.load(open(path))
    except (OSError, ValueError) as e:
        sys.exit(f'{path}: {e}')
    # A run's own file records its order; a median report.json of one run lists it alone.
    order = report.get('run_order') or (report.get('run_orders') or [[]])[0]
    order = [r['name'] if isinstance(r, dict) else r for r in order]
    for row in report.get('rows', []):
        faults = row.get('open_loop_faults')
        if faults is None and 'open_loop_threads' not in row:
            continue  # a Go row: its own process, not counted
        first_s = (faults or {}).get('first_s', 2)
        series = row.get('depth_series') or []
        backlog = max([d for t, d in series if t <= first_s] or [0])
        place = order.index(row['name']) + 1 if row['name'] in order else None
        lines.append({
            'run': n, 'label': label, 'row': row['name'], 'place': place,
            'of': len(order), 'backlog': backlog,
            'p99_ms': row['staleness_us']['p99'] / 1000, 'faults': faults,
            'stall': backlog >= stall_at,
        })


def fmt(v):
    return '-' if v is None else str(v)


print(f'{"run":>3} {"label":<16} {"row":<20} {"place":>5} {"backlog 0-2 s":>13} '
      f'{"p99 ms":>8} {"minor/major 0-2 s":>18} {"minor/major loop":>17} {"major before":>12}')
for line in lines:
    f = line['faults'] or {}
    place = f'{line["place"]}/{line["of"]}' if line['place'] else '-'
    print(f'{line["run"]:>3} {line["label"]:<16} {line["row"]:<20} {place:>5} '
          f'{line["backlog"]:>13} {line["p99_ms"]:>8.1f} '
          f'{fmt(f.get("minor_first")) + " / " + fmt(f.get("major_first")):>18} '
          f'{fmt(f.get("minor")) + " / " + fmt(f.get("major")):>17} '
          f'{fmt(f.get("major_before")):>12}' + ('  STALL' if line['stall'] else ''))

stalls = [line for line in lines if line['stall']]
print(f'\n{len(stalls)} stall(s) (backlog >= {stall_at} in the first seconds) '
      f'in {len(lines)} row-runs')
for s in stalls:
    calm = [line['faults'] for line in lines
            if line['row'] == s['row'] and not line['stall'] and line['faults']]
    f = s['faults'] or {}
    for kind in ('minor_first', 'major_first'):
        base = [c[kind] for c in calm if c.get(kind) is not None]
        if not base or f.get(kind) is None:
            print(f'run {s["run"]} {s["row"]}: {kind} {fmt(f.get(kind))}, no calm runs to compare')
            continue
        med = statistics.median(base)
        ratio = f[kind] / med if med else float('inf') if f[kind] else 1.0
        print(f'run {s["run"]} {s["row"]}: {kind} {f[kind]} against a median of {med:g} '
              f'in its {len(base)} calm runs ({ratio:.1f}x)')
