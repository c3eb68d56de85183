#!/usr/bin/env bash
# Runs one `snapinformer-sim store` command at several reader rates, one run of each rate per
# round, the order rotated every round (1 3 10, then 3 10 1, then 10 1 3, ...), so that a
# machine that drifts through the set weighs on every rate alike. Each run writes
# <out>/<round>-r<rate>/. Then summarise and plot with the `reader_rate_sweep` example.
#
#   scripts/reader-rate-sweep.sh <out-dir> <rounds> <rate,rate,...> -- <store args...>
#
# Example (BENCHMARKS.md, "Reads against staleness"):
#   scripts/reader-rate-sweep.sh out/rr 3 1,3,30 -- store --rows snapinformer,client-go
#   cargo run --release -p snapinformer-sim --example reader_rate_sweep -- out/rr client-go
#
# Needs a release build (cargo build --release -p snapinformer-sim; SIM overrides its path).
# Drops the page cache before each run when allowed to (root), as interleave.sh does.
set -euo pipefail
if [ $# -lt 4 ] || [ "$4" != "--" ]; then
    sed -n '2,14p' "$0" >&2
    exit 2
fi
out=$1 rounds=$2
IFS=, read -r -a rates <<< "$3"
shift 4
[ "${#rates[@]}" -ge 1 ] || { echo "no reader rates given" >&2; exit 2; }
for r in "${rates[@]}"; do
    [[ $r =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "$r: not a reader rate (operations a second)" >&2; exit 2; }
done
sim=${SIM:-./target/release/snapinformer-sim}
[ -x "$sim" ] || { echo "no simulator at $sim: cargo build --release -p snapinformer-sim" >&2; exit 2; }
mkdir -p "$out"
n=${#rates[@]}
total=$((rounds * n)) k=0
for ((round = 1; round <= rounds; round++)); do
    for ((j = 0; j < n; j++)); do
        rate=${rates[$(((round - 1 + j) % n))]}
        k=$((k + 1))
        sync
        [ -w /proc/sys/vm/drop_caches ] && echo 1 > /proc/sys/vm/drop_caches
        echo "run $k/$total (round $round) at $rate reads/s: start $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
        "$sim" "$@" --reader-rate "$rate" --repeat 1 --out "$out/$round-r$rate" \
            > "$out/$round-r$rate.log" 2>&1 || {
            echo "run $k failed; see $out/$round-r$rate.log" >&2
            exit 1
        }
    done
done
echo "done: $total runs in $out"
