#!/usr/bin/env bash
# Runs one bloomflow job as N processes of W workers each on this machine (127.0.0.1), the way it
# would run on N machines: a generated hostfile with free ports, one process per line of it.
#
#   jobs/local-cluster.sh N W -- ARGS...
#
# runs `bloomflow ARGS... -n N -p I -w W --hostfile HOSTFILE` for I in 0..N-1, waits for all,
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

# The launcher's own cost counts in every local multi-process timing (a process start is about
# 1 ms here), so it starts as few as it can: no dirname, mktemp, awk or rm -r, which took about
# 5 of its 11 ms.
here=${BASH_SOURCE[0]%/*}
[ "$here" != "${BASH_SOURCE[0]}" ] || here=.
bin=${BLOOMFLOW:-}
if [ -z "$bin" ]; then
  if [ -x "$here/../target/release/bloomflow" ]; then bin="$here/../target/release/bloomflow"; else bin=bloomflow; fi
fi

# The hostfile, created without clobbering anything (bash's noclobber, no mktemp).
set -C
while :; do
  hostfile="${TMPDIR:-/tmp}/bloomflow-cluster.$$.$RANDOM.hosts"
  { : > "$hostfile"; } 2>/dev/null && break
done
set +C

# Ports in use (listening or connected), from `ss` (netlink; reading /proc/net/tcp took 30 ms
# here), its fourth column's text after the last colon, parsed by bash rather than by awk.
used=" "
if command -v ss >/dev/null 2>&1; then
  while read -r _ _ _ local _; do used+="${local##*:} "; done < <(ss -Htan 2>/dev/null)
fi
for ((i = 0; i < n; i++)); do
  while :; do
    port=$((20000 + RANDOM % 40000))
    case "$used" in *" $port "*) continue ;; esac
    used+="$port "
    echo "127.0.0.1:$port"
    break
  done
done >> "$hostfile"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -f "$hostfile"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Standard input is process 0's: a job reads `-` there. (A background command's standard input
# would otherwise be /dev/null.) The other processes get none.
exec 3<&0
for ((i = 0; i < n; i++)); do
  if [ "$i" -eq 0 ]; then
    "$bin" "$@" -n "$n" -p "$i" -w "$w" --hostfile "$hostfile" <&3 3<&- &
  else
    "$bin" "$@" -n "$n" -p "$i" -w "$w" --hostfile "$hostfile" </dev/null 3<&- &
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
