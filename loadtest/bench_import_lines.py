"""Benchmark: ``tickwheel job import``'s local work a line, without a
server: CPU microseconds a line (``time.process_time``, the best of
``--repeat`` rounds) to read ``--lines`` JSON lines, derive each one's
request id and build its Job, as the import does before its calls.

    PYTHONPATH=server:workers:sdk/python .venv/bin/python loadtest/bench_import_lines.py [--lines 20000] [--repeat 5] [--smoke]

Prints one JSON object: ``us_per_line`` by line shape:

- ``plain``: strings, a small object payload with an integer, labels;
- ``numbers``: the same with a payload of twenty numbers with fractions;
- ``csv``: the plain shape as a CSV record (its payload and labels JSON
  text in cells).

Run it with another tree's ``PYTHONPATH`` to compare trees: each shape
times what that tree does. ``--smoke`` runs tiny sizes so CI keeps the
script working.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import time

from tickwheel_server.cli import jobimport
from tickwheel_server.cli.importrows import canonical, derived_request_id, job_from_row

ROW = {"name": "nightly-report-0001", "cron": "0 2 * * *", "tz": "Europe/London", "handler": "report",
       "payload": {"day": "yesterday", "items": [1, 2, 3]}, "labels": {"team": "data", "env": "prod"},
       "max_attempts": 3}  # fmt: skip


def jsonl(row: dict, lines: int) -> bytes:
    return (json.dumps(row).encode() + b"\n") * lines


def csv_file(row: dict, lines: int) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(list(row))
    cell = {k: json.dumps(v) if isinstance(v, dict) else str(v) for k, v in row.items()}
    for _ in range(lines):
        writer.writerow(list(cell.values()))
    return out.getvalue().encode()


def best_us(data: bytes, fmt: str, lines: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        reader = jobimport.LineReader(io.BytesIO(data))
        records = jobimport.read_csv(reader)[1] if fmt == "csv" else jobimport.read_jsonl(reader)
        start = time.process_time()
        for line in records:
            derived_request_id(line.number, canonical(line.row))
            job_from_row(line.row, csv=fmt == "csv")
        best = min(best, time.process_time() - start)
    return round(best / lines * 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    a = parser.parse_args()
    lines, repeat = (50, 1) if a.smoke else (a.lines, a.repeat)
    numbers = {**ROW, "payload": {f"price{i}": 10.25 + i for i in range(20)}}
    print(json.dumps({"lines": lines, "repeat": repeat, "us_per_line": {
        "plain": best_us(jsonl(ROW, lines), "jsonl", lines, repeat),
        "numbers": best_us(jsonl(numbers, lines), "jsonl", lines, repeat),
        "csv": best_us(csv_file(ROW, lines), "csv", lines, repeat),
    }}))  # fmt: skip


if __name__ == "__main__":
    main()
