"""`ragsql watch add --retrieved`: a log's retrieved ids, stored as `ragsql import jsonl` stores a record's
retrieved_context_ids, so a window gives the values an import of the same rows gives."""

from __future__ import annotations

import json

import psycopg

from tests.conftest import run_cli
from tests.test_watch import ADD, source  # noqa: F401 (source: the fixture)

WINDOW = "w@2026-01-01T10:00Z"
ROWS = [  # key, contexts (null: ids alone), retrieved ids in rank order
    ("1", None, ["d2", "d1", "d3"]),
    ("2", None, ["d1", "d9", "d1"]),  # an id repeated in ids alone counts once, at its first rank
    ("3", ["Four is a number.", "Five is a number."], ["d4", "d5"]),
    ("4", ["Six.", "Six again."], ["d6", "d6"]),  # refused by import: one id for two texts
    ("5", ["Seven."], None),  # no ids: contexts alone, as a watch without --retrieved stores them
]
GOLD = {"1": ["d1"], "2": ["d1", "d7"], "3": ["d5", "d8"]}
METRICS = ["id_based_context_precision", "id_based_context_recall", "faithfulness"]
MEASURES = ["nDCG@10", "RR@10", "P@2", "R@10", "AP"]


def _jsonl(path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def _stored(conn: psycopg.Connection, run: str) -> dict[str, list]:
    """The run's answer contexts and ranked results, per qid."""
    contexts = conn.execute(
        "select q.qid, array_agg(array[c.position::text, c.docno, c.text] order by c.position) "
        "from ragsql.answer_context as c join ragsql.query as q on q.id = c.query_id "
        "join ragsql.run as r on r.id = c.run_id where r.name = %s group by q.qid",
        (run,),
    ).fetchall()
    results = conn.execute(
        "select q.qid, array_agg(array[x.rank::text, x.docno, x.text] order by x.rank) "
        "from ragsql.run_result as x join ragsql.query as q on q.id = x.query_id "
        "join ragsql.run as r on r.id = x.run_id where r.name = %s group by q.qid",
        (run,),
    ).fetchall()
    return {"contexts": sorted(contexts), "results": sorted(results)}


def _values(conn: psycopg.Connection, run: str) -> list[tuple]:
    """Per-query values (and reasons) of the id-based metrics, faithfulness and the retrieval measures."""
    generation = conn.execute(
        "select qid, metric, value, reason from ragsql.evaluate_generation(%s, %s) "
        "where qid in ('1', '2', '3') order by 1, 2",
        (run, METRICS),
    ).fetchall()
    retrieval = [
        (measure, *row)
        for measure in MEASURES
        for row in conn.execute("select qid, value from ragsql.measure(%s, %s) order by 1", (run, measure))
    ]
    return generation + retrieval


def test_retrieved_ids_give_the_values_an_import_of_the_same_rows_gives(source, capsys, tmp_path):
    """Rows with retrieved ids (alone, repeated, or beside their contexts) are stored as `import jsonl` stores the
    same records: the same answer contexts and ranked results, hence the same id-based metrics and, with the gold
    ids imported into the window's dataset, the same retrieval measures; a row whose ids import refuses is kept as
    skipped with import's reason, and a row without ids keeps its contexts alone."""
    source.execute("alter table app.log add column ids text[]")
    for key, contexts, ids in ROWS:
        source.execute(
            "insert into app.log (logged_at, question, answer, contexts, ids) "
            "values ('2026-01-01 10:05+00', %s, %s, %s, %s)",
            (f"Question {key}?", f"Answer {key}.", None if contexts is None else json.dumps(contexts), ids),
        )
    assert run_cli(capsys, *ADD, "--retrieved", "ids", "--backfill")[0] == 0
    code, out, err = run_cli(capsys, "watch", "run", "--once", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["watches"][0]["captured"] == 4
    gold = [{"qid": qid, "reference_context_ids": ids} for qid, ids in GOLD.items()]
    code, _, err = run_cli(capsys, "import", "jsonl", _jsonl(tmp_path / "gold.jsonl", gold), "--dataset", WINDOW)
    assert code == 0, err
    records = [
        {
            "qid": key,
            "user_input": f"Question {key}?",
            "response": f"Answer {key}.",
            "retrieved_context_ids": ids,
            **({} if contexts is None else {"retrieved_contexts": contexts}),
            **({"reference_context_ids": GOLD[key]} if key in GOLD else {}),
        }
        for key, contexts, ids in ROWS[:3]
    ]
    path = _jsonl(tmp_path / "same.jsonl", records)
    assert run_cli(capsys, "import", "jsonl", path, "--dataset", "imported", "--run", "imported")[0] == 0
    assert run_cli(capsys, "judge", "--run", "imported", "--metrics", "faithfulness", "--offline")[0] == 0

    watched, imported = _stored(source, WINDOW), _stored(source, "imported")
    assert {k: [r for r in v if r[0] != "5"] for k, v in watched.items()} == imported
    assert [r for r in watched["contexts"] if r[0] == "5"] == [("5", [["1", None, "Seven."]])]
    assert imported["results"][1] == ("2", [["1", "d1", None], ["2", "d9", None]])
    values = _values(source, WINDOW)
    assert values == _values(source, "imported")
    assert ("1", "id_based_context_precision", 1 / 3, None) in values
    assert ("1", "faithfulness", None, "no context texts: the record gives only ids") in values
    assert ("RR@10", "1", 0.5) in values and ("R@10", "2", 0.5) in values
    assert next(v for q, m, v, _ in values[: len(METRICS) * 3] if (q, m) == ("3", "faithfulness")) is not None
    skipped = source.execute("select metadata ->> 'skipped' from ragsql.query where qid = '4'").fetchone()[0]
    assert skipped == "--retrieved: retrieved item 'd6' appears twice (positions 1 and 2)"


def test_a_retrieved_column_of_the_wrong_type_or_missing_is_one_line_and_stores_nothing(source, capsys):
    """`watch add --retrieved` checks the column against the catalog: a timestamp column or a missing one is one
    error line, and no watch is stored."""
    for column, message in (
        ("logged_at", '--retrieved column "logged_at" of app.log is timestamp with time zone: use text[], jsonb'),
        ("nope", 'app.log has no column "nope" (--retrieved)'),
    ):
        code, out, err = run_cli(capsys, *ADD, "--retrieved", column)
        assert (code, out) == (1, "") and err.count("\n") == 1 and message in err, err
    assert source.execute("select count(*) from ragsql.watch").fetchone()[0] == 0
