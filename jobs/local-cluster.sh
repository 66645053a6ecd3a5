#!/usr/bin/env bash
# Runs one bloomflow job as N processes of W workers each on this machine (127.0.0.1), the way it
# would run on N machines: a generated hostfile with free ports, one process per line of it.
#
#   jobs/local-cluster.sh N W -- ARGS...
#
# runs `bloomflow ARGS... -n N -p I -w W --hostfile HOSTFILE` for I in 0..N-1 (each process
# reading the hostfile from a pipe of its own, /dev/fd/N: no file to create or remove), waits for all,
# and if any fails kills the rest and exits non-zero. BLOOMFLOW names the binary (default: the
# release build of this checkout, else `bloomflow` on PATH). Its standard input goes to process
# 0, which reads the job's `-` input.
set -euo pipefail

usage() { echo "usage: $0 PROCESSES WORKERS -- BLOOMFLOW-ARGS..." >&2; exit 2; }
[ $# -ge 3 ] || usage
n=$1 w=$2
[ "$3" = "--" ] || usage
shift 3
[[ "$n" =~ ^[1-9][0-9]*$ && "$w" =~ ^[1-9][0-9]*$ ]] || usage

# The launcher's own cost counts in every local multi-process timing (a process start is 1–3 ms
# here), so it starts as few as it can: no dirname, mktemp or awk (with an `rm -r`, about 5 of
# its 11 ms), and no `rm` of a hostfile (1.3 ms more).
here=${BASH_SOURCE[0]%/*}
[ "$here" != "${BASH_SOURCE[0]}" ] || here=.
bin=${BLOOMFLOW:-}
if [ -z "$bin" ]; then
  if [ -x "$here/../target/release/bloomflow" ]; then bin="$here/../target/release/bloomflow"; else bin=bloomflow; fi
fi

# Random ports below the kernel's ephemeral range, from which it takes the local ports of
# outgoing connections: there only a listening server can hold a port, and a port one answers on
# is skipped. (`ss`, which lists every port in use, took 9 ms of each run here; a refused
# connection on loopback through bash's /dev/tcp takes about 30 us.) Where the range starts too
# low to leave room, any port from 20000 up.
low=32768
{ read -r low _ < /proc/sys/net/ipv4/ip_local_port_range; } 2>/dev/null || true
[[ "$low" =~ ^[0-9]+$ && "$low" -gt 21024 ]] || low=61000
listening() { true 2>/dev/null <>"/dev/tcp/127.0.0.1/$1"; }
chosen=" "
hosts=""
for ((i = 0; i < n; i++)); do
  while :; do
    port=$((20000 + RANDOM % (low - 20000)))
    case "$chosen" in *" $port "*) continue ;; esac
    chosen+="$port "
    listening "$port" && continue
    hosts+="127.0.0.1:$port"$'\n'
    break
  done
done

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Standard input is process 0's: a job reads `-` there. (A background command's standard input
# would otherwise be /dev/null.) The other processes get none.
exec 3<&0
for ((i = 0; i < n; i++)); do
  if [ "$i" -eq 0 ]; then
    "$bin" "$@" -n "$n" -p "$i" -w "$w" --hostfile <(printf %s "$hosts") <&3 3<&- &
  else
    "$bin" "$@" -n "$n" -p "$i" -w "$w" --hostfile <(printf %s "$hosts") </dev/null 3<&- &
  fi
  pids+=("$!")
done
exec 3<&-

status=0
running=("${pids[@]}")
while [ ${#running[@]} -gt 0 ]; do
  finished=
  if wait -n -p finished "${running[@]}"; then
    code=0
  else
    code=$?
  fi
  still=()
  for pid in "${running[@]}"; do [ "$pid" = "$finished" ] || still+=("$pid"); done
  running=("${still[@]+"${still[@]}"}")
  if [ "$code" -ne 0 ]; then
    status=$code
    echo "local-cluster: a process failed (exit $code); stopping the others" >&2
    break
  fi
done
exit "$status"
