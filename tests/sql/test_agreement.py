"""Agreement statistics in SQL (sql/functions/60_review.sql) against scikit-learn and scipy on generated labels."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

LEVELS = ["contradicted", "unsupported", "partial", "supported"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("weights", ["none", "linear", "quadratic"])
def test_cohen_kappa_equals_scikit_learn(db, seed, weights):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    a = rng.choice(LEVELS, n, p=[0.1, 0.2, 0.2, 0.5])
    b = np.where(rng.random(n) < 0.6, a, rng.choice(LEVELS, n))
    ours = db.execute("select ragsql.cohen_kappa(%s, %s, %s, %s)", (list(a), list(b), LEVELS, weights)).fetchone()[0]
    theirs = cohen_kappa_score(a, b, labels=LEVELS, weights=None if weights == "none" else weights)
    assert ours == pytest.approx(theirs, abs=1e-12)
    sorted_labels = db.execute("select ragsql.cohen_kappa(%s, %s)", (list(a), list(b))).fetchone()[0]
    assert sorted_labels == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_cohen_kappa_edge_cases(db):
    """One label only: chance agreement is total, kappa is undefined (null); nulls are left out; unknown weights."""
    assert db.execute("select ragsql.cohen_kappa(array['a', 'a'], array['a', 'a'])").fetchone()[0] is None
    assert db.execute("select ragsql.cohen_kappa(array['a', 'b', null], array['a', 'b', 'a'])").fetchone()[0] == 1.0
    assert db.execute("select ragsql.cohen_kappa(array['a', 'b'], array['a', 'b'], weights => 'cubic')"
                      ).fetchone()[0] is None


@pytest.mark.parametrize("seed", range(6))
def test_spearman_and_kendall_equal_scipy_with_ties(db, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 150))
    x = np.round(rng.random(n), 1)  # rounded: many ties
    y = np.round(np.clip(x + rng.normal(0, 0.3, n), 0, 1), 1)
    rho, tau = db.execute("select ragsql.spearman(%s, %s), ragsql.kendall_tau(%s, %s)",
                          (list(map(float, x)), list(map(float, y)), list(map(float, x)), list(map(float, y)))).fetchone()
    assert rho == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert tau == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_normal_quantile_equals_scipy(db):
    ps = [1e-10, 1e-4, 0.01, 0.02425, 0.05, 0.3, 0.5, 0.7, 0.95, 0.975, 0.995, 1 - 1e-6]
    ours = db.execute("select array_agg(ragsql._normal_quantile(p) order by i) from unnest(%s::float8[]) "
                      "with ordinality as t(p, i)", (ps,)).fetchone()[0]
    assert ours == pytest.approx(list(stats.norm.ppf(ps)), rel=2e-9, abs=1e-9)
