"""Imports of TREC files and JSONL/CSV eval sets into a real PostgreSQL, through the API and the CLI."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import psycopg
import pytest

from ragsql.cli import main
from ragsql.db import results
from ragsql.errors import InputError
from ragsql.formats import context_docno, files
from ragsql.importer import import_records, import_trec
from tests.conftest import CITUS_SUITE
from tests.loading import generated_run, load_trec

DATA = Path(__file__).resolve().parent / "data"
EXAMPLE = Path(__file__).resolve().parents[1] / "ragsql" / "data" / "example_evalset.jsonl"

# run_result is partitioned by run on one server only (migration 0160); on Citus it is one distributed table
ONE_SERVER_LAYOUT = pytest.mark.skipif(CITUS_SUITE, reason="one server's layout: Citus keeps run_result whole")


@pytest.fixture
def conn(db):
    """The rolled-back test connection with its transaction open, so each import runs in a savepoint."""
    db.execute("select 1")
    return db


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def ranking(conn, run: str) -> dict[str, list[tuple[str, float | None]]]:
    rows = conn.execute(
        """
        select q.qid, r.docno, r.score from ragsql.run_result as r
        join ragsql.run as ru on ru.id = r.run_id join ragsql.query as q on q.id = r.query_id
        where ru.name = %s order by q.qid, r.rank
        """,
        (run,),
    ).fetchall()
    result: dict[str, list] = {}
    for qid, docno, score in rows:
        result.setdefault(qid, []).append((docno, score))
    return result


def count(url_or_conn, table: str) -> int:
    if isinstance(url_or_conn, str):
        with psycopg.connect(url_or_conn) as c:
            return count(c, table)
    return url_or_conn.execute(f"select count(*) from ragsql.{table}").fetchone()[0]


def test_trec_ties_are_ranked_by_docno_descending_in_byte_order(conn, tmp_path):
    """Equal scores rank by docno descending in byte order ('d9' before 'd10', 'a' before 'B'); rank column ignored."""
    qrels = write(tmp_path, "q.qrels", "t1 0 d9 1\n")
    run = write(
        tmp_path, "r.run", "t1 Q0 d10 1 0.5 r\nt1 Q0 d9 2 0.5 r\nt1 Q0 top 9 0.7 r\nt1 Q0 B 3 0.1 r\nt1 Q0 a 4 0.1 r\n"
    )
    summary = import_trec(conn, "ds", qrels, run)
    assert (summary.run, summary.queries, summary.judgments, summary.results) == ("r", 1, 1, 5)
    assert [d for d, _ in ranking(conn, "r")["t1"]] == ["top", "d9", "d10", "a", "B"]


def test_trec_comments_hash_in_docno_and_extra_fields_after_the_tag(conn, tmp_path):
    """'#' in column 0 is a comment, '#' inside a docno is kept, and fields after the run tag are ignored."""
    qrels = write(tmp_path, "q.qrels", "# judged by hand\nt1 0 doc#1 2\n\nt1 0 doc#2 0\n")
    run = write(tmp_path, "r.run", "# produced by bm25\nt1 Q0 doc#2 1 2.0 bm25 extra junk\nt1 Q0 doc#1 2 1.0 bm25 x\n")
    import_trec(conn, "ds", qrels, run, run_name="mine")
    assert ranking(conn, "mine") == {"t1": [("doc#2", 2.0), ("doc#1", 1.0)]}
    assert conn.execute("select docno, relevance from ragsql.judgment order by docno").fetchall() == [
        ("doc#1", 2),
        ("doc#2", 0),
    ]


def test_trec_run_topics_missing_from_qrels_become_unjudged_queries(conn, tmp_path):
    """A run topic absent from the qrels becomes a query without judgments; its results are kept."""
    qrels = write(tmp_path, "q.qrels", "t1 0 d1 1\n")
    run = write(tmp_path, "r.run", "t1 Q0 d1 1 1 r\nt2 Q0 d5 1 1 r\n")
    summary = import_trec(conn, "ds", qrels, run)
    rows = conn.execute(
        "select q.qid, count(j.docno) from ragsql.query as q left join ragsql.judgment as j on j.query_id = q.id "
        "group by q.qid order by q.qid"
    ).fetchall()
    assert rows == [("t1", 1), ("t2", 0)] and summary.queries == 2 and set(ranking(conn, "r")) == {"t1", "t2"}


def test_trec_run_config_records_the_files(conn, tmp_path):
    """The run's config says it came from a TREC file and names it."""
    qrels = write(tmp_path, "q.qrels", "t1 0 d1 1\n")
    run = write(tmp_path, "r.run", "t1 Q0 d1 1 1 sys_a\n")
    import_trec(conn, "ds", qrels, run)
    config = conn.execute("select config from ragsql.run where name = 'sys_a'").fetchone()[0]
    assert config["source"] == "trec" and config["file"] == run


@pytest.mark.parametrize(
    ("qrels_text", "run_text", "where", "message"),
    [
        ("t1 0 d1 1\n", "t1 Q0 d1 1 0.5 r\nt1 Q0 d2 2 high r\n", ("r.run", 2), "score 'high'"),
        ("t1 0 d1 1\n", "t1 Q0 d1 1 0.5 r\nt1 Q0 d2 2\n", ("r.run", 2), "expected 6 fields"),
        ("t1 0 d1 1\n", "t1 Q0 d1 1 0.5 r\nt1 Q0 d1 2 0.4 r\n", ("r.run", 2), "retrieved twice"),
        ("t1 0 d1 1\nt1 0 d2 x\n", "t1 Q0 d1 1 0.5 r\n", ("q.qrels", 2), "not an integer"),
    ],
)
def test_trec_malformed_line_stores_nothing(conn, tmp_path, qrels_text, run_text, where, message):
    """A malformed qrels or run line is an InputError naming file and line, and the import stores nothing."""
    qrels = write(tmp_path, "q.qrels", qrels_text)
    run = write(tmp_path, "r.run", run_text)
    with pytest.raises(InputError, match=message) as caught:
        import_trec(conn, "ds", qrels, run)
    assert (Path(caught.value.path).name, caught.value.line) == where
    assert count(conn, "dataset") == 0 and count(conn, "query") == 0


def test_trec_same_qrels_again_adds_a_second_run(conn, tmp_path):
    """Importing the same qrels with another run keeps the judgments once and adds the run."""
    qrels = write(tmp_path, "q.qrels", "t1 0 d1 1\nt2 0 d2 2\n")
    import_trec(conn, "ds", qrels, write(tmp_path, "a.run", "t1 Q0 d1 1 1 a\n"))
    again = import_trec(conn, "ds", qrels, write(tmp_path, "b.run", "t2 Q0 d2 1 1 b\n"))
    assert (again.judgments, count(conn, "judgment"), count(conn, "run")) == (0, 2, 2)


def test_trec_other_qrels_are_refused_unless_replace(conn, tmp_path):
    """Different judgments for a stored query are refused; with replace they replace the stored ones."""
    import_trec(conn, "ds", write(tmp_path, "a.qrels", "t1 0 d1 1\nt2 0 d2 1\n"))
    changed = write(tmp_path, "b.qrels", "t1 0 d1 2\n")
    with pytest.raises(InputError, match="already holds other judgments for query t1"):
        import_trec(conn, "ds", changed)
    import_trec(conn, "ds", changed, replace=True)
    rows = conn.execute(
        "select q.qid, j.docno, j.relevance from ragsql.judgment as j "
        "join ragsql.query as q on q.id = j.query_id order by 1"
    ).fetchall()
    assert rows == [("t1", "d1", 2), ("t2", "d2", 1)]


def test_trec_existing_run_needs_replace(conn, tmp_path):
    """Loading a run name twice is an error; with replace the new results replace the old ones."""
    qrels = write(tmp_path, "q.qrels", "t1 0 d1 1\n")
    import_trec(conn, "ds", qrels, write(tmp_path, "a.run", "t1 Q0 d1 1 1 r\n"))
    second = write(tmp_path, "b.run", "t1 Q0 d7 1 1 r\nt1 Q0 d8 1 0.5 r\n")
    with pytest.raises(InputError, match='run "r" already exists'):
        import_trec(conn, "ds", qrels, second)
    import_trec(conn, "ds", qrels, second, replace=True)
    assert ranking(conn, "r") == {"t1": [("d7", 1.0), ("d8", 0.5)]}


def stored(conn, run: str) -> list[tuple[str, int, str, float]]:
    return conn.execute(
        """
        select q.qid, r.rank, r.docno, r.score from ragsql.run_result as r
        join ragsql.run as ru on ru.id = r.run_id join ragsql.query as q on q.id = r.query_id
        where ru.name = %s order by q.qid, r.rank
        """,
        (run,),
    ).fetchall()


@pytest.mark.parametrize("layout", ["rank order", "shuffled within queries", "queries come back", "all shuffled"])
def test_trec_run_is_ranked_as_the_database_ranks_it(conn, tmp_path, monkeypatch, layout):
    """Generated runs with ties, read in small blocks: the import stores the ranks that trec_eval's rule gives and
    that the database's window function (score desc, docno collate "C" desc) gives to the same file."""
    monkeypatch.setattr(files, "BLOCK_BYTES", 2000)
    run = tmp_path / "gen.run"
    expected = generated_run(run, layout)
    qrels = write(tmp_path, "q.qrels", "T00 0 D1 1\n")
    summary = import_trec(conn, "ds", qrels, run, run_name="fast")
    load_trec(conn, Path(qrels), run, run_name="sql")
    assert (summary.results, summary.queries) == (1200, 30)
    assert stored(conn, "fast") == stored(conn, "sql") == expected


@pytest.mark.parametrize(
    ("tail", "line", "message"),
    [
        ("T29 Q0 late 1 x tag\n", 1202, "score 'x' is not a number"),
        ("T29 Q0 NEW 1 1 tag\nT29 Q0 NEW 1 1 tag\n", 1203, "NEW is retrieved twice for query T29"),
        ("T03 Q0 NEW 1 1 tag\nT03 Q0 NEW 1 1 tag\n", 1203, "NEW is retrieved twice for query T03"),
    ],
)
def test_trec_bad_line_after_many_blocks_stores_nothing(conn, tmp_path, monkeypatch, tail, line, message):
    """A bad line after many blocks were stored, a duplicate in the last query, or one in a query the file comes
    back to (found by the database, then placed by reading the file again): file and line, nothing stored."""
    monkeypatch.setattr(files, "BLOCK_BYTES", 2000)
    run = tmp_path / "gen.run"
    generated_run(run, "rank order")
    run.write_text(run.read_text(encoding="utf-8") + tail, encoding="utf-8")
    qrels = write(tmp_path, "q.qrels", "T00 0 D1 1\n")
    with pytest.raises(InputError, match=message) as caught:
        import_trec(conn, "ds", qrels, run, run_name="r")
    assert (caught.value.path, caught.value.line) == (str(run), line)
    assert [count(conn, t) for t in ("dataset", "query", "judgment", "run", "run_result")] == [0, 0, 0, 0, 0]


def test_trec_database_lost_halfway_stores_nothing_and_leaves_no_thread(fresh_db, tmp_path, monkeypatch, capsys):
    """The server ends the import's connection after some blocks were copied: one error line, exit 1, nothing
    stored, and the thread that read ahead is gone."""
    monkeypatch.setattr(files, "BLOCK_BYTES", 2000)
    run = tmp_path / "gen.run"
    generated_run(run, "rank order")
    qrels = write(tmp_path, "q.qrels", "T00 0 D1 1\n")
    copy_ranked = results.copy_ranked
    calls = []

    def copy_then_lose_the_connection(conn, *args):
        calls.append(1)
        if len(calls) == 4:
            with psycopg.connect(fresh_db, autocommit=True) as admin:
                admin.execute("select pg_terminate_backend(%s)", (conn.info.backend_pid,))
        return copy_ranked(conn, *args)

    monkeypatch.setattr(results, "copy_ranked", copy_then_lose_the_connection)
    assert main(["import", "trec", "--dataset", "d", "--qrels", qrels, "--file", str(run)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("ragsql: error: ") and len(calls) == 4, err
    assert [count(fresh_db, t) for t in ("dataset", "query", "run", "run_result")] == [0, 0, 0, 0]
    assert not [t for t in threading.enumerate() if t.name.startswith("ragsql-read")]


@ONE_SERVER_LAYOUT
def test_two_trec_imports_at_once_each_get_a_partition_and_queue_only_to_attach(fresh_db, tmp_path):
    """Two imports into the same dataset at once: the second copies its run while the first is still open, waits
    only to attach its partition (the first holds run_result's attach lock until it commits), and both land, each
    in a partition of its own, with the ranks of the staging path; no deadlock."""
    files_ = {}
    for name, layout in (("a", "rank order"), ("b", "queries come back")):
        files_[name] = tmp_path / f"{name}.run"
        generated_run(files_[name], layout, seed=len(files_))
    qrels = write(tmp_path, "q.qrels", "T00 0 D1 1\n")
    with psycopg.connect(fresh_db) as first, psycopg.connect(fresh_db) as second:
        first.execute("select 1")  # a transaction of the caller's: the import stays open until it commits
        import_trec(first, "ds", qrels, files_["a"], run_name="a")
        errors, done = [], threading.Event()

        def import_second() -> None:
            try:
                import_trec(second, "ds", qrels, files_["b"], run_name="b")
            except Exception as exc:  # noqa: BLE001 - the test reports it
                errors.append(exc)
            done.set()

        thread = threading.Thread(target=import_second)
        thread.start()
        try:
            assert not done.wait(1.5)  # waits for the first import's lock
            waiting = first.execute(
                "select count(*) from pg_locks where not granted and pid = %s", (second.info.backend_pid,)
            ).fetchone()[0]
            assert waiting == 1
        finally:
            first.commit()
            thread.join(30)
        assert errors == [] and done.is_set()
        for name in ("a", "b"):
            load_trec(first, Path(qrels), files_[name], run_name=f"{name}-sql")
            run_id = first.execute("select id from ragsql.run where name = %s", (name,)).fetchone()[0]
            assert first.execute(f"select count(*) from ragsql.run_result_r{run_id}").fetchone()[0] == 1200
            assert stored(first, name) == stored(first, f"{name}-sql")
        first.rollback()


def test_jsonl_cli_import_stores_every_table(fresh_db, capsys):
    """`ragsql import jsonl` with --run stores queries, judgments, references, results, answers and their contexts."""
    assert main(["import", "jsonl", str(DATA / "ragas_new.jsonl"), "--dataset", "ragas", "--run", "sys"]) == 0
    out = capsys.readouterr().out
    assert "3 queries, 2 judgments, 2 reference answers, run sys: 6 results, 3 answers" in out
    with psycopg.connect(fresh_db) as c:
        tables = ("query", "judgment", "reference_answer", "run_result", "answer")
        assert [count(c, t) for t in tables] == [3, 2, 2, 6, 3]
        contexts = c.execute(
            "select q.qid, a.position, a.docno from ragsql.answer_context as a "
            "join ragsql.query as q on q.id = a.query_id order by 1, 2"
        ).fetchall()
        ranks = c.execute(
            "select q.qid, r.rank, r.docno, r.score from ragsql.run_result as r "
            "join ragsql.query as q on q.id = r.query_id where q.qid = 'q3' order by 2"
        ).fetchall()
    # chunk#9 has no text, so the answer of q3 used one context.
    assert [row[:2] for row in contexts] == [("q1", 1), ("q1", 2), ("q2", 1), ("q2", 2), ("q3", 1)]
    assert contexts[0][2] == context_docno("RAG (Retrieval-Augmented Generation) combines retrieval and generation.")
    assert ranks == [("q3", 1, "chunk#3", 3.5), ("q3", 2, "chunk#9", 1.25)]


def test_api_import_records_summary_lists_skipped_lines(conn, tmp_path):
    """import_records with skip_bad returns the counts stored and every skipped (line, message)."""
    path = write(
        tmp_path,
        "e.jsonl",
        "\n".join(
            [
                json.dumps(
                    {
                        "qid": "a",
                        "query": "x",
                        "reference_contexts": ["ctx a"],
                        "retrieved_contexts": ["ctx a", "b"],
                        "response": "yes",
                    }
                ),
                json.dumps({"qid": "b", "query": "y", "retrieved_ids": ["d1"], "retrieved_scores": [1, 2]}),
            ]
        )
        + "\n",
    )
    summary = import_records(conn, path, "jsonl", "d", run="r", skip_bad=True)
    assert (summary.queries, summary.judgments, summary.results, summary.answers) == (1, 1, 2, 1)
    assert summary.skipped == [(2, "retrieved_scores has 2 items but retrieved_ids has 1")]
    # The retrieved context equal to the reference context is the relevant item at rank 1.
    assert conn.execute("select qid, value from ragsql.measure('r', 'Success@1')").fetchall() == [("a", 1.0)]


def test_run_without_run_data_and_bad_bytes_are_errors(conn, tmp_path):
    """--run with records that retrieved nothing is refused, and bytes that are not UTF-8 name their line."""
    labels = write(tmp_path, "l.jsonl", '{"qid": "a", "query": "x", "gold_evidence": ["d1"]}\n')
    with pytest.raises(InputError, match="--run r given, but no record has retrieved items or an answer"):
        import_records(conn, labels, "jsonl", "d", run="r")
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b'{"qid": "a", "query": "x"}\n{"qid": "b", "query": "\xff"}\n')
    with pytest.raises(InputError, match="not UTF-8") as caught:
        import_records(conn, binary, "jsonl", "d")
    assert caught.value.line == 2 and count(conn, "query") == 0


def test_csv_cli_import_stores_rows(fresh_db, capsys):
    """`ragsql import csv` loads the rows, with list cells, languages and metadata."""
    assert main(["import", "csv", str(DATA / "evalset.csv"), "--dataset", "csvset", "--run", "csvrun"]) == 0
    assert "3 queries, 3 judgments, 2 reference answers, run csvrun: 3 results, 3 answers" in capsys.readouterr().out
    with psycopg.connect(fresh_db) as c:
        rows = c.execute("select qid, language, metadata from ragsql.query order by qid").fetchall()
        assert rows == [("r1", "en", {"source": "handmade"}), ("r2", "en", {}), ("r3", None, {})]
        assert count(c, "answer_context") == 3


def test_records_with_retrieved_items_need_a_run(fresh_db, capsys):
    """Records that carry retrieved items or answers without --run are refused and nothing is stored."""
    assert main(["import", "jsonl", str(DATA / "ragas_old.jsonl"), "--dataset", "d"]) == 1
    assert "pass --run" in capsys.readouterr().err
    assert count(fresh_db, "query") == 0 and count(fresh_db, "dataset") == 0


def test_malformed_record_stores_nothing_and_names_file_and_line(fresh_db, tmp_path, capsys):
    """Without --skip-bad, one malformed record stops the import: one error line, exit 1, no rows."""
    path = write(tmp_path, "e.jsonl", '{"qid": "a", "query": "x"}\n{"qid": "b", "query": "y", "response": " "}\n')
    assert main(["import", "jsonl", path, "--dataset", "d"]) == 1
    err = capsys.readouterr().err
    assert err == f"ragsql: error: {path}:2: response is empty (an answer that is given must have text)\n"
    assert count(fresh_db, "query") == 0


def test_skip_bad_loads_the_rest_and_reports_every_skipped_line(fresh_db, tmp_path, capsys):
    """--skip-bad loads the good records and prints each skipped line as FILE:LINE: message."""
    path = write(
        tmp_path,
        "e.jsonl",
        "\n".join(
            [
                json.dumps({"qid": "a", "query": "x", "gold_evidence": ["d1"], "retrieved": ["d1"]}),
                "{broken",
                json.dumps({"qid": "b", "query": "y", "rel_map": {"d1": 0.5}}),
                json.dumps({"qid": "c", "query": "z", "retrieved": ["d2", "d2"]}),
                json.dumps({"qid": "d", "query": "w", "gold_evidence": ["d3"]}),
            ]
        )
        + "\n",
    )
    assert main(["import", "jsonl", path, "--dataset", "d", "--run", "r", "--skip-bad"]) == 0
    captured = capsys.readouterr()
    assert [line.split(": ")[0] for line in captured.err.splitlines()] == [f"{path}:2", f"{path}:3", f"{path}:4"]
    assert "rel_map" in captured.err and "3 bad records skipped" in captured.out
    with psycopg.connect(fresh_db) as c:
        assert [r[0] for r in c.execute("select qid from ragsql.query order by qid")] == ["a", "d"]
        assert count(c, "judgment") == 2 and count(c, "run_result") == 1


def test_failed_import_keeps_what_earlier_imports_stored(fresh_db, tmp_path):
    """A failing import rolls back only itself; an earlier import's rows stay."""
    assert main(["import", "jsonl", str(DATA / "seed.jsonl"), "--dataset", "seed", "--run", "s1"]) == 0
    bad = write(tmp_path, "bad.jsonl", '{"qid": "n1", "query": "new", "gold_evidence": ["c1"]}\n{"qid": 1.5}\n')
    assert main(["import", "jsonl", bad, "--dataset", "seed"]) == 1
    assert main(["import", "jsonl", bad, "--dataset", "other"]) == 1
    with psycopg.connect(fresh_db) as c:
        assert [r[0] for r in c.execute("select qid from ragsql.query order by qid")] == ["q_001", "q_002"]
        assert (count(c, "dataset"), count(c, "judgment"), count(c, "run_result")) == (1, 3, 7)


def test_reimporting_labels_is_idempotent_and_replace_replaces(fresh_db, tmp_path, capsys):
    """The same references again change nothing; other references are refused unless --replace."""
    first = write(tmp_path, "a.jsonl", '{"qid": "a", "query": "x", "reference": "r1"}\n')
    other = write(tmp_path, "b.jsonl", '{"qid": "a", "query": "x", "ground_truths": ["r2", "r3"]}\n')
    assert main(["import", "jsonl", first, "--dataset", "d"]) == 0
    assert main(["import", "jsonl", first, "--dataset", "d"]) == 0
    assert main(["import", "jsonl", other, "--dataset", "d"]) == 1
    assert "already holds other reference answers for query a" in capsys.readouterr().err
    assert main(["import", "jsonl", other, "--dataset", "d", "--replace"]) == 0
    with psycopg.connect(fresh_db) as c:
        rows = c.execute("select position, text from ragsql.reference_answer order by position").fetchall()
    assert rows == [(1, "r2"), (2, "r3")]


def test_import_then_metrics_gives_hand_computed_values(fresh_db, capsys):
    """Seed example: [c7,c2,c9,c1] vs {c2:2,c3:1} and [c4,c5,c6] vs {c6:2} give the hand-computed run means."""
    assert main(["import", "jsonl", str(DATA / "seed.jsonl"), "--dataset", "seed", "--run", "seedrun"]) == 0
    capsys.readouterr()
    measures = "RR@10 R@5 P@5 Success@1 nDCG@3"
    assert main(["metrics", "--run", "seedrun", "--measures", measures, "--format", "json"]) == 0
    got = {row["measure"]: row["value"] for row in json.loads(capsys.readouterr().out)}
    ndcg_q1 = (2 / math.log2(3)) / (2 + 1 / math.log2(3))
    expected = {
        "RR@10": (1 / 2 + 1 / 3) / 2,
        "R@5": (1 / 2 + 1) / 2,
        "P@5": 0.2,
        "Success@1": 0.0,
        "nDCG@3": (ndcg_q1 + 0.5) / 2,
    }
    assert got.keys() == expected.keys()
    assert all(math.isclose(got[m], expected[m], abs_tol=1e-9) for m in expected), got


def test_trec_cli_summary_and_run_name_option(fresh_db, tmp_path, capsys):
    """`ragsql import trec` prints one summary line and names the run after --run-name."""
    qrels = write(tmp_path, "q.qrels", "t1 0 d1 1\nt2 0 d2 1\n")
    run = write(tmp_path, "r.run", "t1 Q0 d1 1 1 tag\nt3 Q0 d1 1 1 tag\n")
    assert main(["import", "trec", "--dataset", "t", "--qrels", qrels, "--file", run, "--run", "named"]) == 0
    assert capsys.readouterr().out == (
        "imported into dataset t: 3 queries, 2 judgments, 0 reference answers, run named: 2 results, 0 answers\n"
    )
    assert main(["metrics", "--run", "named", "--measures", "Success@1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"run": "named", "measure": "Success@1", "value": 0.5, "queries": 2}]


def test_bundled_example_eval_set_imports_with_a_run(fresh_db, capsys):
    """The bundled bilingual example loads with its run, answers and contexts, and every query is judged."""
    assert main(["import", "jsonl", str(EXAMPLE), "--dataset", "example", "--run", "example-run"]) == 0
    with psycopg.connect(fresh_db) as c:
        languages = dict(c.execute("select language, count(*) from ragsql.query group by 1").fetchall())
        unjudged = c.execute(
            "select count(*) from ragsql.query as q where not exists "
            "(select from ragsql.judgment as j where j.query_id = q.id)"
        ).fetchone()[0]
        answers = count(c, "answer")
    assert set(languages) == {"zh", "en"} and 8 <= sum(languages.values()) <= 12
    assert unjudged == 0 and answers == sum(languages.values())


SPANS = [
    {
        "qid": "s1",
        "query": "who?",
        "gold_evidence": [{"doc_id": "d1", "start": 3, "end": 9}, {"doc_id": "d2", "text": "a quote", "relevance": 2}],
    },
    {"qid": "s2", "query": "what?", "gold_evidence": [{"doc_id": "d3"}], "gold_doc_ids": ["d4"]},
]


def _spans(conn) -> list[tuple]:
    return conn.execute(
        "select q.qid, g.position, g.doc_id, g.start_char, g.end_char, g.quote, g.relevance "
        "from ragsql.gold_span g join ragsql.query q on q.id = g.query_id order by 1, 2"
    ).fetchall()


def test_gold_spans_quotes_and_document_ids_are_stored(conn, tmp_path):
    """Spans and quotes go to gold_span in order; a bare doc_id and gold_doc_ids become document judgments."""
    path = write(tmp_path, "spans.jsonl", "\n".join(json.dumps(r) for r in SPANS))
    summary = import_records(conn, path, "jsonl", dataset="sp")
    assert (summary.spans, summary.judgments) == (2, 2)
    assert _spans(conn) == [("s1", 1, "d1", 3, 9, None, 1), ("s1", 2, "d2", None, None, "a quote", 2)]
    judged = conn.execute(
        "select q.qid, j.docno from ragsql.judgment j join ragsql.query q on q.id = j.query_id order by 2"
    ).fetchall()
    assert judged == [("s2", "d3"), ("s2", "d4")]
    assert import_records(conn, path, "jsonl", dataset="sp").spans == 0  # the same spans again: nothing new
    changed = [{**SPANS[0], "gold_evidence": [{"doc_id": "d1", "start": 0, "end": 4}]}]
    other = write(tmp_path, "other.jsonl", json.dumps(changed[0]))
    with pytest.raises(InputError, match="already holds other gold spans for query s1"):
        import_records(conn, other, "jsonl", dataset="sp")
    import_records(conn, other, "jsonl", dataset="sp", replace=True)
    assert _spans(conn) == [("s1", 1, "d1", 0, 4, None, 1)]


@pytest.mark.parametrize(
    ("span", "message"),
    [
        ({"doc_id": "d", "start": 4}, "needs both start and end"),
        ({"doc_id": "d", "start": 4, "end": 4}, "must be greater than start"),
        ({"doc_id": "d", "start": -1, "end": 4}, "character offset"),
        ({"start": 0, "end": 4}, "has no doc_id"),
        ({"doc_id": "d", "txt": "x"}, r"unknown key\(s\) txt"),
    ],
)
def test_bad_gold_span_names_the_line(conn, tmp_path, span, message):
    path = write(tmp_path, "bad.jsonl", json.dumps(SPANS[1]) + "\n" + json.dumps({"qid": "b", "gold_evidence": [span]}))
    with pytest.raises(InputError, match=rf"bad.jsonl:2: .*{message}"):
        import_records(conn, path, "jsonl", dataset="bad")
    assert _spans(conn) == []
