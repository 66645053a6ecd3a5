#!/usr/bin/env python3
"""Writes the sample data bundled in data/ (and in the binary, for `bloomflow demo`).

customers.csv: 3,000 customers (the build side). events.csv: 40,000 events (the probe side), about
10% of which belong to a known customer. Both have a header, RFC 4180 quoted fields (commas and
doubled quotes inside quotes, some quoted keys) and a mix of LF and CRLF line ends, so the demo
exercises what real exports look like. Deterministic: the same bytes every run.
"""
import random

rng = random.Random(20261130)
FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Leslie", "Margaret"]
LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Lamport", "Hamilton"]
SEGMENTS = ["retail", "smb", "enterprise", "public"]


def line_end():
    return "\r\n" if rng.random() < 0.2 else "\n"


def quote(s):
    return '"' + s.replace('"', '""') + '"'


with open("customers.csv", "w", newline="") as f:
    f.write("customer_id,name,segment,country\n")
    for i in range(3000):
        cid = str(i * 10 + 3)
        name = f"{rng.choice(LAST)}, {rng.choice(FIRST)}"  # always quoted: it holds a comma
        if rng.random() < 0.05:
            name += ' "the great"'
        key = quote(cid) if rng.random() < 0.1 else cid
        f.write(f"{key},{quote(name)},{SEGMENTS[i % 4]},{rng.choice(['NL', 'DE', 'US', 'JP', 'BR'])}{line_end()}")

with open("events.csv", "w", newline="") as f:
    f.write("event_id,customer_id,ts,amount,note\n")
    for i in range(40000):
        cid = str(rng.randrange(30000))
        key = quote(cid) if rng.random() < 0.05 else cid
        ts = f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00"
        amount = f"{rng.randrange(100000) / 100:.2f}"
        r = rng.random()
        note = quote(f"gift, wrapped {i}") if r < 0.1 else (quote(f'said "thanks" {i}') if r < 0.15 else f"n{i}")
        f.write(f"{i},{key},{ts},{amount},{note}{line_end()}")
