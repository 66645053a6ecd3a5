#!/usr/bin/env bash
# Runs one bloomflow job as N processes of W workers each on this machine (127.0.0.1), the way it
# would run on N machines: a generated hostfile with free ports, one process per line of it.
#
#   jobs/local-cluster.sh N W -- ARGS...
#
# runs `bloomflow ARGS... -n N -p I -w W --hostfile HOSTFILE` for I in 0..N-1, waits for all,
# and if any fails kills the rest and exits non-zero. BLOOMFLOW names the binary (default: the
# release build of this checkout, else `bloomflow` on PATH).
set -euo pipefail

usage() { echo "usage: $0 PROCESSES WORKERS -- BLOOMFLOW-ARGS..." >&2; exit 2; }
[ $# -ge 3 ] || usage
n=$1 w=$2
[ "$3" = "--" ] || usage
shift 3
[[ "$n" =~ ^[1-9][0-9]*$ && "$w" =~ ^[1-9][0-9]*$ ]] || usage

here=$(cd "$(dirname "$0")" && pwd)
bin=${BLOOMFLOW:-}
if [ -z "$bin" ]; then
  if [ -x "$here/../target/release/bloomflow" ]; then bin="$here/../target/release/bloomflow"; else bin=bloomflow; fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bloomflow-cluster.XXXXXX")
hostfile="$work/hosts"
# Free ports: random ones that nothing listens on (`ss`, fast), else ask the kernel (python3).
if command -v ss >/dev/null 2>&1; then
  used=" $(ss -Htan 2>/dev/null | awk '{n = split($4, a, ":"); printf "%s ", a[n]}') "
  for ((i = 0; i < n; i++)); do
    while :; do
      port=$((20000 + RANDOM % 40000))
      case "$used" in *" $port "*) continue ;; esac
      used="$used$port "
      echo "127.0.0.1:$port"
      break
    done
  done > "$hostfile"
else
  python3 - "$n" > "$hostfile" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
for s in socks:
    print(f"127.0.0.1:{s.getsockname()[1]}")
PY
fi

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for ((i = 0; i < n; i++)); do
  "$bin" "$@" -n "$n" -p "$i" -w "$w" --hostfile "$hostfile" &
  pids+=("$!")
done

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
