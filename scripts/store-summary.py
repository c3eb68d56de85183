#!/usr/bin/env python3
"""Summarises a repeated `store` set, row by row, as the headline tables give it: the median
[min-max] over the runs of each row's staleness, queue, apply rate and CPU, and the median of the
same-run ratios against an anchor row (client-go by default).

    python3 scripts/store-summary.py <dir> [<dir> ...] [anchor-row]

<dir> is a `store --out` directory (its runs/*.json) or a directory of committed run files
(docs/runs/<set>/store-*.json). Several directories pool their runs (a row missing from a run
is left out of that run).
"""
from runfiles import heading, row_names, set_reports, spread

out, anchor, anchor_named, reports = set_reports(__doc__, 'store', 'client-go')


def cpu_per_update(row):
    # The simulator's own total: the whole process's CPU in the saturation phase plus what
    # reclaiming that phase's garbage cost after it (the kernel's share is part of the first).
    phase = row.get('apply_process_cpu_us_per_update')
    if phase is None:
        return None
    return phase + (row.get('apply_reclaim_cpu_us_per_update') or 0)


def p99_ms(stages, stage):
    """A stage's p99 in ms, or None where the row has no such stage (client-go's)."""
    summary = stages.get(stage)
    return summary['p99'] / 1000 if summary else None


def values(row):
    stages = row.get('open_loop_stages') or {}
    threads = row.get('open_loop_threads') or {}
    memory = row.get('memory') or {}
    costs = row.get('read_costs') or {}
    return {
        'p50_ms': row['staleness_us']['p50'] / 1000,
        'p99_ms': row['staleness_us']['p99'] / 1000,
        'queue': row['queue_depth_max'],
        'apply': row['apply_per_s_with_readers'],
        'freed': row['apply_freed_per_s_with_readers'],
        'cpu_us': cpu_per_update(row),
        'heap_b': memory.get('bytes_per_object'),
        'structure_b': memory.get('structure_per_entry_idle'),
        'readers_cpu_s': (threads.get('reader') or {}).get('cpu_s'),
        'reads_per_s': row.get('reader_ops_per_s'),
        'source_late_ms': p99_ms(stages, 'sent_us'),
        'queued_visible_ms': p99_ms(stages, 'queued_us'),
        'publications': stages.get('batches'),
        'window_us': stages.get('batch_window_us'),
        'loop_cpu_s': sum(t['cpu_s'] for t in threads.values()) if threads else None,
        'build_us': row.get('open_loop_build_us_per_update'),
        'ns_list_alone_ms': costs['ns_list_us'] / 1000 if costs.get('ns_list_us') else None,
        'list_alone_ms': costs['list_us'] / 1000 if costs.get('list_us') else None,
        'list_borrowed_ms': costs['list_borrowed_us'] / 1000 if costs.get('list_borrowed_us') else None,
        'peak_heap_gib': row['peak_heap_bytes'] / 2**30 if row.get('peak_heap_bytes') else None,
        'owner_alone_us': costs.get('owner_us'),
        # The machine before the row (the same fixed work in the parent; runs from 2026-12-08).
        'machine_pod_us': (row.get('machine_speed') or {}).get('pod_build_ns', 0) / 1000 or None,
        'machine_load_ns': (row.get('machine_speed') or {}).get('memory_load_ns'),
    }


runs = [{r['name']: values(r) for r in report['rows']} for _, report in reports]
rows = row_names(runs, anchor, anchor_named)
print(heading(runs, out, anchor))


for name in rows:
    per = [r[name] for r in runs if name in r]
    print(f'\n{name}')
    for key, digits in (('p50_ms', 2), ('p99_ms', 1), ('queue', 0), ('apply', 0), ('freed', 0),
                        ('cpu_us', 1), ('heap_b', 0), ('structure_b', 0), ('peak_heap_gib', 1),
                        ('readers_cpu_s', 1), ('reads_per_s', 2), ('source_late_ms', 1),
                        ('queued_visible_ms', 1), ('publications', 0), ('window_us', 0),
                        ('loop_cpu_s', 1), ('build_us', 1), ('ns_list_alone_ms', 1),
                        ('list_alone_ms', 1), ('list_borrowed_ms', 1), ('owner_alone_us', 1),
                        ('machine_pod_us', 2), ('machine_load_ns', 1)):
        print(f'  {key:18} {spread([p[key] for p in per], digits)}')
    if name == anchor:
        continue
    pairs = [(r[name], r[anchor]) for r in runs if name in r and anchor in r]
    if not pairs:
        continue
    lower = [a['p99_ms'] / o['p99_ms'] for o, a in pairs if o['p99_ms']]
    print(f'  {"x lower at p99":18} {spread(lower, 0)}')
    for key, label in (('apply', 'apply x'), ('freed', 'freed x'), ('cpu_us', 'cpu x'),
                       ('heap_b', 'heap x'), ('structure_b', 'structure x')):
        ratios = [o[key] / a[key] for o, a in pairs if o[key] and a[key]]
        print(f'  {label:18} {spread(ratios, 2)}')
