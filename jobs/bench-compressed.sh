#!/usr/bin/env bash
# Compressed inputs and outputs. The PEERS.md probe (default: the 2M-row, 150 MB variant) as
# plain text, gzip, zstd, bzip2, and Hadoop-framed Snappy and LZ4 (compressed once, beside the
# data; the last two by bloomflow itself, as no common tool writes Hadoop's framing):
# `bloomflow build -w 1` of each (a file is one split, read by one worker, but for bzip2) beside
# the codec's own decompressor piped into `wc -l` (the read limit of one core); `build -w 2` of
# the bzip2 file, whose blocks are split between the workers; then the exact semi-join -w 2
# writing plain, gzip, zstd, bzip2, snappy and lz4 parts.
# Medians of RUNS runs, interleaved.
#
#   jobs/bench-compressed.sh [PROBE_ROWS]      (default 2000000)
set -euo pipefail
for tool in gzip zstd bzip2; do
  command -v "$tool" > /dev/null || { echo "bench-compressed.sh needs $tool (e.g. apt-get install $tool)" >&2; exit 1; }
done
here=$(cd "$(dirname "$0")" && pwd)
rows=${1:-2000000}
runs=${RUNS:-5}
cd "$here/.."
source "$here/bench-common.sh"
probe=$data/probe.csv
[ -f "$probe.gz" ] || gzip -c "$probe" > "$probe.gz"
[ -f "$probe.zst" ] || zstd -q -3 "$probe" -o "$probe.zst"
[ -f "$probe.bz2" ] || bzip2 -c "$probe" > "$probe.bz2"
# Every probe row passes a semi-join with itself: one worker writes them, in order, as one part.
for codec in snappy lz4; do
  if [ ! -f "$probe.$codec" ]; then
    "$bin" semijoin --build "$probe" --build-key customer_id --probe "$probe" --probe-key customer_id -w 1 \
      --no-progress -o "$out/self-$codec" --compress "$codec" > /dev/null
    mv "$out/self-$codec/part-00000.$codec" "$probe.$codec"
  fi
done
text_mb=$(echo "$(stat -c %s "$probe") / 1000000" | bc -l)

build() { "$bin" build "$1" -k customer_id --expected-items "$rows" -o "$out/f.bloom" -w "${2:-1}" --no-progress; rm -f "$out/f.bloom"; }
semijoin() {
  "$bin" semijoin --build "$data/build.csv" --build-key customer_id --probe "$probe" --probe-key customer_id \
    --expected-items 1000000 --exact -w 2 --no-progress --overwrite -o "$out/sj" --compress "$1"
}
for _ in $(seq "$runs"); do
  seconds build "$probe" >> "$out/plain"
  seconds build "$probe.gz" >> "$out/gz"
  seconds build "$probe.zst" >> "$out/zst"
  seconds build "$probe.bz2" >> "$out/bz2"
  seconds build "$probe.bz2" 2 >> "$out/bz2-w2"
  seconds build "$probe.snappy" >> "$out/snappy"
  seconds build "$probe.lz4" >> "$out/lz4"
  seconds sh -c "gzip -dc '$probe.gz' | wc -l" >> "$out/gunzip"
  seconds sh -c "zstd -dc '$probe.zst' | wc -l" >> "$out/unzstd"
  seconds sh -c "bzip2 -dc '$probe.bz2' | wc -l" >> "$out/bunzip2"
  for c in none gzip zstd bzip2 snappy lz4; do seconds semijoin "$c" >> "$out/sj-$c"; done
done
m() { median < "$out/$1"; }
printf '\nreading %s (%.0f MB of text) compressed, median of %d runs\n\n' "$probe" "$text_mb" "$runs"
printf '| run | wall s | MB of text/s | vs plain build |\n|---|---:|---:|---:|\n'
for pair in "build -w 1, plain:plain" "build -w 1, .gz:gz" "build -w 1, .zst:zst" "build -w 1, .bz2:bz2" "build -w 2, .bz2:bz2-w2" "build -w 1, .snappy:snappy" "build -w 1, .lz4:lz4" "gzip -dc \\| wc -l:gunzip" "zstd -dc \\| wc -l:unzstd" "bzip2 -dc \\| wc -l:bunzip2"; do
  name=${pair%%:*} s=$(m "${pair##*:}")
  printf '| %s | %.3f | %.0f | %.2fx |\n' "$name" "$s" "$(echo "$text_mb / $s" | bc -l)" "$(echo "$s / $(m plain)" | bc -l)"
done
printf '\nwriting the exact semi-join'"'"'s parts (-w 2), median of %d runs\n\n' "$runs"
printf '| --compress | wall s | parts MB | vs none |\n|---|---:|---:|---:|\n'
for c in none gzip zstd bzip2 snappy lz4; do
  semijoin "$c" > /dev/null
  mb=$(du -cb "$out"/sj/part-* | tail -1 | cut -f1)
  printf '| %s | %.3f | %.1f | %.2fx |\n' "$c" "$(m "sj-$c")" "$(echo "$mb / 1000000" | bc -l)" "$(echo "$(m "sj-$c") / $(m sj-none)" | bc -l)"
done
