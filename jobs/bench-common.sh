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

# The host's own two-core scaling, as a reference for target 3 (not a target): reading a file
# from the page cache, which is a large part of every job's time, with one `dd` of the whole
# file against two of its halves at once (256 KiB blocks, bloomflow's read size). On a shared
# virtual machine whose two vCPUs may share a physical core, this copy scales 1.3-1.7x.
read_whole() { dd if="$1" of=/dev/null bs=256K status=none; }
read_halves() {
  local half=$(($(stat -c %s "$1") / 2))
  dd if="$1" of=/dev/null bs=256K count="$half" iflag=count_bytes status=none &
  dd if="$1" of=/dev/null bs=256K skip="$half" iflag=skip_bytes status=none
  wait
}
