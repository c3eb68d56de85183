#!/usr/bin/env python3
"""Summarises an interleaved set of `seed` runs (scripts/interleave.sh ... -- seed --rows <rows>,
or their thinned copies under docs/runs/):
per run, row and variant (median [min-max]) the staleness p99 from the scheduled slot and from
the queue, the queue maximum, the time until every pod ran, events applied per second and the
stream's lateness p99; per run also the 409s, duplicate daemon pods and
read-your-writes timeouts, and whether the cache held the cluster's pods at the end.

    python3 scripts/seed-summary.py <out-dir>
"""
import json,sys,statistics as st
from runfiles import interleaved_paths
if len(sys.argv) != 2:
    sys.exit(__doc__)
d=sys.argv[1]
rows={}
print("| run | variant | row | staleness p99 | from queue p99 | queue max | all Running | events applied/s | stream lateness p99 | 409s / duplicates / ryw timeouts | cache = cluster |")
print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for i,v,f in interleaved_paths(d):
    for r in json.load(open(f))['modes'][0]['rows']:
        t=r['time_to_all_running_s']
        vals=dict(p99=r['staleness_us']['p99']/1e3, q=r['staleness_from_queue_us']['p99']/1e3, depth=r['queue_depth_max'], run=t if t else float('nan'), apply=r['apply_per_s'], late=r['stream_lateness_us']['p99']/1e3)
        rows.setdefault((v, r['name']),[]).append(vals)
        print(f"| {i} | {v} | {r['name']} | {vals['p99']:.0f} ms | {vals['q']:.0f} ms | {vals['depth']:,} | {t and f'{t:.1f} s' or 'not in time'} | {vals['apply']:,.0f} | {vals['late']:.0f} ms | {r['conflicts_409']} / {r['duplicate_daemon_pods']} / {r['ryw_timeouts']} | {r['cache_pods'] == r['cluster_pods']} |")
for (v,name),l in rows.items():
    print(v, name, {k: f"{st.median([x[k] for x in l]):.1f} [{min(x[k] for x in l):.1f}-{max(x[k] for x in l):.1f}]" for k in l[0]})
