"""Shared by the set summaries (store-summary.py, seed-set-summary.py): finding and loading the
run files of a repeated set, and writing a median [min-max]."""
import glob
import json
import os
import statistics
import sys


def set_reports(doc, scenario, default_anchor):
    """Reads `<dir> [anchor-row]` from the command line (or exits with `doc`) and returns the
    directory, the anchor row and the set's reports of `scenario`, oldest first: `<dir>/runs/`
    as `--out` writes them, or `<dir>/` as committed under docs/runs/."""
    if len(sys.argv) not in (2, 3):
        sys.exit(doc)
    out = sys.argv[1]
    anchor = sys.argv[2] if len(sys.argv) == 3 else default_anchor
    pattern = f'{scenario}-*.json'
    paths = sorted(glob.glob(os.path.join(out, 'runs', pattern))) or \
        sorted(glob.glob(os.path.join(out, pattern)))
    if not paths:
        sys.exit(f'{out}: no {pattern} run files (in it or under runs/)')
    reports = []
    for path in paths:
        try:
            report = json.load(open(path))
        except (OSError, ValueError) as e:
            sys.exit(f'{path}: {e}')
        if not isinstance(report, dict) or report.get('scenario') != scenario:
            sys.exit(f'{path}: not a snapinformer-sim {scenario} report')
        reports.append((path, report))
    return out, anchor, reports


def spread(xs, digits, unit=''):
    """`median [min-max]` of the values that are not None, or `-` if there are none."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return '-'
    return (f'{statistics.median(xs):,.{digits}f}{unit} '
            f'[{min(xs):,.{digits}f}-{max(xs):,.{digits}f}]')
