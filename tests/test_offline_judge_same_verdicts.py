"""The offline judge's speed work (issue 28) changes no verdict: public QA records (SQuAD and CMRC 2018, as
bench/offline_judge_speed.py builds them) judged offline by the base commit's code and by this tree, each in a
database of its own, give every generation metric (value, reason, judge, embedder) and every stored reply of the
judge the same bits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from bench.offline_judge_speed import records, values
from tests.conftest import CITUS_SUITE, ENDPOINT_VARS, _clone, _with_dbname, drop_database

ROOT = Path(__file__).resolve().parents[1]
BASE = "2c3969b"  # offline judge v7 with its exact sum (heuristics changed on purpose; speed work keeps verdicts)

pytestmark = pytest.mark.skipif(CITUS_SUITE, reason="the base tree's CLI runs against a single server")


def _tree(ref: str, dest: Path) -> Path:
    """ragsql/ and sql/ of commit `ref` in `dest`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref, "ragsql", "sql"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _ragsql(tree: Path, url: str, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ENDPOINT_VARS}
    env.update(PYTHONPATH=str(tree), RAGSQL_DATABASE_URL=url)
    done = subprocess.run([sys.executable, "-m", "ragsql", *args], env=env, cwd=tree, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_this_tree_stores_the_verdicts_and_values_of_the_base_commit(server_url, template_url, tmp_path):
    """24 records (12 a language), all default metrics: the same values and replies from both trees."""
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records(12)), "utf-8")
    trees = {"base": _tree(BASE, tmp_path / "base"), "this": ROOT}
    stored = {}
    for name, tree in trees.items():
        database = _clone(server_url)
        url = _with_dbname(server_url, database)
        try:
            _ragsql(tree, url, "import", "jsonl", str(data), "--dataset", "qa", "--run", "qa")
            _ragsql(tree, url, "judge", "--run", "qa", "--offline")
            stored[name] = values(url)
        finally:
            drop_database(server_url, database)
    metrics = {row[0] for row in stored["base"] if row[0] != "call"}
    assert {"faithfulness", "answer_relevancy", "context_relevance", "context_precision"} <= metrics
    assert sum(row[0] == "call" for row in stored["base"]) > 100
    assert stored["this"] == stored["base"]
