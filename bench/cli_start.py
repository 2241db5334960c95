"""Benchmark: how fast the CLI starts — this tree against a baseline commit, in the same run.

    python bench/cli_start.py [--baseline-ref 8b54773] [--runs 7] [--json]

Times (median of `runs`, wall clock, a fresh process each) `ragsql --version`, `ragsql --help`,
`ragsql db url` with the embedded server running, `ragsql db url` with it stopped (a cold start of an
existing RAGSQL_HOME), and `ragsql db init` on a new, empty RAGSQL_HOME (initdb, the server's start and the
schema), for this tree and for `--baseline-ref` (checked out with `git archive` into a temporary directory).
Each tree gets RAGSQL_HOMEs of its own under a temporary directory. Goals (issue 15): --version and db url
≤ 0.3 s, a cold start ≤ 1 s, a new home ≤ 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(tree: Path, home: Path, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if k != "RAGSQL_DATABASE_URL"}
    env.update(PYTHONPATH=str(tree), RAGSQL_HOME=str(home))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragsql", *args], env=env, cwd=tree, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"ragsql {' '.join(args)} from {tree} failed: {done.stderr.strip()}")
    return seconds


def measure(tree: Path, scratch: Path, runs: int) -> dict[str, float]:
    home = scratch / "home"
    figures: dict[str, list[float]] = {
        "--version": [],
        "--help": [],
        "db url (running)": [],
        "db url (cold start)": [],
        "db init (new home)": [],
    }
    for i in range(runs):
        figures["db init (new home)"].append(timed(tree, scratch / f"new-{i}", "db", "init"))
        timed(tree, scratch / f"new-{i}", "db", "stop")
    timed(tree, home, "db", "init")
    for _ in range(runs):
        figures["--version"].append(timed(tree, home, "--version"))
        figures["--help"].append(timed(tree, home, "--help"))
        figures["db url (running)"].append(timed(tree, home, "db", "url"))
    for _ in range(runs):
        timed(tree, home, "db", "stop")
        figures["db url (cold start)"].append(timed(tree, home, "db", "url"))
    timed(tree, home, "db", "stop")
    return {name: statistics.median(values) for name, values in figures.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-ref", default="8b54773", help="git ref to compare with")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline_ref], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        now = measure(ROOT, Path(tmp) / "now", args.runs)
        before = measure(base, Path(tmp) / "before", args.runs)
    if args.json:
        print(json.dumps({"this tree": now, args.baseline_ref: before}, indent=2))
        return 0
    print(
        f"{'command (median of ' + str(args.runs) + ')':32} {'this tree':>10} {args.baseline_ref:>10} {'× faster':>9}"
    )
    for name in now:
        print(f"{name:32} {now[name]:>9.2f}s {before[name]:>9.2f}s {before[name] / now[name]:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
