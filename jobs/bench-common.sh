# Sourced by the bench-*.sh scripts, from the project root, with $here (the jobs/ directory) and
# $rows set: builds the release binary ($bin), generates the PEERS.md data for $rows probe rows on
# first use ($data, under $BENCH_DATA or jobs/bench-data/), makes a scratch directory ($out,
# removed on exit), and defines the timing helpers.
cargo build --release --quiet
bin=$PWD/target/release/bloomflow
data=${BENCH_DATA:-$here/bench-data}/rows-$rows
if [ ! -f "$data/probe.csv" ]; then
  "$bin" gen semijoin-bench --build-rows 1000000 --probe-rows "$rows" -o "$data" -w 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The median of the numbers on standard input, one per line.
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The wall seconds of one run of "$@", its output discarded (standard input: $stdin, if set).
seconds() {
  local s e
  s=$(date +%s.%N); "$@" < "${stdin:-/dev/null}" > /dev/null; e=$(date +%s.%N)
  echo "$e - $s" | bc -l
}
