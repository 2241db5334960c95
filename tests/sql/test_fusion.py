"""ragsql.fused / ragsql.fuse against ranx's fuse: every method and normalisation on generated tie-free runs gives
ranx's scores per query and document, in ranx's order; the fused run is a run like any other; bad input is one
error with nothing stored."""

from __future__ import annotations

import json
import random

import psycopg
import pytest
from ranx import Run, fuse

from ragsql.db import load
from tests.conftest import CITUS_SUITE

RANX_METHODS = ["sum", "mnz", "anz", "max", "min", "wsum", "rrf", "isr", "log_isr", "bordafuse"]
NORMS = ["min-max", "max", "sum", "zmuv", "rank", None]


def _runs(seed: int, n_runs: int = 3, n_queries: int = 40):
    """Runs over the same queries, overlapping documents, distinct scores (ranx orders ties its own way)."""
    rng = random.Random(seed)
    runs = []
    for _ in range(n_runs):
        run = {}
        for q in range(n_queries):
            docs = rng.sample([f"d{i}" for i in range(60)], rng.randint(1, 25))
            run[f"q{q}"] = {d: round(rng.uniform(-3, 12), 6) + i * 1e-7 for i, d in enumerate(docs)}
        runs.append(run)
    return runs


@pytest.fixture
def stored(db):
    runs = _runs(seed=5)
    dataset = load.ensure_dataset(db, "fusion")
    load.add_queries(db, dataset, [(q, None, None, None) for q in runs[0]])
    for n, run in enumerate(runs, 1):
        run_id = load.create_run(db, f"r{n}", dataset)
        load.add_run_results(db, run_id, ((q, None, d, s, None) for q, docs in run.items() for d, s in docs.items()),
                             rank_by_score=True)
    return db, runs


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("method", RANX_METHODS)
def test_every_method_and_normalisation_equals_ranx(stored, method, norm):
    db, runs = stored
    weights = [0.5, 1.5, 1.0] if method == "wsum" else None
    params = {"weights": weights} if weights else {"k": 60} if method == "rrf" else {}
    want = fuse([Run(r) for r in runs], norm=norm, method=method, params=params).to_dict()
    rows = db.execute("select qid, docno, score, rank from ragsql.fused(array['r1', 'r2', 'r3'], %s, %s, %s)",
                      (method, norm or "none", weights)).fetchall()
    got: dict[str, dict[str, float]] = {}
    order: dict[str, list[str]] = {}
    for qid, docno, score, rank in rows:
        got.setdefault(qid, {})[docno] = score
        order.setdefault(qid, []).append(docno)
        assert rank == len(order[qid])
    assert got.keys() == want.keys()
    wrong = [(q, d, w, got[q].get(d)) for q in want for d, w in want[q].items()
             if got[q].get(d) is None or abs(w - got[q][d]) > 1e-9 * max(1, abs(w))]
    assert not wrong and all(got[q].keys() == want[q].keys() for q in want), wrong[:5]
    for q in want:  # ranx's order wherever the scores differ
        ranked = sorted(want[q], key=lambda d: -want[q][d])
        distinct = [d for d in ranked if sum(abs(want[q][d] - v) < 1e-12 for v in want[q].values()) == 1]
        assert [d for d in order[q] if d in distinct] == distinct


def test_a_fused_run_is_stored_and_evaluated_like_any_other(stored):
    db, _ = stored
    db.execute("insert into ragsql.judgment (query_id, docno, relevance) "
               "select q.id, 'd' || (q.id % 60), 1 from ragsql.query as q join ragsql.dataset as d "
               "on d.id = q.dataset_id where d.name = 'fusion'")
    run_id = db.execute("select ragsql.fuse('fused', array['r1', 'r2', 'r3'], 'combsum', 'zmuv')").fetchone()[0]
    config = db.execute("select config from ragsql.run where id = %s", (run_id,)).fetchone()[0]
    assert config["fusion"] == {"runs": ["r1", "r2", "r3"], "method": "sum", "norm": "zmuv", "weights": None, "k": 60}
    stored_rows = db.execute("select q.qid, r.docno, r.score, r.rank from ragsql.run_result as r "
                             "join ragsql.query as q on q.id = r.query_id where r.run_id = %s order by 1, 4",
                             (run_id,)).fetchall()
    fused = db.execute("select * from ragsql.fused(array['r1', 'r2', 'r3'], 'sum', 'zmuv')").fetchall()
    assert sorted(stored_rows) == sorted(fused)
    summary = dict(db.execute("select measure, value from ragsql.summarize('fused', array['nDCG@10', 'RR'])"))
    assert 0 <= summary["nDCG@10"] <= 1 and summary["RR"] > 0


@pytest.mark.parametrize("call, message", [
    ("ragsql.fused(array['r1', 'r2'], 'condorcet')", 'unknown fusion method "condorcet"'),
    ("ragsql.fused(array['r1', 'r2'], 'rrf', 'l2')", 'unknown normalisation "l2"'),
    ("ragsql.fused(array['r1', 'r2'], 'wsum', 'min-max', array[1.0])", "wsum needs one weight per run: 2 runs, 1"),
    ("ragsql.fused(array['r1', 'r2'], 'rrf', 'min-max', array[1.0, 2.0])", "weights are for wsum"),
    ("ragsql.fused(array['r1', 'r2'], 'wsum', 'min-max', array['NaN', 1]::float8[])", "weights must be finite"),
    ("ragsql.fused(array['r1', 'r2'], 'wsum', 'min-max', array[1, 'Infinity']::float8[])", "weights must be finite"),
    ("ragsql.fuse('x', array['r1', 'r2'], 'wsum', 'min-max', array['-Infinity', 1]::float8[])",
     "weights must be finite"),
    ("ragsql.fuse('x', array['r1', 'r2'], 'wsum', 'min-max', array[null, 1]::float8[])", "weights must be finite"),
    ("ragsql.fused(array['r1'])", "fusion needs two runs or more"),
    ("ragsql.fused(array['r1', 'nope'])", 'unknown run "nope"'),
    ("ragsql.fused(array['r1', 'r1'])", "a run is named twice"),
    ("ragsql.fuse('r2', array['r1', 'r3'])", 'run "r2" already exists'),
    ("ragsql.fuse('x', array['r1', 'other'])", "different datasets"),
])
def test_bad_input_is_one_error_and_nothing_is_stored(stored, call, message):
    db, _ = stored
    other = load.ensure_dataset(db, "elsewhere")
    load.add_queries(db, other, [("q0", None, None, None)])
    load.create_run(db, "other", other)
    runs_before = db.execute("select count(*) from ragsql.run").fetchone()[0]
    with pytest.raises(psycopg.Error, match=message), db.transaction():
        db.execute(f"select * from {call}")
    assert db.execute("select count(*) from ragsql.run").fetchone()[0] == runs_before


def test_a_weight_that_is_not_finite_is_invalid_parameter_value_with_a_hint(stored):
    """A DBA calling ragsql.fuse directly with a NaN weight gets SQLSTATE 22023 and a hint, and no run."""
    db, _ = stored
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught, db.transaction():
        db.execute("select ragsql.fuse('nan', array['r1', 'r2'], 'wsum', 'none', array['NaN', 1]::float8[])")
    assert caught.value.diag.message_hint and "one weight per run" in caught.value.diag.message_hint
    assert db.execute("select count(*) from ragsql.run where name = 'nan'").fetchone()[0] == 0


PLANS = {
    "default": "reset all",
    "no hash aggregation": "set enable_hashagg = off",
    "no sort, no hash join": "set enable_sort = off; set enable_hashjoin = off",
    "parallel": "set parallel_setup_cost = 0; set parallel_tuple_cost = 0; set min_parallel_table_scan_size = 0; "
                "set max_parallel_workers_per_gather = 2; "
                # debug_parallel_query was force_parallel_mode before PostgreSQL 16 (Citus mode runs 15)
                "select set_config(name, 'on', false) from pg_settings "
                "where name in ('debug_parallel_query', 'force_parallel_mode')",
}


@pytest.mark.parametrize("norm", ["zmuv", "sum", "none"])
def test_fused_scores_are_the_same_bits_under_every_plan_and_storage_order(stored, norm):
    """Every method gives bit-identical scores and ranks whatever the plan (hash or sorted aggregation, parallel)
    and whatever the order the runs' rows were stored in; documents with equal scores keep their order."""
    db, _ = stored
    dataset = db.execute("select id from ragsql.dataset where name = 'fusion'").fetchone()[0]
    for n in (3, 2, 1):  # copies of r1..r3 created in reverse order, each one's rows stored last query first
        copy = load.create_run(db, f"b{n}", dataset)
        db.execute("insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno, score) "
                   "select %s, r.dataset_id, r.query_id, r.rank, r.docno, r.score from ragsql.run_result as r "
                   "join ragsql.run as ru on ru.id = r.run_id where ru.name = %s "
                   "order by r.query_id desc, r.rank desc", (copy, f"r{n}"))
    # ties on purpose: every run gives d0 and d1 the same score in q0, so every method fuses them to one score
    db.execute("update ragsql.run_result as r set score = 5 from ragsql.query as q "
               "where q.id = r.query_id and q.qid = 'q0' and r.docno in ('d0', 'd1')")
    db.execute("analyze ragsql.run_result")
    differ = []
    for method in RANX_METHODS:
        weights = [0.3, 1.7, 0.1] if method == "wsum" else None
        seen = {}
        for runs in (["r1", "r2", "r3"], ["b1", "b2", "b3"]):
            for plan, settings in PLANS.items():
                if CITUS_SUITE and plan == "parallel":  # Citus refuses a forced parallel worker's 2PC
                    continue
                db.execute(settings)
                rows = db.execute("select qid, docno, score, rank from ragsql.fused(%s, %s, %s, %s)",
                                  (runs, method, norm, weights)).fetchall()
                seen[runs[0], plan] = [(q, d, float(s).hex(), r) for q, d, s, r in rows]
        db.execute("reset all")
        first = next(iter(seen.values()))
        assert len(first) > 500
        differ += [(method, key, sum(a != b for a, b in zip(first, got))) for key, got in seen.items() if got != first]
    assert not differ, differ
def test_the_cli_stores_a_fused_run_and_refuses_bad_input_in_one_line(fresh_db, capsys):
    from tests.conftest import CITUS_SUITE, run_cli
    from tests.loading import load_trec

    with psycopg.connect(fresh_db) as conn:
        load_trec(conn, "q1 0 a 1\nq2 0 c 1", "q1 Q0 a 1 3 x\nq1 Q0 b 2 2 x\nq2 Q0 c 1 1 x", run_name="bm25",
                  dataset="d")
        dataset = conn.execute("select id from ragsql.dataset where name = 'd'").fetchone()[0]
        vector = load.create_run(conn, "vector", dataset)
        load.add_run_results(conn, vector, [("q1", None, "b", 9.0, None), ("q2", None, "d", 5.0, None),
                                            ("q2", None, "c", 4.0, None)], rank_by_score=True)
        conn.commit()
    code, out, err = run_cli(capsys, "fuse", "--runs", "bm25,vector", "--method", "rrf", "--run", "hybrid",
                             "--format", "json")
    assert code == 0, err
    assert {k: v for k, v in json.loads(out).items() if k in ("queries", "results", "method")} == {
        "queries": 2, "results": 4, "method": "rrf"}
    code, out, _ = run_cli(capsys, "metrics", "--run", "hybrid", "--measures", "RR", "--format", "json")
    # q1: a (1/61 + 0) vs b (1/62 + 1/61): b first, a second; q2: c (1/61 + 1/62) before d (1/61)
    assert code == 0 and json.loads(out)[0]["value"] == pytest.approx((0.5 + 1.0) / 2)
    for args, status, line in (
            (["--runs", "bm25,vector", "--method", "wsum", "--weights", "1", "--run", "w"], 1,
             "ragsql: error: wsum needs one weight per run: 2 runs, 1 weights"),
            (["--runs", "bm25,vector", "--weights", "0.5,x", "--run", "w"], 2, 'ragsql: usage: --weights "0.5,x"'),
            (["--runs", "bm25,vector", "--method", "wsum", "--weights", "nan,1", "--run", "w"], 2,
             'ragsql: usage: --weights "nan,1": \'nan\' is not a finite number'),
            (["--runs", "bm25,vector", "--method", "wsum", "--weights", "1,inf", "--run", "w"], 2,
             'ragsql: usage: --weights "1,inf": \'inf\' is not a finite number'),
            (["--runs", "bm25,vector", "--method", "wsum", "--weights", "-Infinity,1", "--run", "w"], 2,
             'ragsql: usage: --weights "-Infinity,1": \'-Infinity\' is not a finite number'),
            (["--runs", "bm25,vector", "--method", "wsum", "--weights", "1e400,1", "--run", "w"], 2,
             'ragsql: usage: --weights "1e400,1": \'1e400\' is not a finite number'),
            (["--runs", "bm25", "--run", "w"], 2, "ragsql: usage: --runs: name two runs or more"),
            (["--runs", "bm25,vector", "--run", "hybrid"], 1, 'ragsql: error: run "hybrid" already exists'),
            (["--runs", "bm25,nope", "--run", "w"], 1, 'ragsql: error: unknown run "nope"'),
            (["--runs", "bm25,vector", "--method", "condorcet", "--run", "w"], 2, "ragsql: usage:")):
        code, out, err = run_cli(capsys, "fuse", *args)
        assert (code, out) == (status, "") and err.startswith(line) and err.count("\n") == 1, err
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("select count(*) from ragsql.run where name = 'w'").fetchone()[0] == 0


@pytest.mark.parametrize("method", ["wsum", "rrf"])
def test_optimize_picks_what_ranx_optimize_fusion_picks(fresh_db, capsys, method):
    from ranx import Qrels, optimize_fusion

    from tests.conftest import run_cli

    rng = random.Random(11)
    runs = []
    for _ in range(3):
        runs.append({f"q{q}": {d: round(rng.uniform(0, 10), 6) + i * 1e-7
                               for i, d in enumerate(rng.sample([f"d{i}" for i in range(40)], 25))}
                     for q in range(30)})
    qrels = {f"q{q}": {f"d{i}": rng.choice([1, 2]) for i in rng.sample(range(40), 6)} for q in range(30)}
    with psycopg.connect(fresh_db) as conn:
        dataset = load.ensure_dataset(conn, "opt")
        load.add_queries(conn, dataset, [(q, None, None, None) for q in qrels])
        load.add_judgments(conn, dataset, [(q, d, g, None) for q, docs in qrels.items() for d, g in docs.items()])
        for n, run in enumerate(runs, 1):
            run_id = load.create_run(conn, f"r{n}", dataset)
            load.add_run_results(conn, run_id, ((q, None, d, s, None) for q, docs in run.items()
                                                for d, s in docs.items()), rank_by_score=True)
        conn.commit()
    want = optimize_fusion(Qrels(qrels), [Run(r) for r in runs], norm="min-max", method=method, metric="ndcg@10",
                           show_progress=False)
    code, out, err = run_cli(capsys, "fuse", "--runs", "r1,r2,r3", "--method", method, "--optimize",
                             "--measure", "ndcg@10", "--run", "tuned", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    if method == "wsum":
        assert got["weights"] == list(want["weights"]) and got["optimized"]["trials"] == 62
    else:
        assert got["k"] == want["k"] and got["optimized"]["trials"] == 10
    assert any("tuned for ndcg@10 on this dataset's own judgments" in w for w in got["warnings"])
    code, _, err = run_cli(capsys, "fuse", "--runs", "r1,r2", "--method", "combsum", "--optimize", "--run", "x")
    assert code == 2 and "--optimize tunes wsum's weights or rrf's k" in err
