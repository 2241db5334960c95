"""`ragsql list`, `show run`, `delete`: what is stored, and deleting exactly one thing."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.conftest import judged_demo, run_cli


@pytest.fixture(scope="module")
def demo_url(server_url, template_url):
    with judged_demo(server_url, 6) as url:
        yield url


def count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f"select count(*) from ragsql.{table}").fetchone()[0]


def test_list_and_show_say_what_each_holds(demo, capsys):
    code, out, err = run_cli(capsys, "list", "runs", "--format", "json")
    assert code == 0, err
    runs = {r["run"]: r for r in json.loads(out)}
    assert list(runs) == ["demo-bm25", "demo-vector", "demo-hybrid"]
    with psycopg.connect(demo) as conn:
        results = conn.execute(
            "select count(*) from ragsql.run_result as x join ragsql.run as r on r.id = x.run_id "
            "where r.name = 'demo-bm25'"
        ).fetchone()[0]
    bm25 = runs["demo-bm25"]
    assert bm25["dataset"] == "demo" and bm25["results"] == results and bm25["answers"] == 6
    assert bm25["judge_tasks"] > 0 and "offline" in bm25["judges"]
    code, out, _ = run_cli(capsys, "list", "datasets", "--format", "json")
    assert code == 0 and [(d["dataset"], d["queries"], d["runs"]) for d in json.loads(out)] == [("demo", 6, 3)]
    code, out, _ = run_cli(capsys, "list", "corpora", "--format", "json")
    (corpus,) = json.loads(out)
    assert code == 0 and corpus["corpus"] == "demo" and corpus["documents"] > 50 and corpus["runs"] == 3
    code, out, _ = run_cli(capsys, "show", "run", "demo-vector", "--format", "json")
    (shown,) = json.loads(out)
    assert code == 0 and shown["config"]["mode"] == "vector" and shown["answers"] == 6
    code, out, _ = run_cli(capsys, "show", "run", "demo-vector")
    assert code == 0 and "config.chunking" in out
    code, _, err = run_cli(capsys, "show", "run", "nope")
    assert code == 1 and 'unknown run "nope"' in err


def test_delete_needs_yes_refuses_a_corpus_in_use_and_deletes_only_its_object(demo, capsys):
    calls, corpus_chunks = count(demo, "judge_call"), count(demo, "chunk")
    code, _, err = run_cli(capsys, "delete", "run", "demo-hybrid")
    assert code == 2 and "--yes" in err and count(demo, "run") == 3
    code, _, err = run_cli(capsys, "delete", "corpus", "demo", "--yes")
    assert code == 1 and "in use" in err and "demo-bm25" in err and count(demo, "chunk") == corpus_chunks
    code, out, err = run_cli(capsys, "delete", "run", "demo-hybrid", "--yes")
    assert code == 0, err
    assert "deleted run demo-hybrid" in out and "6 answers" in out
    with psycopg.connect(demo) as conn:
        left = [r for (r,) in conn.execute("select name from ragsql.run order by id")]
        orphans = conn.execute(
            "select count(*) from ragsql.answer as a where not exists "
            "(select from ragsql.run as r where r.id = a.run_id)"
        ).fetchone()[0]
    assert left == ["demo-bm25", "demo-vector"] and orphans == 0
    assert count(demo, "judge_call") == calls  # the cache stays
    code, _, err = run_cli(capsys, "delete", "run", "demo-hybrid", "--yes")
    assert code == 1 and 'unknown run "demo-hybrid"' in err
    assert run_cli(capsys, "delete", "dataset", "demo", "--yes")[0] == 0
    assert count(demo, "run") == 0 and count(demo, "query") == 0 and count(demo, "judge_call") == calls
    assert run_cli(capsys, "delete", "corpus", "demo", "--yes")[0] == 0
    assert count(demo, "chunk") == 0 and count(demo, "document") == 0


def test_a_taken_run_name_says_which_dataset_holds_it(fresh_db, capsys, tmp_path):
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("t1 0 d1 1\n", encoding="utf-8")
    run.write_text("t1 Q0 d1 1 1.0 x\n", encoding="utf-8")
    assert (
        run_cli(
            capsys,
            "import",
            "trec",
            "--dataset",
            "first",
            "--qrels",
            str(qrels),
            "--file",
            str(run),
            "--run",
            "taken",
        )[0]
        == 0
    )
    code, _, err = run_cli(
        capsys, "import", "trec", "--dataset", "second", "--qrels", str(qrels), "--file", str(run), "--run", "taken"
    )
    assert code == 1 and 'run "taken" already exists, in dataset "first"' in err


def test_list_counts_one_run_in_the_singular(fresh_db, capsys, tmp_path):
    """`ragsql list runs` of one run is titled "1 run", of none "0 runs"."""
    assert run_cli(capsys, "list", "runs")[1].split("\n")[0].strip() == "0 runs"
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("t1 0 d1 1\n", encoding="utf-8")
    run.write_text("t1 Q0 d1 1 1.0 x\n", encoding="utf-8")
    args = ("import", "trec", "--dataset", "d", "--qrels", str(qrels), "--file", str(run), "--run", "only")
    assert run_cli(capsys, *args)[0] == 0
    assert run_cli(capsys, "list", "runs")[1].split("\n")[0].strip() == "1 run"
