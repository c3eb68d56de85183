#!/usr/bin/env bash
# Runs two variants of one `snapinformer-sim` command alternately, one run each time, in ABBA
# order (A B B A A B B A ...), so that a machine that drifts through the set (other jobs, heat,
# a fragmenting heap) weighs on both variants alike. Each run writes <out>/<n>-<label>/.
#
#   scripts/interleave.sh <out-dir> <runs> <label-a> "<args-a>" <label-b> "<args-b>" -- <sim args...>
#
# Example (the reclaimer-priority set of BENCHMARKS.md):
#   scripts/interleave.sh out/ab 10 normal "" idle "--reclaim-priority idle" -- \
#       store --rows snapinformer,client-go
# then: python3 scripts/interleave-summary.py out/ab snapinformer client-go
#
# To compare two builds instead of two flags, set SIM_B to the second build's executable: variant
# B then runs it (with its own arguments, often ""), variant A runs $SIM.
#
# Needs a release build (cargo build --release -p snapinformer-sim). Drops the page cache before
# each run when allowed to (root), as the other benchmark commands in BENCHMARKS.md were run.
set -euo pipefail
if [ $# -lt 7 ] || [ "$7" != "--" ]; then
    sed -n '2,17p' "$0" >&2
    exit 2
fi
out=$1 runs=$2 label_a=$3 args_a=$4 label_b=$5 args_b=$6
shift 7
sim=${SIM:-./target/release/snapinformer-sim}
[ -x "$sim" ] || { echo "no simulator at $sim: cargo build --release -p snapinformer-sim" >&2; exit 2; }
sim_b=${SIM_B:-$sim}
[ -x "$sim_b" ] || { echo "no simulator at $sim_b (SIM_B)" >&2; exit 2; }
mkdir -p "$out"
for ((i = 1; i <= runs; i++)); do
    # ABBA: A on runs 1, 4, 5, 8, 9, ...; B on 2, 3, 6, 7, ...
    if (( (i % 4) == 1 || (i % 4) == 0 )); then
        label=$label_a args=$args_a exe=$sim
    else
        label=$label_b args=$args_b exe=$sim_b
    fi
    sync
    [ -w /proc/sys/vm/drop_caches ] && echo 1 > /proc/sys/vm/drop_caches
    echo "run $i/$runs $label: start $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
    # shellcheck disable=SC2086 # the variant's arguments are meant to split
    "$exe" "$@" $args --repeat 1 --out "$out/$i-$label" > "$out/$i-$label.log" 2>&1 || {
        echo "run $i failed; see $out/$i-$label.log" >&2
        exit 1
    }
done
echo "done: $runs runs in $out"
