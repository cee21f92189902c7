"""The table docs/perf-notes.md shows for an ncu run of the multi-step swap's kernels, from ncu's CSV.

    python scripts/ncu_table.py results/probes/ncu-h200-20261201/serving-b64.csv [more.csv ...]

Reads the `--csv --page details` output that `scripts/gpu_session.sh ncu:CASE` keeps (lines before
the CSV header, ncu's own messages, are skipped) and prints one markdown row per profiled kernel:
grid x block, duration, theoretical / achieved occupancy, issue slots busy ("One or More Eligible"),
warp cycles per issued instruction and, where ncu's CPIStall rule states it, the cycles of those spent
waiting on an L1TEX (global, local) load. Exit 2 if a file has no ncu table.
"""
from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

METRICS = {  # column -> ncu metric name (section "details" page)
    "duration_ns": "Duration",
    "theoretical": "Theoretical Occupancy",
    "achieved": "Achieved Occupancy",
    "eligible": "One or More Eligible",
    "cpi": "Warp Cycles Per Issued Instruction",
}
L1TEX = re.compile(r"spends ([0-9.,]+) cycles being stalled waiting for a scoreboard dependency on a L1TEX")


def kernels(text: str) -> list[dict]:
    """One dict per profiled kernel (in profile order): name, grid, block, the METRICS as floats, l1tex."""
    start = text.find('"ID"')
    if start < 0:
        raise ValueError("no ncu CSV table (no header line starting with \"ID\")")
    out: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        k = out.setdefault(row["ID"], {"name": row["Kernel Name"], "grid": row["Grid Size"], "block": row["Block Size"]})
        for key, metric in METRICS.items():
            if row.get("Metric Name") == metric and row.get("Metric Value"):
                k[key] = float(row["Metric Value"].replace(",", ""))
        m = L1TEX.search(row.get("Rule Description") or "")
        if m:
            k["l1tex"] = float(m.group(1).replace(",", ""))
    return list(out.values())


def _dims(text: str) -> str:
    return text.strip("()").split(",")[0].strip()


def row(label: str, k: dict) -> str:
    name = re.sub(r"^void |<.*$|\(.*$", "", k["name"]).split("::")[-1]
    def pct(key: str) -> str:
        return f"{k[key]:.1f}%" if key in k else "-"
    def num(key: str, fmt: str) -> str:
        return format(k[key], fmt) if key in k else "-"
    dur = f"{k['duration_ns'] / 1e3:.1f} us" if "duration_ns" in k else "-"
    return (f"| {name}, {label} | {_dims(k['grid'])} x {_dims(k['block'])} | {dur} | {pct('theoretical')} / "
            f"{pct('achieved')} | {pct('eligible')} | {num('cpi', '.0f')} | {num('l1tex', '.0f')} |")


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    print("| kernel | grid x block | duration | occupancy (theoretical / achieved) | issue slots busy | "
          "cycles per issued instr. | of which L1TEX wait |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: |")
    for path in argv:
        try:
            found = kernels(Path(path).read_text())
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
        for k in found:
            print(row(Path(path).stem, k))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
