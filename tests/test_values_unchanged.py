"""Every stored value unchanged (issue 27): the same data read through the base commit's sql/ and through today's
gives every generation metric (value, reason, judge model, prompt version, embedder, for each judge choice) and every
retrieval measure the same bits, for the demo's three runs, the bundled example eval set judged by an endpoint and
offline, and the bundled TREC runs."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from ragsql.cli import main
from tests.conftest import CITUS_SUITE, _clone, _with_dbname, drop_database
from tests.fake_openai import FakeOpenAI
from tests.sql.test_upgrade import _copy_data, _psql_install, _release
from tests.test_stored_values_never_move import JUDGES, environment, fill, snapshot

# the commit the one-verdict-chooser work (issue 27) started from: `git merge-base HEAD main` then
BASE = "1c77d471c700635e62bdd92cc46a1623f54e2491"
TREC = Path(__file__).parent / "data" / "trec"
TREC_RUNS = {  # run name: (dataset, qrels, run file)
    "te": ("te", TREC / "trec_eval_test" / "qrels.test", TREC / "trec_eval_test" / "results.test"),
    **{
        f"tm{i}": ("tm", TREC / "trectools_mini" / "qrel1.txt", TREC / "trectools_mini" / f"r{i}.run")
        for i in range(1, 5)
    },
}
OPT_IN = (
    "answer_relevancy_rating citations response_groundedness nv_context_relevance context_entity_recall "
    "factual_correctness noise_sensitivity"
)
# a metric reading each verdict table's chosen set (ragsql._newest_verdicts)
READ_CHOSEN = [
    "faithfulness",
    "context_recall",
    "answer_correctness_f1",
    "answer_relevancy",
    "answer_relevancy_rating",
    "context_precision",
    "context_relevance",
    "citation_coverage",
    "aspect:harmfulness",
    "rubrics_score:plain",
    "context_entity_recall",
    "response_groundedness",
    "nv_context_relevance",
    "factual_correctness(mode=f1)",
    "noise_sensitivity(mode=relevant)",
]
RUNS = ["watched", "d-bm25", "d-vector", "d-hybrid", *TREC_RUNS]

pytestmark = pytest.mark.skipif(CITUS_SUITE, reason="the base sql/ is installed by psql, not distributed")


def _fill_today(url: str) -> None:
    """`fill` (the example eval set judged by the fake endpoint, then offline), the demo's three runs judged
    offline (as `judged_demo`, under another name so the two share nothing) and the TREC runs, by today's CLI."""
    with FakeOpenAI() as endpoint:
        fill(url, endpoint)
        # and the metrics judged only when asked for, so every verdict table's choice is read (then offline)
        with environment(url, endpoint):
            assert main(["judge", "--run", "watched", "--metrics", OPT_IN]) in (0, 3)
    with environment(url):
        assert main(["judge", "--run", "watched", "--offline", "--metrics", OPT_IN]) in (0, 3)
        assert main(["demo", "--name", "d", "--queries", "16"]) == 0
        for run, (dataset, qrels, results) in TREC_RUNS.items():
            assert (
                main(
                    [
                        "import",
                        "trec",
                        "--dataset",
                        dataset,
                        "--qrels",
                        str(qrels),
                        "--file",
                        str(results),
                        "--run",
                        run,
                    ]
                )
                == 0
            )


def _copy_into_base(source: str, target: str) -> None:
    """The rows of source into target (the base sql/ installed): the TREC runs' partitions first, then the data,
    then the user's rubric and its registry row, which `_copy_data` leaves out with the built-ins."""
    with psycopg.connect(source) as conn, psycopg.connect(target) as into:
        for (run_id,) in conn.execute(
            "select substr(c.relname, 13)::bigint from pg_inherits as i join pg_class as c on c.oid = i.inhrelid "
            "where i.inhparent = to_regclass('ragsql.run_result') and c.relname like 'run\\_result\\_r%'"
        ):
            into.execute(
                f"create table ragsql.run_result_r{run_id} partition of ragsql.run_result for values in ({run_id})"
            )
    tables = (
        "select relname from pg_class where relnamespace = 'ragsql'::regnamespace and relkind in ('r', 'p') "
        "and not relispartition"
    )
    with psycopg.connect(source) as conn, psycopg.connect(target) as into:
        newer = {r[0] for r in conn.execute(tables)} - {r[0] for r in into.execute(tables)}
        # a table the base has not (a verdict shape added since) must be empty: the base could not read it
        assert all(conn.execute(f"select not exists (select from ragsql.{t})").fetchone()[0] for t in newer), newer
        sequences = "select relname from pg_class where relnamespace = 'ragsql'::regnamespace and relkind = 'S'"
        newer |= {r[0] for r in conn.execute(sequences)} - {r[0] for r in into.execute(sequences)}  # their setval
    _copy_data(source, target, tuple(sorted(newer)))
    with psycopg.connect(source) as conn, psycopg.connect(target) as into:
        rubrics = conn.execute(
            "select name, descriptions, with_reference, created_at from ragsql.rubric where not builtin"
        ).fetchall()
        registered = conn.execute(
            "select metric, position, task_kind, needs_reference, description "
            "from ragsql.generation_metric where metric in "
            "(select 'rubrics_score:' || name from ragsql.rubric where not builtin)"
        ).fetchall()
        assert rubrics and registered, "fill adds rubric plain"
        with into.cursor() as cur:
            cur.executemany(
                "insert into ragsql.rubric (name, descriptions, with_reference, created_at) values (%s, %s, %s, %s)",
                rubrics,
            )
            cur.executemany(
                "insert into ragsql.generation_metric "
                "(metric, position, task_kind, needs_reference, description) "
                "values (%s, %s, %s, %s, %s)",
                registered,
            )


def _snapshots(url: str) -> dict:
    return {(run, *key): value for run in RUNS for key, value in snapshot(url, run).items()}


def test_every_value_is_the_same_through_the_base_sql_and_todays(server_url, template_url, tmp_path):
    """One database filled by today's code; its rows copied into one with the base commit's sql/ (psql -f
    install.sql): every metric and measure of every run is equal, bit for bit, read through either."""
    today_name = _clone(server_url)
    today = _with_dbname(server_url, today_name)
    base_name = f"{today_name}_base"
    base = _with_dbname(server_url, base_name)
    try:
        _fill_today(today)
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'create database "{base_name}"')
        _psql_install(_release(BASE, tmp_path) / "sql" / "install.sql", base)
        with psycopg.connect(
            base
        ) as conn:  # the call log's provenance column was named run_id at BASE; no value reads it
            conn.execute("alter table ragsql.judge_call rename column run_id to for_run_id")
        _copy_into_base(today, base)

        expected, got = _snapshots(base), _snapshots(today)
        # not vacuous: each judge choice and each run gives values, the endpoint's and the offline judge's
        for run in RUNS:
            assert any(k[0] == run and v[0] is not None for k, v in expected.items()), run
        valued = {(k[1], k[2]) for k, v in expected.items() if k[0] == "watched" and v[0] is not None}
        # the fake endpoint is not asked for context_relevance and the offline judge scores no rubric
        wanted = {(judge, m) for judge in JUDGES for m in READ_CHOSEN} - {
            ("fake-judge", "context_relevance"),
            ("offline", "rubrics_score:plain"),
        }
        assert wanted <= valued, sorted(wanted - valued, key=str)
        assert expected.keys() == got.keys()
        moved = [(k, expected[k], got[k]) for k in expected if expected[k] != got[k]]
        assert moved == [], f"{len(moved)} values moved, e.g. {moved[:5]}"
    finally:
        drop_database(server_url, base_name)
        drop_database(server_url, today_name)
