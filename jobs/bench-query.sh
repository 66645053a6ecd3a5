#!/usr/bin/env bash
# `bloomflow query` over standard input: the PEERS.md probe's 20M customer_id keys, one per line,
# against the filter of the build side's 1M keys (the default: lookup3, blocked layout, 1%), beside
# `wc -l` reading the same keys and the awk one-liner a user would otherwise write (an exact hash
# set of the build keys; it answers no for the filter's false positives), in the same run. Medians
# of RUNS runs, interleaved; awk, which takes about 100 times as long, runs AWK_RUNS times (1).
#
#   jobs/bench-query.sh [PROBE_ROWS]      (default 20000000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rows=${1:-20000000}
runs=${RUNS:-5}
awk_runs=${AWK_RUNS:-1}
cd "$here/.."
source "$here/bench-common.sh"
keys=$out/keys.txt
cut -d, -f2 "$data/probe.csv" | tail -n +2 > "$keys"
cut -d, -f1 "$data/build.csv" | tail -n +2 > "$out/build-keys.txt"
"$bin" build "$data/build.csv" -k customer_id --expected-items 1000000 -o "$out/build.bloom" --no-progress > /dev/null
stdin=$keys
for i in $(seq "$runs"); do
  seconds wc -l >> "$out/wc"
  seconds "$bin" query "$out/build.bloom" >> "$out/query"
  if [ "$i" -le "$awk_runs" ]; then
    seconds awk 'NR == FNR { set[$0]; next } { print $0 "\t" (($0 in set) ? "maybe" : "no") }' "$out/build-keys.txt" - >> "$out/awk"
  fi
done
wc_s=$(median < "$out/wc") q_s=$(median < "$out/query") awk_s=$(median < "$out/awk")
n=$(wc -l < "$keys") bytes=$(stat -c %s "$keys")
printf '\nquery of %d keys (%d bytes) from standard input, median of %d runs\n\n' "$n" "$bytes" "$runs"
printf '| run | wall s | M keys/s | vs wc -l | vs bloomflow query |\n|---|---:|---:|---:|---:|\n'
for pair in "wc -l:$wc_s" "bloomflow query:$q_s" "$(awk -W version 2>&1 | head -1 | cut -d' ' -f1-2) (exact hash set):$awk_s"; do
  name=${pair%%:*} s=${pair##*:}
  printf '| %s | %.3f | %.1f | %.2fx | %.2fx |\n' "$name" "$s" "$(echo "$n / $s / 1000000" | bc -l)" "$(echo "$s / $wc_s" | bc -l)" "$(echo "$s / $q_s" | bc -l)"
done
