"""The semi-join benchmark of ../shared/PEERS.md: bloomflow beside DuckDB and Polars, in one run.

Each tool runs RUNS times as its own process (so its peak RSS is its own), 2 threads each; the
medians of wall time and the peak RSS are printed with ratios against bloomflow. Output content is
compared: bloomflow --exact and the peers must write the same rows; bloomflow's Bloom-only output
must contain them all. Called by bench-semijoin.sh, which sets up the virtual environment.
"""
import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

data, out, bloomflow, runs = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
build, probe = data / "build.csv", data / "probe.csv"
py = sys.executable
THREADS = "2"

DUCKDB = f"""
import duckdb
con = duckdb.connect(config={{'threads': {THREADS}}})
con.execute(\"\"\"COPY (SELECT * FROM read_csv('{probe}', all_varchar=true)
  WHERE customer_id IN (SELECT customer_id FROM read_csv('{build}', all_varchar=true)))
  TO '{out}/duckdb.csv' (HEADER)\"\"\")
"""
POLARS = f"""
import polars as pl
p = pl.scan_csv('{probe}', infer_schema=False)
b = pl.scan_csv('{build}', infer_schema=False).select('customer_id')
p.join(b, on='customer_id', how='semi').sink_csv('{out}/polars.csv')
"""
def bloomflow_cmd(name, *extra):
    return [bloomflow, "semijoin", "--build", str(build), "--build-key", "customer_id",
            "--probe", str(probe), "--probe-key", "customer_id", "--expected-items", "1000000",
            "-o", str(out / name), "--overwrite", "-w", THREADS, "--no-progress", *extra]

TOOLS = [
    ("bloomflow semijoin -w 2 (Bloom only)", bloomflow_cmd("bloom")),
    ("bloomflow semijoin -w 2 --exact", bloomflow_cmd("exact", "--exact")),
    ("DuckDB (all_varchar, IN subquery)", [py, "-c", DUCKDB]),
    ("Polars (scan_csv, semi join, sink_csv)", [py, "-c", POLARS]),
]

def run_once(cmd):
    env = dict(os.environ, POLARS_MAX_THREADS=THREADS)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode()
    if status != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return wall, usage.ru_maxrss / 1024  # KiB -> MiB

def rows(paths):
    """The data rows (headers dropped) of CSV files, as a sorted list."""
    lines = []
    for p in paths:
        with open(p, "rb") as f:
            lines.extend(f.read().splitlines()[1:])
    lines.sort()
    return lines

def digest(lines):
    return hashlib.sha256(b"\n".join(lines)).hexdigest()[:16]

out.mkdir(parents=True, exist_ok=True)
subprocess.run(["cat", str(probe), str(build)], stdout=subprocess.DEVNULL, check=True)  # warm cache
results = []
for name, cmd in TOOLS:
    walls, rss = [], []
    for _ in range(runs):
        w, r = run_once(cmd)
        walls.append(w)
        rss.append(r)
    results.append((name, statistics.median(walls), max(rss)))
    print(f"  {name}: {statistics.median(walls):.3f} s, {max(rss):.0f} MiB", file=sys.stderr)

parts = lambda d: sorted((out / d).glob("part-*"))
exact, bloom = rows(parts("exact")), rows(parts("bloom"))
duck, pol = rows([out / "duckdb.csv"]), rows([out / "polars.csv"])
size = probe.stat().st_size
print(f"\nsemi-join on {probe} ({size:,} bytes), 2 threads each, median of {runs} runs\n")
print("| tool | wall s | peak RSS MiB | MB/s of probe | time vs bloomflow Bloom-only |")
print("|---|---:|---:|---:|---:|")
base = results[0][1]
for name, wall, rss in results:
    print(f"| {name} | {wall:.3f} | {rss:.0f} | {size / wall / 1e6:.0f} | {wall / base:.2f}x |")
fastest_peer = min(r[1] for r in results[2:])
print(f"\nfaster of DuckDB and Polars / bloomflow: {fastest_peer / results[0][1]:.2f}x (Bloom only), "
      f"{fastest_peer / results[1][1]:.2f}x (--exact)")
print(f"rows: exact {len(exact):,}, DuckDB {len(duck):,}, Polars {len(pol):,}, Bloom-only {len(bloom):,} "
      f"({len(bloom) - len(exact):,} false positives)")
same = digest(exact) == digest(duck) == digest(pol)
superset = set(exact) <= set(bloom)
print(f"--exact output identical in content to DuckDB and Polars: {'yes' if same else 'NO'}; "
      f"Bloom-only output contains every match: {'yes' if superset else 'NO'}")
sys.exit(0 if same and superset else 1)
