"""`ragsql retrieve` end to end: the bundled demo corpus ingested, the demo eval set's gold spans mapped onto
two chunkings, bm25 / vector / fuzzy / hybrid runs written by one SQL statement each and read by `metrics`."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.conftest import demo_database, retrieve_cli, run_cli


@pytest.fixture(scope="module")
def demo_url(server_url, template_url):
    """A database with the demo corpus in two chunkings and the demo eval set (built once for the module)."""
    with demo_database(server_url, [], ["--chunk-size", "250", "--overlap", "0"]) as url:
        yield url


def _metrics(capsys, run: str) -> dict[str, float]:
    code, out, err = run_cli(
        capsys, "metrics", "--run", run, "--measures", "Success@5 R@10 nDCG@10", "--format", "json"
    )
    assert code == 0, err
    return {r["measure"]: r["value"] for r in json.loads(out)}


@pytest.mark.parametrize("mode", ["bm25", "vector", "fuzzy", "hybrid"])
def test_each_mode_writes_a_ranked_run_that_metrics_reads(demo, capsys, mode):
    code, out, err = retrieve_cli(
        capsys, f"r-{mode}", mode, "--k", "10", "--format", "json", "--chunking", "recursive:500:100"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["queries"] == 56 and summary["empty"] == 0
    assert summary["config"]["mode"] == mode and summary["config"]["chunking"] == "recursive:500:100"
    with psycopg.connect(demo) as conn:
        ranks = conn.execute(
            "select query_id, array_agg(rank order by rank), bool_and(docno ~ '^c[0-9]+$') "
            "from ragsql.run_result r join ragsql.run u on u.id = r.run_id where u.name = %s "
            "group by query_id",
            (f"r-{mode}",),
        ).fetchall()
        stored = conn.execute("select config from ragsql.run where name = %s", (f"r-{mode}",)).fetchone()[0]
    assert len(ranks) == 56 and all(r[1] == list(range(1, len(r[1]) + 1)) and r[2] for r in ranks)
    assert stored["k"] == 10 and stored["corpus"] == "demo"
    values = _metrics(capsys, f"r-{mode}")
    assert 0.5 < values["Success@5"] <= 1.0  # the demo's gold is findable by every path


def test_bm25_beats_or_ties_fuzzy_and_hybrid_fuses(demo, capsys):
    for mode in ("bm25", "fuzzy", "hybrid"):
        assert retrieve_cli(capsys, f"c-{mode}", mode, "--chunking", "recursive:500:100")[0] == 0
    bm25, fuzzy, hybrid = (_metrics(capsys, f"c-{m}")["nDCG@10"] for m in ("bm25", "fuzzy", "hybrid"))
    assert bm25 >= fuzzy
    assert hybrid >= min(bm25, fuzzy)


def test_one_eval_set_serves_two_chunkings(demo, capsys):
    """Gold spans map onto each chunking: both runs are judged on every answerable query."""
    for chunking in ("recursive:500:100", "recursive:250:0"):
        code, _, err = retrieve_cli(capsys, f"k-{chunking}", "bm25", "--chunking", chunking)
        assert code == 0, err
    with psycopg.connect(demo) as conn:  # the run first, then its gold labels (Citus mode: run-first, as ragsql)
        runs = conn.execute(
            "select u.name, rr.version_id, u.dataset_id from ragsql.retrieval_run rr "
            "join ragsql.run u on u.id = rr.run_id where u.name like 'k-%' order by 1"
        ).fetchall()
        rows = [
            (
                name,
                *conn.execute(
                    "select count(distinct query_id), count(*) from ragsql.version_judgment(%s, %s)", (version, dataset)
                ).fetchone(),
            )
            for name, version, dataset in runs
        ]
    assert [r[1] for r in rows] == [52, 52]  # 56 questions, 4 unanswerable
    assert rows[0][2] > rows[1][2]  # smaller chunks: more of them overlap the gold spans (250-char run first)


def test_expansion_widens_the_text_not_the_ranking(demo, capsys):
    args = ("retrieve", "--dataset", "demo", "--corpus", "demo", "--mode", "bm25", "--chunking", "recursive:250:0")
    assert run_cli(capsys, *args, "--run", "e0")[0] == 0
    assert run_cli(capsys, *args, "--run", "e1", "--expand", "1")[0] == 0
    with psycopg.connect(demo) as conn:  # each run's rows by itself (Citus mode: two runs are two shards)
        ranked = {
            run: {
                (q, rank): (docno, text)
                for q, rank, docno, text in conn.execute(
                    "select r.query_id, r.rank, r.docno, r.text "
                    "from ragsql.run_result r join ragsql.run u on u.id = r.run_id "
                    "where u.name = %s",
                    (run,),
                )
            }
            for run in ("e0", "e1")
        }
    assert ranked["e0"] and ranked["e0"].keys() == ranked["e1"].keys()
    for key, (docno, text) in ranked["e0"].items():
        wide_docno, wide_text = ranked["e1"][key]
        assert docno == wide_docno and len(wide_text) >= len(text) and text in wide_text, key
    assert _metrics(capsys, "e0") == _metrics(capsys, "e1")


def test_errors_are_one_line(demo, capsys):
    base = ("retrieve", "--dataset", "demo", "--run", "x")
    code, _, err = run_cli(capsys, *base, "--corpus", "nope")
    assert code == 1 and 'unknown corpus "nope"' in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "retrieve", "--dataset", "nope", "--corpus", "demo", "--run", "x")
    assert code == 1 and 'unknown dataset "nope"' in err
    code, _, err = run_cli(capsys, *base, "--corpus", "demo", "--chunking", "markdown:1:0")
    assert code == 1 and "has no chunking markdown:1:0" in err
    code, _, err = run_cli(capsys, *base, "--corpus", "demo", "--weights", "bm25=x")
    assert code == 2 and "PATH=NUMBER" in err
    assert run_cli(capsys, *base, "--corpus", "demo", "--mode", "bm25")[0] == 0
    code, _, err = run_cli(capsys, *base, "--corpus", "demo", "--mode", "bm25")
    assert code == 1 and "already exists" in err
    assert run_cli(capsys, *base, "--corpus", "demo", "--mode", "bm25", "--replace")[0] == 0


def test_rerank_reorders_by_the_endpoint_and_caches_its_replies(demo, capsys, monkeypatch):
    """A Cohere-style /rerank endpoint (the test fake) reorders each query's top 20 and keeps the top 5; the same
    run again is served from the cache; a failing endpoint stores no run and names the problem in one line."""
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        monkeypatch.setenv("RAGSQL_RERANK_BASE_URL", fake.base_url)
        monkeypatch.setenv("RAGSQL_RERANK_API_KEY", "k")
        args = (
            "--k",
            "5",
            "--chunking",
            "recursive:500:100",
            "--rerank",
            "endpoint:fake-rerank",
            "--rerank-depth",
            "20",
            "--format",
            "json",
        )
        code, out, err = retrieve_cli(capsys, "rr", "bm25", *args)
        assert code == 0, err
        summary = json.loads(out)
        assert fake.rerank_calls == 56 and summary["rerank_calls"] == 56
        assert summary["config"]["rerank"] == "endpoint:fake-rerank"
        with psycopg.connect(demo) as conn:
            rows = conn.execute(
                "select r.query_id, r.rank, r.score, q.text, r.text from ragsql.run_result r "
                "join ragsql.run u on u.id = r.run_id and u.name = 'rr' "
                "join ragsql.retrieval_query q on q.run_id = r.run_id and q.query_id = r.query_id "
                "order by 1, 2"
            ).fetchall()
            calls = conn.execute("select count(*) from ragsql.judge_call where kind = 'rerank'").fetchone()[0]
        assert calls == 56
        by_query: dict[int, list] = {}
        for qid, rank, score, _, _ in rows:
            by_query.setdefault(qid, []).append((rank, score))
        assert len(by_query) == 56 and all(1 <= len(v) <= 5 for v in by_query.values())
        assert sum(len(v) == 5 for v in by_query.values()) >= 50
        assert all([s for _, s in v] == sorted((s for _, s in v), reverse=True) for v in by_query.values())
        code, out, err = retrieve_cli(capsys, "rr", "bm25", *args, "--replace")
        assert code == 0, err
        assert fake.rerank_calls == 56 and json.loads(out)["rerank_cached"] == 56
        fake.fail_next(400, n=1, on="any")
        code, _, err = retrieve_cli(capsys, "rr-bad", "bm25", *args, "--rerank-depth", "15")  # new requests
        assert code != 0 and "rerank endpoint" in err and len(err.strip().splitlines()) == 1
    with psycopg.connect(demo) as conn:
        assert conn.execute("select count(*) from ragsql.run where name = 'rr-bad'").fetchone()[0] == 0
