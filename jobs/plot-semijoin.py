#!/usr/bin/env python3
"""Draws the semi-join benchmark's table as an SVG bar chart: wall time and peak RSS per tool.

    jobs/bench-semijoin.sh > semi.out
    jobs/plot-semijoin.py semi.out jobs/semijoin.svg

Reads the first Markdown table of the script's output (`| tool | wall s | peak RSS MiB | ...`)
and plots every row of it, in its order, as measured in that one run: no figure is typed in.
Plain Python, no plotting library, so that it runs wherever the script does.
"""

import html
import sys

BAR_HEIGHT = 22
ROW = 30
LABEL_WIDTH = 340
PANEL_WIDTH = 260
GAP = 40
TOP = 56


def table_rows(text):
    """(tool, wall seconds, peak RSS MiB) of each row of the first table in `text`."""
    rows, seen_header = [], False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| tool |"):
            seen_header = True
            continue
        if not seen_header or line.startswith("|---"):
            continue
        if not line.startswith("|"):
            if rows:
                break
            continue
        rows.append((cells[0], float(cells[1]), float(cells[2])))
    if not rows:
        sys.exit("no table of `| tool | wall s | peak RSS MiB |` rows found: is this bench-semijoin.sh's output?")
    return rows


def title_of(text):
    """The line that says what was measured, if the output has one, its file named without the
    directory it was in on the machine that ran it."""
    line = next((l.strip() for l in text.splitlines() if l.startswith("semi-join on ")), "semi-join")
    words = line.split(" ")
    return " ".join(w.rsplit("/", 1)[-1] if "/" in w else w for w in words)


def panel(x0, rows, value, unit, heading):
    """One panel of bars, scaled to its largest value, each labelled with its figure."""
    top = max(value(r) for r in rows)
    out = [f'<text x="{x0}" y="{TOP - 14}" class="h">{html.escape(heading)}</text>']
    for i, row in enumerate(rows):
        y = TOP + i * ROW
        width = max(1.0, PANEL_WIDTH * value(row) / top)
        colour = "#2b7bb9" if row[0].startswith("bloomflow") else "#b0b0b0"
        out.append(f'<rect x="{x0}" y="{y}" width="{width:.1f}" height="{BAR_HEIGHT}" fill="{colour}"/>')
        out.append(f'<text x="{x0 + width + 5:.1f}" y="{y + 16}">{value(row):g} {unit}</text>')
    return out


def svg(rows, title):
    height = TOP + len(rows) * ROW + 10
    width = LABEL_WIDTH + 2 * (PANEL_WIDTH + 70) + GAP
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="13">',
        "<style>.h { font-weight: bold; } .t { font-size: 12px; fill: #444; }</style>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="8" y="18" class="t">{html.escape(title)}</text>',
    ]
    for i, row in enumerate(rows):
        parts.append(f'<text x="8" y="{TOP + i * ROW + 16}">{html.escape(row[0])}</text>')
    parts += panel(LABEL_WIDTH, rows, lambda r: r[1], "s", "wall time (lower is better)")
    parts += panel(LABEL_WIDTH + PANEL_WIDTH + 70 + GAP, rows, lambda r: r[2], "MiB", "peak RSS")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    text = open(sys.argv[1], encoding="utf-8").read()
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        out.write(svg(table_rows(text), title_of(text)))


if __name__ == "__main__":
    main()
