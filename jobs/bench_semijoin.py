"""The semi-join benchmark of ../shared/PEERS.md: bloomflow beside DuckDB and Polars, in one run.

Each tool runs RUNS times as its own process (so its peak RSS is its own), 2 threads each, and
the writes of every run are flushed (untimed) before the next starts; the medians of wall time
and the peak RSS are printed with ratios against bloomflow. Output content is
compared: bloomflow --exact and the peers must write the same rows; bloomflow's Bloom-only output
must contain them all. Also printed, as a reference for the scaling target: the host's own
two-core scaling of reading the probe from the page cache. Called by bench-semijoin.sh, which
sets up the virtual environment.

With SHUFFLE=1 in the environment, `--exact --exact-strategy shuffle` is timed too (its rows must
be the broadcast join's, and its peak RSS is printed for both probes). With ANTI=1 in the
environment, the anti-join (the probe rows whose key is not on the build side: bloomflow --exact
--anti, DuckDB's ANTI JOIN, Polars' anti join) is timed beside them, and its outputs compared by
an order-free digest of their rows. With BIG_BUILD=1, a join with a build side as large as the
probe is timed too (not a target): the 2M-row probe against the probe's own 20M `customer_id`
keys (12.6M distinct ids in random order), bloomflow --exact (as `auto` chooses: the probe-side
strategy, the build side being 10 times the probe's bytes; then shuffle) beside
DuckDB's and Polars' semi-joins, every output compared. With LONG_KEYS=1, two joins keyed on the
30-byte `payload` column are timed too (not targets), every output compared: the probe's own 20M
payloads (all distinct) as the build side of the 2M-row probe (`auto` holds the probe's keys:
the probe-side strategy), and the 2M-row probe's payloads as the build side of the whole probe
(broadcast). With REPEATED_KEYS=1, a join whose build keys repeat is timed too (not a
target), every output compared: the probe's own 20M `amount` values (about 1M distinct, each
some 20 times) as the build side of the 2M-row probe, as bloomflow's `auto` chooses (probe-side)
and with the shuffle strategy. With QUOTED=1, the join is timed on copies of both files with
every field in quotes (as R's write.csv, Python's QUOTE_ALL and Spark's quoteAll write them; not
a target), every output compared, quotes aside, with each other and with the unquoted join's.
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

def duckdb_semi(probe_file, build_file, name, key="customer_id"):
    """DuckDB's semi-join of `probe_file` on the keys of `build_file`, into `name` in `out`."""
    return f"""
import duckdb
con = duckdb.connect(config={{'threads': {THREADS}}})
con.execute(\"\"\"COPY (SELECT * FROM read_csv('{probe_file}', all_varchar=true)
  WHERE {key} IN (SELECT {key} FROM read_csv('{build_file}', all_varchar=true)))
  TO '{out}/{name}' (HEADER)\"\"\")
"""

def polars_join(probe_file, build_file, name, how, key="customer_id"):
    """Polars' `how` join (semi or anti) of `probe_file` on the keys of `build_file`, into `name`."""
    return f"""
import polars as pl
p = pl.scan_csv('{probe_file}', infer_schema=False)
b = pl.scan_csv('{build_file}', infer_schema=False).select('{key}')
p.join(b, on='{key}', how='{how}').sink_csv('{out}/{name}')
"""

DUCKDB = duckdb_semi(probe, build, "duckdb.csv")
POLARS = polars_join(probe, build, "polars.csv", "semi")
DUCKDB_ANTI = f"""
import duckdb
con = duckdb.connect(config={{'threads': {THREADS}}})
con.execute(\"\"\"COPY (SELECT p.* FROM read_csv('{probe}', all_varchar=true) p
  ANTI JOIN read_csv('{build}', all_varchar=true) b USING (customer_id))
  TO '{out}/duckdb-anti.csv' (HEADER)\"\"\")
"""
POLARS_ANTI = polars_join(probe, build, "polars-anti.csv", "anti")
# The join with a build side as large as the probe (BIG_BUILD=1): the first 2M probe rows
# (written below) against the whole probe's keys.
small_probe = out / "probe-2m.csv"
DUCKDB_BIG = duckdb_semi(small_probe, probe, "duckdb-big.csv")
POLARS_BIG = polars_join(small_probe, probe, "polars-big.csv", "semi")
def bloomflow_cmd(name, *extra, probe_file=probe, workers=THREADS):
    return [bloomflow, "semijoin", "--build", str(build), "--build-key", "customer_id",
            "--probe", str(probe_file), "--probe-key", "customer_id", "--expected-items", "1000000",
            "-o", str(out / name), "--overwrite", "-w", workers, "--no-progress", *extra]

cluster = str(Path(bloomflow).resolve().parents[2] / "jobs" / "local-cluster.sh")
TOOLS = [
    ("bloomflow semijoin -w 2 (Bloom only)", bloomflow_cmd("bloom")),
    ("bloomflow semijoin -w 2 --exact", bloomflow_cmd("exact", "--exact")),
    ("DuckDB (all_varchar, IN subquery)", [py, "-c", DUCKDB]),
    ("Polars (scan_csv, semi join, sink_csv)", [py, "-c", POLARS]),
    ("bloomflow semijoin -w 1 --exact", bloomflow_cmd("exact-w1", "--exact", workers="1")),
    ("bloomflow semijoin, 2 processes x 1, --exact", [cluster, "2", "1", "--", "semijoin", "--build", str(build),
        "--build-key", "customer_id", "--probe", str(probe), "--probe-key", "customer_id", "--expected-items", "1000000",
        "-o", str(out / "exact-p2"), "--overwrite", "--no-progress", "--exact"]),
]
SHUFFLE = os.environ.get("SHUFFLE") == "1"
if SHUFFLE:
    TOOLS += [("bloomflow semijoin -w 2 --exact --exact-strategy shuffle", bloomflow_cmd("shuffle", "--exact", "--exact-strategy", "shuffle"))]
BIG_BUILD = os.environ.get("BIG_BUILD") == "1"
BIG = ["bloomflow, probe as build side, --exact", "bloomflow, probe as build side, --exact shuffle",
       "DuckDB, probe as build side", "Polars, probe as build side"]
if BIG_BUILD:
    big = lambda name, *extra: [bloomflow, "semijoin", "--build", str(probe), "--build-key", "customer_id", "--probe",
                                str(small_probe), "--probe-key", "customer_id", "-o", str(out / name), "--overwrite",
                                "-w", THREADS, "--no-progress", "--exact", *extra]
    TOOLS += [(BIG[0], big("big")), (BIG[1], big("big-shuffle", "--exact-strategy", "shuffle")),
              (BIG[2], [py, "-c", DUCKDB_BIG]), (BIG[3], [py, "-c", POLARS_BIG])]
LONG_KEYS = os.environ.get("LONG_KEYS") == "1"
LONG = ["bloomflow, payloads of the probe as build side, --exact", "DuckDB, payloads of the probe as build side",
        "Polars, payloads of the probe as build side", "bloomflow, payloads of 2M rows as build side, --exact",
        "DuckDB, payloads of 2M rows as build side", "Polars, payloads of 2M rows as build side"]
if LONG_KEYS:
    def long(name, build_file, probe_file):
        return [bloomflow, "semijoin", "--build", str(build_file), "--build-key", "payload", "--probe", str(probe_file),
                "--probe-key", "payload", "-o", str(out / name), "--overwrite", "-w", THREADS, "--no-progress", "--exact"]
    TOOLS += [(LONG[0], long("long-big", probe, small_probe)),
              (LONG[1], [py, "-c", duckdb_semi(small_probe, probe, "duckdb-long-big.csv", "payload")]),
              (LONG[2], [py, "-c", polars_join(small_probe, probe, "polars-long-big.csv", "semi", "payload")]),
              (LONG[3], long("long", small_probe, probe)),
              (LONG[4], [py, "-c", duckdb_semi(probe, small_probe, "duckdb-long.csv", "payload")]),
              (LONG[5], [py, "-c", polars_join(probe, small_probe, "polars-long.csv", "semi", "payload")])]
REPEATED_KEYS = os.environ.get("REPEATED_KEYS") == "1"
REPEATED = ["bloomflow, amounts of the probe as build side, --exact", "DuckDB, amounts of the probe as build side",
            "Polars, amounts of the probe as build side", "bloomflow, amounts of the probe as build side, --exact shuffle"]
if REPEATED_KEYS:
    def amounts(name, *extra):
        return [bloomflow, "semijoin", "--build", str(probe), "--build-key", "amount", "--probe", str(small_probe),
                "--probe-key", "amount", "-o", str(out / name), "--overwrite", "-w", THREADS, "--no-progress", "--exact", *extra]
    TOOLS += [(REPEATED[0], amounts("repeated")),
              (REPEATED[1], [py, "-c", duckdb_semi(small_probe, probe, "duckdb-repeated.csv", "amount")]),
              (REPEATED[2], [py, "-c", polars_join(small_probe, probe, "polars-repeated.csv", "semi", "amount")]),
              (REPEATED[3], amounts("repeated-shuffle", "--exact-strategy", "shuffle"))]
QUOTED = os.environ.get("QUOTED") == "1"
QUOTED_NAMES = ["bloomflow semijoin -w 2 --exact, every field quoted", "DuckDB, every field quoted",
                "Polars, every field quoted"]
quoted_build, quoted_probe = out / "build-quoted.csv", out / "probe-quoted.csv"
if QUOTED:
    quoted_cmd = bloomflow_cmd("quoted", "--exact", probe_file=quoted_probe)
    quoted_cmd[quoted_cmd.index("--build") + 1] = str(quoted_build)
    TOOLS += [(QUOTED_NAMES[0], quoted_cmd),
              (QUOTED_NAMES[1], [py, "-c", duckdb_semi(quoted_probe, quoted_build, "duckdb-quoted.csv")]),
              (QUOTED_NAMES[2], [py, "-c", polars_join(quoted_probe, quoted_build, "polars-quoted.csv", "semi")])]
ANTI = os.environ.get("ANTI") == "1"
if ANTI:
    TOOLS += [
        ("bloomflow semijoin -w 2 --exact --anti", bloomflow_cmd("anti", "--exact", "--anti")),
        ("DuckDB (all_varchar, ANTI JOIN)", [py, "-c", DUCKDB_ANTI]),
        ("Polars (scan_csv, anti join, sink_csv)", [py, "-c", POLARS_ANTI]),
    ]
# The same job on the first 2M probe rows (`small_probe`), for the flat-memory check.

def run_once(cmd):
    env = dict(os.environ, POLARS_MAX_THREADS=THREADS, BLOOMFLOW=bloomflow)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode()
    if status != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return wall, usage.ru_maxrss / 1024  # KiB -> MiB

def read_seconds(halves):
    """Wall seconds of reading the probe from the page cache with one dd, or with two at once,
    each reading a half: the host's own two-core scaling of that copy, a large part of every
    job's time, as a reference for target 3 (not a target; bench-common.sh's read_whole and
    read_halves for the build script)."""
    dd = ["dd", f"if={probe}", "of=/dev/null", "bs=256K", "status=none"]
    half = probe.stat().st_size // 2
    cmds = [dd + [f"count={half}", "iflag=count_bytes"], dd + [f"skip={half}", "iflag=skip_bytes"]] if halves else [dd]
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd) for cmd in cmds]
    if any(p.wait() != 0 for p in procs):
        sys.exit(f"failed: {cmds}")
    return time.perf_counter() - start

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

def multiset_digest(paths, unquote=False):
    """Rows (headers dropped) and an order-free digest of CSV files too large to sort in memory:
    the sum of the rows' hashes. `unquote`: each row's quotes taken out first (for rows whose
    fields hold no quote or delimiter, written in quotes by one tool and not by another)."""
    count, total = 0, 0
    for p in paths:
        with open(p, "rb") as f:
            next(f, None)
            for line in f:
                count += 1
                row = line.rstrip(b"\r\n")
                if unquote:
                    row = row.replace(b'"', b"")
                total = (total + int.from_bytes(hashlib.blake2b(row, digest_size=8).digest(), "little")) % (1 << 64)
    return count, total

def write_quoted(src_path, dst_path):
    """A copy of a CSV file with every field in quotes, as R's write.csv (text columns), Python's
    csv.QUOTE_ALL and Spark's quoteAll write them (the generated fields hold no quote or comma)."""
    with open(src_path, "rb") as src, open(dst_path, "wb") as dst:
        for line in src:
            dst.write(b'"' + line.rstrip(b"\n").replace(b",", b'","') + b'"\n')

out.mkdir(parents=True, exist_ok=True)
with open(probe, "rb") as src, open(small_probe, "wb") as dst:
    for i, line in enumerate(src):
        if i > 2_000_000:
            break
        dst.write(line)
if QUOTED:
    write_quoted(build, quoted_build)
    write_quoted(probe, quoted_probe)
    subprocess.run(["cat", str(quoted_probe), str(quoted_build)], stdout=subprocess.DEVNULL, check=True)
subprocess.run(["cat", str(probe), str(build)], stdout=subprocess.DEVNULL, check=True)  # warm cache
env_cluster = dict(os.environ, BLOOMFLOW=bloomflow)
# Runs are interleaved (every tool once per round) so that the host's drifting speed falls on all
# tools alike instead of on whichever ran during a slow spell.
walls = {name: [] for name, _ in TOOLS}
rss = {name: [] for name, _ in TOOLS}
reads = {False: [], True: []}
for round_ in range(runs):
    for halves in reads:
        reads[halves].append(read_seconds(halves))
    for name, cmd in TOOLS:
        w, r = run_once(cmd)
        walls[name].append(w)
        rss[name].append(r)
        # Untimed: every run starts with no other tool's writes pending. DuckDB and Polars leave
        # their outputs (75 MB each) to the kernel's writeback; without this, the runs after them
        # paid for it (2 processes x 1 at 1.05-1.27x of 1 x 2 in the script, 1.06-1.10x in
        # interleaved pairs; how, not traced: see jobs/BENCHMARKS.md, fourteenth round).
        os.sync()
    print(f"  round {round_ + 1} of {runs} done", file=sys.stderr)
results = {name: (statistics.median(walls[name]), max(rss[name])) for name, _ in TOOLS}
for name, (wall, peak) in results.items():
    print(f"  {name}: {wall:.3f} s, {peak:.0f} MiB", file=sys.stderr)
small_rss = max(run_once(bloomflow_cmd("exact-2m", "--exact", probe_file=small_probe))[1] for _ in range(runs))
if SHUFFLE:
    small_shuffle_rss = max(run_once(bloomflow_cmd("shuffle-2m", "--exact", "--exact-strategy", "shuffle", probe_file=small_probe))[1] for _ in range(runs))

parts = lambda d: sorted((out / d).glob("part-*"))
exact, bloom = rows(parts("exact")), rows(parts("bloom"))
duck, pol = rows([out / "duckdb.csv"]), rows([out / "polars.csv"])
size = probe.stat().st_size
print(f"\nsemi-join on {probe} ({size:,} bytes), 2 threads each unless noted, median of {runs} runs\n")
print("| tool | wall s | peak RSS MiB | MB/s of probe | time vs bloomflow --exact |")
print("|---|---:|---:|---:|---:|")
base = results["bloomflow semijoin -w 2 --exact"][0]
for name, (wall, rss) in results.items():
    print(f"| {name} | {wall:.3f} | {rss:.0f} | {size / wall / 1e6:.0f} | {wall / base:.2f}x |")
peer = min(results["DuckDB (all_varchar, IN subquery)"][0], results["Polars (scan_csv, semi join, sink_csv)"][0])
exact_t, exact_rss = results["bloomflow semijoin -w 2 --exact"]
bloom_t = results["bloomflow semijoin -w 2 (Bloom only)"][0]
w1 = results["bloomflow semijoin -w 1 --exact"][0]
p2 = results["bloomflow semijoin, 2 processes x 1, --exact"][0]
same = digest(exact) == digest(duck) == digest(pol) == digest(rows(parts("exact-p2")))
superset = set(exact) <= set(bloom)
print(f"\nrows: --exact {len(exact):,}, DuckDB {len(duck):,}, Polars {len(pol):,}; Bloom only {len(bloom):,} "
      f"({len(bloom) - len(exact):,} false positives, all true matches kept: {'yes' if superset else 'NO'})")
def target(text, met):
    print(f"- [{'met' if met else 'NOT met'}] {text}")
print("\ntargets:")
target(f"--exact -w 2 at least 4x faster than the faster of DuckDB and Polars: {peer / exact_t:.2f}x "
       f"(Bloom only: {peer / bloom_t:.2f}x)", peer / exact_t >= 4)
target(f"peak RSS at most 64 MiB: {exact_rss:.0f} MiB", exact_rss <= 64)
target("output identical in content to DuckDB and Polars (and for 2 processes)", same)
target(f"-w 2 at least 1.7x faster than -w 1: {w1 / exact_t:.2f}x", w1 / exact_t >= 1.7)
target(f"2 processes x 1 within 15% of 1 process x 2: {p2 / exact_t:.2f}x the time", p2 / exact_t <= 1.15)
target(f"peak RSS on the 20M-row probe within 10% of the 2M-row probe's: {exact_rss:.0f} vs {small_rss:.0f} MiB",
       exact_rss <= 1.10 * small_rss)
read1, read2 = statistics.median(reads[False]), statistics.median(reads[True])
print(f"\nhost reference for target 3 (not a target): reading the probe from the page cache, two readers of\n"
      f"its halves {read1 / read2:.2f}x faster than one reader of all of it (dd, {read2:.3f} against {read1:.3f} s)")
if SHUFFLE:
    shuffle_t, shuffle_rss = results["bloomflow semijoin -w 2 --exact --exact-strategy shuffle"]
    same = same and digest(rows(parts("shuffle"))) == digest(exact)
    print(f"\nshuffle strategy: same rows {'yes' if digest(rows(parts('shuffle'))) == digest(exact) else 'NO'}; "
          f"{peer / shuffle_t:.2f}x faster than the faster peer; peak RSS {shuffle_rss:.0f} MiB on the 20M-row probe, "
          f"{small_shuffle_rss:.0f} MiB on the 2M-row one")
anti_same = True
if ANTI:
    anti = {name: multiset_digest(paths) for name, paths in
            [("bloomflow", parts("anti")), ("DuckDB", [out / "duckdb-anti.csv"]), ("Polars", [out / "polars-anti.csv"])]}
    anti_same = len(set(anti.values())) == 1
    anti_peer = min(results["DuckDB (all_varchar, ANTI JOIN)"][0], results["Polars (scan_csv, anti join, sink_csv)"][0])
    anti_t = results["bloomflow semijoin -w 2 --exact --anti"][0]
    print(f"\nanti-join rows: " + ", ".join(f"{name} {count:,}" for name, (count, _) in anti.items())
          + f"; same rows: {'yes' if anti_same else 'NO'}; bloomflow {anti_peer / anti_t:.2f}x faster than the faster peer")
big_same = True
if BIG_BUILD:
    outputs = [rows(parts("big")), rows(parts("big-shuffle")), rows([out / "duckdb-big.csv"]), rows([out / "polars-big.csv"])]
    big_same = len({digest(lines) for lines in outputs}) == 1
    big_peer = min(results[BIG[2]][0], results[BIG[3]][0])
    print(f"\nthe probe as the build side (not a target): rows " + ", ".join(f"{len(lines):,}" for lines in outputs)
          + f"; same rows: {'yes' if big_same else 'NO'}; bloomflow --exact {big_peer / results[BIG[0]][0]:.2f}x faster "
          f"than the faster peer, with the shuffle strategy {big_peer / results[BIG[1]][0]:.2f}x")
long_same = True
other_keys = []
if LONG_KEYS:
    other_keys += [("the probe's payloads as the build side of the 2M-row probe", ("long-big", "duckdb-long-big.csv", "polars-long-big.csv"), LONG[:3]),
                   ("the 2M-row probe's payloads as the build side of the probe", ("long", "duckdb-long.csv", "polars-long.csv"), LONG[3:])]
if REPEATED_KEYS:
    other_keys += [("the probe's amounts (repeated) as the build side of the 2M-row probe", ("repeated", "duckdb-repeated.csv", "polars-repeated.csv"), REPEATED[:3]),
                   ("the same, bloomflow with the shuffle strategy", ("repeated-shuffle", "duckdb-repeated.csv", "polars-repeated.csv"), [REPEATED[3]] + REPEATED[1:3])]
if other_keys:
    for label, (ours, duck_file, polars_file), names in other_keys:
        outputs = [multiset_digest(parts(ours)), multiset_digest([out / duck_file]), multiset_digest([out / polars_file])]
        this_same = len(set(outputs)) == 1
        long_same = long_same and this_same
        long_peer = min(results[names[1]][0], results[names[2]][0])
        print(f"\n{label} (not a target): rows " + ", ".join(f"{count:,}" for count, _ in outputs)
              + f"; same rows: {'yes' if this_same else 'NO'}; bloomflow --exact {long_peer / results[names[0]][0]:.2f}x faster "
              f"than the faster peer, peak RSS {results[names[0]][1]:.0f} against {min(results[names[1]][1], results[names[2]][1]):.0f} MiB")
quoted_same = True
if QUOTED:
    outputs = [multiset_digest(parts("quoted"), unquote=True), multiset_digest([out / "duckdb-quoted.csv"], unquote=True),
               multiset_digest([out / "polars-quoted.csv"], unquote=True), multiset_digest(parts("exact"))]
    quoted_same = len(set(outputs)) == 1
    quoted_peer = min(results[QUOTED_NAMES[1]][0], results[QUOTED_NAMES[2]][0])
    quoted_t = results[QUOTED_NAMES[0]][0]
    print(f"\nevery field quoted (not a target): rows " + ", ".join(f"{count:,}" for count, _ in outputs[:3])
          + f"; the same rows, quotes aside, as each other and as unquoted: {'yes' if quoted_same else 'NO'}; bloomflow --exact "
          f"{quoted_peer / quoted_t:.2f}x faster than the faster peer, {quoted_t / exact_t:.2f}x its time unquoted "
          f"(the file {quoted_probe.stat().st_size / size:.2f}x the bytes)")
sys.exit(0 if same and superset and anti_same and big_same and long_same and quoted_same else 1)
