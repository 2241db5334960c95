"""Run comparisons and intervals (sql/functions/50_compare.sql) against scipy and ranx on the same values."""

from __future__ import annotations

import math
import random

import numpy as np
import psycopg
import pytest
from ranx import Qrels, Run
from ranx import compare as ranx_compare
from scipy import stats

from ragsql.db import load
from tests.conftest import judged_demo
from tests.loading import load_trec

R = 10000


def mc_tolerance(p: float, resamples: int = R) -> float:
    """Five standard errors of the difference of two independent Monte-Carlo p estimates, plus rounding."""
    return 5 * math.sqrt(2 * max(p * (1 - p), 1e-4) / resamples) + 2 / resamples


def sign_flip_p(db, samples: list[list[float]], resamples: int = R, seed: float = 0.42) -> list[tuple[float, bool]]:
    rows = db.execute("select p_value, exact from ragsql.sign_flip_p(%s, %s, %s, %s) order by ord",
                      ([x for s in samples for x in s], [len(s) for s in samples], resamples, seed)).fetchall()
    return [(p, exact) for p, exact in rows]


def bootstrap_ci(db, samples: list[list[float]], resamples: int = R, alpha: float = 0.05):
    return db.execute("select ci_low, ci_high from ragsql.bootstrap_mean_ci(%s, %s, %s, 0.42, %s) order by ord",
                      ([x for s in samples for x in s], [len(s) for s in samples], resamples, alpha)).fetchall()


def scipy_permutation_p(d: np.ndarray, resamples: int = R) -> float:
    """scipy's paired ("samples") permutation test of mean(b - a), two-sided."""
    result = stats.permutation_test((d, np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis),
                                    permutation_type="samples", n_resamples=resamples,
                                    alternative="two-sided", random_state=7)
    return float(result.pvalue)


def differences(seed: int, n: int, kind: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "continuous":  # nDCG-like differences with a small effect
        return np.clip(rng.normal(0.02, 0.2, n), -1, 1)
    if kind == "discrete":  # P@5-like: multiples of 0.2, many zeros and ties of the observed sum
        return rng.choice([-0.4, -0.2, 0, 0, 0, 0.2, 0.2, 0.4], n)
    if kind == "binary":  # Success@k
        return rng.choice([-1.0, 0.0, 0.0, 0.0, 1.0, 1.0], n)
    return rng.exponential(0.3, n) - 0.25  # skewed


@pytest.mark.parametrize("n, kind", [(9, "continuous"), (12, "discrete"), (40, "continuous"), (60, "discrete"),
                                     (300, "binary"), (800, "skewed"), (5000, "continuous")])
def test_randomization_p_equals_scipy_permutation_test(db, n, kind):
    """Exact when 2^(non-zero differences) <= resamples (then equal to scipy's exact test), otherwise within
    Monte-Carlo error of scipy's; discrete differences with ties of the observed sum included."""
    d = differences(n, n, kind)
    (ours, exact), = sign_flip_p(db, [d.tolist()])
    reference = scipy_permutation_p(d)
    nonzero = int(np.count_nonzero(d))
    assert exact == (2 ** nonzero <= R)
    if exact:
        assert ours == pytest.approx(reference, abs=1e-12)
    else:
        assert abs(ours - reference) <= mc_tolerance(reference), (ours, reference)


def test_randomization_p_exact_small_cases(db):
    """Hand-counted: five wins of 1 → only the two all-same-sign flips reach |sum| 5: p = 2/32; one win and
    one loss of 1 → every flip ties: p = 1; all zero → p = 1; an empty sample → null."""
    rows = sign_flip_p(db, [[1, 1, 1, 1, 1], [1, -1, 0, 0], [0, 0, 0], []])
    assert rows == [(2 / 32, True), (1.0, True), (1.0, True), (None, False)]


def test_randomization_p_of_a_strong_effect_is_the_floor_and_seeded(db):
    """A difference no flip reaches gives (0 + 1) / (R + 1); the same seed repeats, another seed changes p."""
    strong = (np.abs(differences(3, 400, "continuous")) + 0.05).tolist()
    assert sign_flip_p(db, [strong], 2000) == [(1 / 2001, False)]
    mid = differences(4, 400, "continuous").tolist()
    first, again, other = (sign_flip_p(db, [mid], 2000, seed)[0][0] for seed in (0.42, 0.42, 0.11))
    assert first == again and first != other and abs(first - other) <= mc_tolerance(first, 2000)


@pytest.mark.parametrize("n, kind", [(15, "skewed"), (60, "discrete"), (500, "continuous"), (5000, "skewed")])
def test_bootstrap_interval_equals_scipy_percentile_bootstrap(db, n, kind):
    """Within Monte-Carlo error of scipy.stats.bootstrap(method="percentile") — including the asymmetry of a
    skewed small sample, which a normal approximation would miss."""
    d = differences(100 + n, n, kind)
    (low, high), = bootstrap_ci(db, [d.tolist()])
    ref = stats.bootstrap((d,), np.mean, n_resamples=R, method="percentile", confidence_level=0.95,
                          random_state=3).confidence_interval
    se = d.std(ddof=1) / math.sqrt(n)
    assert abs(low - ref.low) <= 0.15 * se and abs(high - ref.high) <= 0.15 * se, (low, high, ref)
    if kind == "skewed" and n == 15:  # the upper arm is longer than the lower one, in both
        assert (high - d.mean()) > (d.mean() - low) and (ref.high - d.mean()) > (d.mean() - ref.low)


def test_bootstrap_of_several_samples_at_once_keeps_each_apart(db):
    """Samples of different lengths in one call give each its own interval (equal to its own call), around its
    own mean; a constant sample has a zero-width interval; an empty one has none."""
    a, b = differences(1, 700, "continuous").tolist(), differences(2, 90, "skewed").tolist()
    together = bootstrap_ci(db, [a, [0.5] * 20, b, []], 2000)
    assert together[0] == bootstrap_ci(db, [a], 2000)[0]
    assert together[1] == (0.5, 0.5) and together[3] == (None, None)
    assert together[2] == bootstrap_ci(db, [b], 2000)[0]  # an interval does not depend on the samples beside it
    for (low, high), sample in ((together[0], a), (together[2], b)):
        assert low < float(np.mean(sample)) < high


def test_bootstrap_level_follows_alpha(db):
    d = differences(9, 300, "continuous").tolist()
    (l95, h95), = bootstrap_ci(db, [d], 4000, 0.05)
    (l80, h80), = bootstrap_ci(db, [d], 4000, 0.20)
    assert l95 < l80 < h80 < h95


@pytest.mark.parametrize("seed, n", [(1, 2), (2, 5), (3, 30), (4, 400), (5, 3000)])
def test_paired_t_p_equals_scipy_ttest_rel(db, seed, n):
    rng = np.random.default_rng(seed)
    a, b = rng.random(n), rng.random(n) + 0.03
    d = b - a
    ours = db.execute("select ragsql.paired_t_p(%s, %s, %s)", (float(d.mean()), float(d.std(ddof=1)), n)).fetchone()[0]
    assert ours == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-9, abs=1e-13)


def test_paired_t_p_degenerate_cases(db):
    """One query: no test; no spread: p = 1 when the mean is 0, else 0 (scipy returns nan there)."""
    rows = db.execute("select ragsql.paired_t_p(0.5, null, 1), ragsql.paired_t_p(0, 0, 10), "
                      "ragsql.paired_t_p(0.1, 0, 10)").fetchone()
    assert rows == (None, 1.0, 0.0)


def holm_reference(ps: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment written from its definition."""
    given = sorted((p, i) for i, p in enumerate(ps) if p is not None)
    m, running, out = len(given), 0.0, list(ps)
    for rank, (p, i) in enumerate(given):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def test_holm_adjustment(db):
    assert db.execute("select ragsql.holm(array[0.01, 0.04, null, 0.03, 0.5])").fetchone()[0] == pytest.approx(
        [0.04, 0.09, None, 0.09, 0.5])
    rng = random.Random(5)
    for _ in range(20):
        ps = [None if rng.random() < 0.1 else rng.random() ** 3 for _ in range(rng.randint(1, 15))]
        ours = db.execute("select ragsql.holm(%s::float8[])", (ps,)).fetchone()[0]
        want = holm_reference(ps)
        assert [o is None for o in ours] == [w is None for w in want]
        assert [o for o in ours if o is not None] == pytest.approx([w for w in want if w is not None], abs=1e-15)


def tie_free_runs(seed: int, n_queries: int):
    """Graded qrels and two runs of unique scores (ranx breaks score ties differently from trec_eval)."""
    rng = random.Random(seed)
    qrels, runs = {}, ({}, {})
    for q in range(n_queries):
        pool = [f"d{i}" for i in rng.sample(range(300), 40)]
        qrels[f"q{q}"] = {d: rng.choice([1, 1, 2, 3]) for d in rng.sample(pool, rng.randint(1, 8))}
        for run in runs:
            scores = rng.sample(range(1, 100000), 30)
            run[f"q{q}"] = {d: s / 1000 for d, s in zip(rng.sample(pool, 30), scores)}
    return qrels, runs


def load_second_run(db, name: str, dataset: str, run: dict) -> None:
    run_id = load.create_run(db, name, load.ensure_dataset(db, dataset))
    load.add_run_results(db, run_id, ((q, None, d, s, None) for q, docs in run.items() for d, s in docs.items()),
                         rank_by_score=True)
    load.analyze(db)


def test_compare_equals_ranx_fisher_test_and_its_per_query_differences(db):
    """On two generated runs of 400 queries: diff equals ranx's mean difference, and the randomization p-value
    is within Monte-Carlo error of ranx compare(stat_test="fisher") for nDCG@10 and AP."""
    qrels, (first, second) = tie_free_runs(11, 400)
    text_q = "\n".join(f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items())
    text_r = "\n".join(f"{q} Q0 {d} 0 {s} a" for q, docs in first.items() for d, s in docs.items())
    load_trec(db, text_q, text_r, run_name="a", dataset="gen")
    load_second_run(db, "b", "gen", second)
    rows = {r[0]: r for r in db.execute(
        "select measure, baseline_value, value, diff, p_value, queries from ragsql.compare('a', 'b', "
        "array['nDCG@10', 'AP'], 2000)").fetchall()}
    report = ranx_compare(Qrels(qrels), [Run(first, name="a"), Run(second, name="b")], metrics=["ndcg@10", "map"],
                          stat_test="fisher", n_permutations=2000, max_p=0.05, random_seed=42)
    for ours, theirs in (("nDCG@10", "ndcg@10"), ("AP", "map")):
        _, baseline, value, diff, p, queries = rows[ours]
        assert queries == 400
        assert baseline == pytest.approx(report.results["a"][theirs], abs=1e-9)
        assert value == pytest.approx(report.results["b"][theirs], abs=1e-9)
        assert diff == pytest.approx(report.results["b"][theirs] - report.results["a"][theirs], abs=1e-9)
        ranx_p = report.comparisons[("a", "b")][theirs]["p_value"]
        assert abs(p - ranx_p) <= mc_tolerance(ranx_p, 2000), (ours, p, ranx_p)


def test_compare_row_is_consistent_and_reproducible(db):
    """diff = value - baseline_value; the counts add up; p_adjusted >= p_value (Holm); significant means
    p_adjusted < alpha; the same call twice gives the same rows."""
    qrels, (first, second) = tie_free_runs(12, 120)
    text_q = "\n".join(f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items())
    text_r = "\n".join(f"{q} Q0 {d} 0 {s} a" for q, docs in first.items() for d, s in docs.items())
    load_trec(db, text_q, text_r, run_name="a", dataset="gen")
    load_second_run(db, "b", "gen", second)
    query = "select * from ragsql.compare('a', 'b', array['nDCG@10', 'RR', 'P@5', 'Success@1'], 3000, 0.3, 0.1)"
    rows = db.execute(query).fetchall()
    assert rows == db.execute(query).fetchall()
    cols = [c.name for c in db.execute(query + " limit 0").description]
    for row in (dict(zip(cols, r)) for r in rows):
        assert row["kind"] == "retrieval" and row["queries"] == 120 and row["left_out"] == 0
        assert row["diff"] == pytest.approx(row["value"] - row["baseline_value"], abs=1e-12)
        assert row["improved"] + row["regressed"] + row["tied"] == 120
        assert row["ci_low"] <= row["diff"] <= row["ci_high"]
        assert row["p_adjusted"] >= row["p_value"] and row["significant"] == (row["p_adjusted"] < 0.1)
    per_query = db.execute("select measure, qid, baseline_value, value, diff from ragsql.compare_queries('a', 'b', "
                           "array['nDCG@10'])").fetchall()
    assert len(per_query) == 120
    ndcg = next(dict(zip(cols, r)) for r in rows if r[0] == "nDCG@10")
    assert sum(d for *_, d in per_query) / 120 == pytest.approx(ndcg["diff"], abs=1e-12)
    assert sum(1 for *_, d in per_query if d > 0) == ndcg["improved"]


def test_compare_bad_input(db):
    load_trec(db, "q1 0 d1 1\nq2 0 d2 1", "q1 Q0 d1 0 1 a\nq2 Q0 d3 0 1 a", run_name="a", dataset="one")
    load_second_run(db, "b", "one", {"q1": {"d1": 1.0}})
    load_trec(db, "q1 0 d1 1", "q1 Q0 d1 0 1 a", run_name="other", dataset="two")
    cases = [
        ("select * from ragsql.compare('a', 'nope')", psycopg.errors.NoDataFound, 'unknown run "nope"'),
        ("select * from ragsql.compare('a', 'other')", psycopg.errors.InvalidParameterValue, "different datasets"),
        ("select * from ragsql.compare('a', 'b', array['nDCG@x'])", psycopg.errors.InvalidParameterValue, "nDCG@x"),
        ("select * from ragsql.compare('a', 'b', array['flatness'])", psycopg.errors.InvalidParameterValue, "flatness"),
        ("select * from ragsql.compare('a', 'b', resamples => 0)", psycopg.errors.InvalidParameterValue, "resamples"),
        ("select * from ragsql.compare('a', 'b', alpha => 1.5)", psycopg.errors.InvalidParameterValue, "alpha"),
        ("select * from ragsql.measure_ci('a', resamples => -3)", psycopg.errors.InvalidParameterValue, "resamples"),
    ]
    for sql, error, text in cases:
        db.execute("savepoint s")
        with pytest.raises(error, match=text):
            db.execute(sql).fetchall()
        db.execute("rollback to savepoint s")


@pytest.fixture(scope="module")
def demo_runs(server_url, template_url):
    """The demo's three runs on 16 questions: retrieval measures and offline generation metrics."""
    with judged_demo(server_url, 16) as url:
        yield url


def test_compare_generation_metrics_direction_left_out_and_missing(demo_runs):
    """Generation metrics compare over queries both runs have a value for (left_out counts the others, the run
    values are the means over the compared queries); contradiction_rate improves downwards; a metric null for
    every query is reported as such, never compared as 0."""
    with psycopg.connect(demo_runs) as conn:
        rows = conn.execute("select * from ragsql.compare('demo-bm25', 'demo-vector', array['faithfulness', "
                            "'contradiction_rate', 'answer_relevancy_rating', 'citation_validity', 'nDCG@10'], 2000)"
                            ).fetchall()
        cols = [c.name for c in conn.execute("select * from ragsql.compare('demo-bm25', 'demo-vector', "
                                             "array['nDCG@10'], 10) limit 0").description]
        got = {r[0]: dict(zip(cols, r)) for r in rows}
        per_query = conn.execute("select measure, baseline_value, value from ragsql.compare_queries('demo-bm25', "
                                 "'demo-vector', array['faithfulness', 'contradiction_rate'])").fetchall()
        nulls = conn.execute(
            "select count(*) filter (where a.value is null or b.value is null) from "
            "ragsql.generation_measure('demo-bm25', 'citation_validity') as a "
            "join ragsql.generation_measure('demo-vector', 'citation_validity') as b using (qid)").fetchone()[0]
    assert [r[0] for r in rows] == ["faithfulness", "contradiction_rate", "answer_relevancy_rating",
                                    "citation_validity", "nDCG@10"]
    assert got["nDCG@10"]["kind"] == "retrieval" and got["faithfulness"]["kind"] == "generation"
    assert "offline" in got["faithfulness"]["judge_model"]
    missing = got["answer_relevancy_rating"]
    assert missing["queries"] == 0 and missing["value"] is None and missing["diff"] is None
    assert missing["p_value"] is None and missing["significant"] is None and missing["note"] == "no value in either run"
    assert got["citation_validity"]["left_out"] == nulls
    if nulls:
        assert "left out" in got["citation_validity"]["note"]
    for metric in ("faithfulness", "contradiction_rate"):
        pairs = [(a, b) for m, a, b in per_query if m == metric]
        row = got[metric]
        assert row["queries"] == len(pairs) and row["left_out"] == 16 - len(pairs)
        assert row["baseline_value"] == pytest.approx(sum(a for a, _ in pairs) / len(pairs), abs=1e-12)
        better = sum(1 for a, b in pairs if (b > a if metric == "faithfulness" else b < a))
        assert row["improved"] == better


@pytest.mark.parametrize("value", [2 / 3, 0.1, 1 / 7, 0.3])
@pytest.mark.parametrize("n", [3, 30, 301, 5000])
def test_a_constant_sample_has_an_interval_holding_its_own_mean(db, value, n):
    """Every query 2/3 (or 0.1, 1/7, 0.3): the interval holds the mean summed in order, exactly (issue 26: float4
    resample sums gave ci_low 0.6666666666666666 above a mean of 0.6666666666666665)."""
    sample = [value] * n
    mean = sum(sample) / n  # float8 additions in the sample's order, as avg(x order by qid) adds
    (low, high), = bootstrap_ci(db, [sample], 2000)
    assert low <= mean <= high and high - low < 1e-12, (low, mean, high)  # only the rounding of the sum


def test_measure_ci_and_compare_never_exclude_their_own_value(db):
    """A measure constant across 301 queries (P@3 = 2/3 in run a, 1/3 in run b): measure_ci's interval holds the
    run value and compare's holds diff, bit for bit."""
    qrels = "\n".join(f"q{i:03} 0 d{j} 1" for i in range(301) for j in (1, 2, 3))
    run_a = "\n".join(f"q{i:03} Q0 {d} 0 {s} a" for i in range(301) for d, s in (("d1", 3), ("d2", 2), ("x", 1)))
    load_trec(db, qrels, run_a, run_name="a", dataset="constant")
    load_second_run(db, "b", "constant", {f"q{i:03}": {"d1": 3, "x": 2, "y": 1} for i in range(301)})
    for run in ("a", "b"):
        (value, low, high), = db.execute("select value, ci_low, ci_high from ragsql.measure_ci(%s, array['P@3'], 2000)",
                                         (run,)).fetchall()
        assert low <= value <= high and value == pytest.approx(2 / 3 if run == "a" else 1 / 3, abs=1e-13)
    (diff, low, high), = db.execute("select diff, ci_low, ci_high from ragsql.compare('a', 'b', array['P@3'], 2000)"
                                    ).fetchall()
    assert low <= diff <= high and diff == pytest.approx(-1 / 3, abs=1e-13)
