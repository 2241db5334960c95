"""`ragsql demo` end to end on the embedded default, offline, with a shortened question list."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from ragsql.cli import main


def test_demo_runs_the_pipeline_offline_and_compares_three_runs(fresh_db, capsys, monkeypatch):
    monkeypatch.setenv("RAGSQL_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")  # configured but unused: demo is offline
    monkeypatch.setenv("RAGSQL_JUDGE_API_KEY", "k")
    assert main(["demo", "--queries", "12", "--name", "d"]) == 0
    out, err = capsys.readouterr()
    for run in ("d-bm25", "d-vector", "d-hybrid"):
        assert run in out and "retrieved run " + run in err
    assert "faithfulness (offline)" in out and "nDCG@10" in out
    with psycopg.connect(fresh_db) as conn:
        runs = conn.execute(
            "select r.name, count(distinct a.query_id), bool_and(a.text ~ '\\[c[0-9]+\\]|无法回答|know') "
            "from ragsql.run r join ragsql.answer a on a.run_id = r.id group by 1 order by 1"
        ).fetchall()
        models = conn.execute(
            "select distinct judge_model from ragsql.run_generation where run like 'd-%' and judge_model is not null"
        ).fetchall()
        ndcg = conn.execute("select value from ragsql.summarize('d-bm25', array['nDCG@10'])").fetchone()[0]
    assert [r[0] for r in runs] == ["d-bm25", "d-hybrid", "d-vector"]
    assert all(n == 12 and cited for _, n, cited in runs)
    assert models == [("offline-heuristic-v7+e5-onnx:multilingual-e5-small-int8-g2",)]
    bm25_row = next(line for line in out.splitlines() if line.strip().startswith("nDCG@10"))
    assert f"{ndcg:.4f}" in bm25_row
    # a second demo replaces its runs and reuses the corpus: same numbers
    assert main(["demo", "--queries", "12", "--name", "d"]) == 0
    again, _ = capsys.readouterr()
    assert next(line for line in again.splitlines() if line.strip().startswith("nDCG@10")) == bm25_row


def test_the_offline_generator_and_judge_load_no_endpoint_client():
    """openai (half a second to import) loads only for an endpoint: not for the demo's offline generator and judge."""
    code = (
        "import sys; from ragsql.generate import make_generator; from ragsql.orchestrator.setup import make_judging; "
        "from ragsql.llm.settings import EndpointSettings; "
        "make_generator(EndpointSettings(), offline=True); make_judging(EndpointSettings(), offline=True); "
        "print('openai' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr
