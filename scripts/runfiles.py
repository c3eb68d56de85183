"""Shared by the summary scripts: finding and loading the run files of a repeated set
(store-summary.py, seed-set-summary.py), naming the runs of an interleaved set
(interleave-summary.py, interleave-medians.py), and writing a median [min-max]."""
import glob
import json
import os
import re
import statistics
import sys

# A thinned copy of one run's report, as committed under docs/runs/:
# <n>-<label>-<scenario>-<started>-<run>.json.
_THINNED = re.compile(r'(\d+)-(.+?)-(?:store|seed)-\d{8}T\d{6}Z-\d+\.json$')
# A run's own report, as `--out` writes it under runs/.
_RUN_FILE = re.compile(r'(?:store|seed)-\d{8}T\d{6}Z-\d+\.json$')


def interleaved_run(path):
    """(run number, variant label) of one run of an interleaved set (scripts/interleave.sh), from
    where its file lies: <n>-<label>/report.json or <n>-<label>/runs/<scenario>-*.json as the
    script writes them, <n>-<label>.json or <n>-<label>-<scenario>-*.json as committed under
    docs/runs/. None for a file named neither way."""
    name = os.path.basename(path)
    m = _THINNED.match(name)
    if m:
        return int(m.group(1)), m.group(2)
    if name == 'report.json':
        name = os.path.basename(os.path.dirname(path))
    elif _RUN_FILE.match(name):
        name = os.path.basename(os.path.dirname(os.path.dirname(path)))
    elif name.endswith('.json'):
        name = name[:-len('.json')]
    m = re.match(r'(\d+)-(.+)$', name)
    return (int(m.group(1)), m.group(2)) if m else None


def interleaved_paths(out):
    """The run files of an interleaved set in <out>, as (run number, label, path) in run order:
    <n>-<label>/report.json as scripts/interleave.sh writes them, or the thinned copies committed
    under docs/runs/ (<n>-<label>-<scenario>-*.json, from scripts/thin-runs.py, or
    <n>-<label>.json). Exits if there are none, or if a file is named neither way."""
    paths = glob.glob(os.path.join(out, '*-*', 'report.json')) + \
        glob.glob(os.path.join(out, '*-*.json'))
    if not paths:
        sys.exit(f'{out}: no <n>-<label>/report.json and no <n>-<label>-*.json run files')
    runs = []
    for path in paths:
        named = interleaved_run(path)
        if named is None:
            sys.exit(f'{path}: not named <n>-<label> as interleave.sh names its runs')
        runs.append((*named, path))
    return sorted(runs)


def set_reports(doc, scenario, default_anchor):
    """Reads `<dir> [<dir> ...] [anchor-row]` from the command line (or exits with `doc`) and
    returns the directories (joined by ", "), the anchor row, whether it was named, and the
    reports of `scenario` found in them, in order: `<dir>/runs/` as `--out` writes them, or
    `<dir>/` as committed under docs/runs/ (a `--out`'s run files, or an interleaved set's). Several directories pool their runs; a last
    argument that is not a directory names the anchor row."""
    args = sys.argv[1:]
    anchor, named = default_anchor, False
    if len(args) > 1 and not os.path.isdir(args[-1]):
        anchor, named = args.pop(), True
    if not args:
        sys.exit(doc)
    pattern = f'{scenario}-*.json'
    reports = []
    for out in args:
        # As `--out` writes them, as committed from a `store --out`, or as committed from an
        # interleaved set (<n>-<label>-<scenario>-*.json, from scripts/thin-runs.py).
        paths = sorted(glob.glob(os.path.join(out, 'runs', pattern))) or \
            sorted(glob.glob(os.path.join(out, pattern))) or \
            sorted(glob.glob(os.path.join(out, f'*-{pattern}')))
        if not paths:
            sys.exit(f'{out}: no {pattern} run files (in it or under runs/)')
        for path in paths:
            try:
                report = json.load(open(path))
            except (OSError, ValueError) as e:
                sys.exit(f'{path}: {e}')
            if not isinstance(report, dict) or report.get('scenario') != scenario:
                sys.exit(f'{path}: not a snapinformer-sim {scenario} report')
            reports.append((path, report))
    return ', '.join(args), anchor, named, reports


def row_names(runs, anchor, named):
    """The rows of `runs` (dicts by row name), in their first order; exits if the anchor row was
    named and none of the runs has it (without it, a set gives no ratios)."""
    names = list(dict.fromkeys(name for run in runs for name in run))
    if named and anchor not in names:
        sys.exit(f'no run has the anchor row {anchor!r}; rows: {", ".join(names)}')
    return names


def heading(runs, out, anchor):
    """The first line of a set's summary: how many runs, from where, against which row."""
    missing = '' if any(anchor in run for run in runs) else ' (in none of the runs: no ratios)'
    return (f'{len(runs)} runs from {out}; ratios are the median of the same-run ratios '
            f'against {anchor}{missing}')


def spread(xs, digits, unit=''):
    """`median [min-max]` of the values that are not None, or `-` if there are none."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return '-'
    return (f'{statistics.median(xs):,.{digits}f}{unit} '
            f'[{min(xs):,.{digits}f}-{max(xs):,.{digits}f}]')
