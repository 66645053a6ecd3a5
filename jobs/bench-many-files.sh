#!/usr/bin/env bash
# Many small input files, as a Hadoop job's output directory holds: the PEERS.md probe (2M rows by
# default) cut into FILES files (10,000 by default), each with the header, and `bloomflow build` and
# `semijoin --exact` (-w 2) over the directory beside the same jobs over the probe as one file and
# `cat` of every file, in the same run: what each file costs beyond its bytes. Medians of RUNS
# runs (5), interleaved.
#
#   jobs/bench-many-files.sh [PROBE_ROWS]      (default 2000000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rows=${1:-2000000}
files=${FILES:-10000}
runs=${RUNS:-5}
cd "$here/.."
source "$here/bench-common.sh"
probe=$data/probe.csv
dir=$out/parts
mkdir -p "$dir"
# Contiguous runs of lines, each file opened once and closed before the next.
awk -v dir="$dir" -v files="$files" -v rows="$rows" '
  NR == 1 { header = $0; per = int((rows + files - 1) / files); next }
  {
    n = int((NR - 2) / per)
    if (n != current || file == "") {
      if (file != "") close(file)
      current = n; file = sprintf("%s/part-%05d.csv", dir, n); print header > file
    }
    print >> file
  }' "$probe"
made=$(find "$dir" -type f | wc -l)

job() { # NAME INPUT ARGS...: one timed run of a bloomflow job over INPUT
  local name=$1 input=$2; shift 2
  rm -rf "$out/$name.out"
  case $name in
    build*) seconds "$bin" build "$input" -k customer_id --expected-items "$rows" -o "$out/$name.out" -w 2 --no-progress "$@" ;;
    *) seconds "$bin" semijoin --build "$data/build.csv" --build-key customer_id --probe "$input" --probe-key customer_id \
         --expected-items 1000000 --exact -o "$out/$name.out" -w 2 --no-progress "$@" ;;
  esac
}
for _ in $(seq "$runs"); do
  seconds sh -c "cat '$dir'/* > /dev/null" >> "$out/cat"
  job build-one "$probe" >> "$out/build-one"
  job build-many "$dir" >> "$out/build-many"
  job semijoin-one "$probe" >> "$out/semijoin-one"
  job semijoin-many "$dir" >> "$out/semijoin-many"
done
cmp -s "$out/build-one.out" "$out/build-many.out" || { echo "the filters differ!" >&2; exit 1; }
# Rows, not counting each part's header.
header=$(head -n 1 "$probe")
one_rows=$(cat "$out/semijoin-one.out"/part-* | grep -cvxF "$header" || true)
many_rows=$(cat "$out/semijoin-many.out"/part-* | grep -cvxF "$header" || true)
[ "$one_rows" = "$many_rows" ] || { echo "the semi-joins differ: $one_rows against $many_rows rows" >&2; exit 1; }

cat_s=$(median < "$out/cat")
printf '\n%d rows of %s as one file and as %d files, median of %d runs\n\n' "$rows" "$probe" "$made" "$runs"
printf '| run | one file, s | %d files, s | per file, ms |\n|---|---:|---:|---:|\n' "$made"
printf '| cat | | %.3f | %.3f |\n' "$cat_s" "$(echo "$cat_s * 1000 / $made" | bc -l)"
for j in build semijoin; do
  one=$(median < "$out/$j-one") many=$(median < "$out/$j-many")
  printf '| %s -w 2 | %.3f | %.3f | %.3f more |\n' "$j" "$one" "$many" "$(echo "($many - $one) * 1000 / $made" | bc -l)"
done
printf '\nthe same filter both ways: yes; the same %s semi-join rows both ways: yes\n' "$one_rows"
