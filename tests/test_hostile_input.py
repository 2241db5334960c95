"""Hostile and broken input (issue 11 §3): one error naming file and line, nothing stored, never a traceback."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from ragsql.cli import main
from ragsql.corpus import Chunker
from ragsql.db import connect
from ragsql.errors import InputError
from ragsql.importer import import_records, import_trec
from ragsql.ingest import ingest
from ragsql.llm.settings import EndpointSettings

OFFLINE = EndpointSettings(embedder="offline")  # no endpoint; ingests with the hashed n-grams unless told
ingest_module = importlib.import_module("ragsql.ingest.ingest")


@pytest.fixture
def conn(db):
    """The rolled-back test connection with its transaction open, so each import runs in a savepoint."""
    db.execute("select 1")
    return db


def write(path: Path, data: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return str(path)


def count(conn, table: str) -> int:
    return conn.execute(f"select count(*) from ragsql.{table}").fetchone()[0]


GOOD = '{"qid": "q0", "query": "fine"}\n'
DEEP = '{"qid": "q1", "query": "x", "metadata": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}\n"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("nul.jsonl", GOOD + '{"qid": "q1", "query": "a\\u0000b"}\n', "query contains a NUL character"),
        ("nul_key.jsonl", GOOD + '{"qid": "q1", "query": "x", "metadata": {"k\\u0000": 1}}\n', "a key of metadata"),
        (
            "nul_ctx.jsonl",
            GOOD + '{"qid": "q1", "query": "x", "reference_contexts": ["ok", "b\\u0000"]}\n',
            r"reference_contexts\[1\] contains a NUL",
        ),
        (
            "surrogate.jsonl",
            GOOD + '{"qid": "q1", "query": "a\\ud800b"}\n',
            r"query contains a lone surrogate \(\\ud800\)",
        ),
        ("deep.jsonl", GOOD + DEEP, "invalid JSON: nested too deeply"),
        (
            "deep64.jsonl",
            GOOD + '{"qid": "q1", "query": "x", "meta": ' + "[" * 70 + "]" * 70 + "}\n",
            "nested more than 64 levels",
        ),
        ("long_int.jsonl", GOOD + '{"qid": "q1", "query": "x", "n": ' + "9" * 5000 + "}\n", "invalid JSON"),
        (
            "nan.jsonl",
            GOOD + '{"qid": "q1", "query": "x", "metadata": {"v": NaN}}\n',
            "which JSON and jsonb cannot hold",
        ),
        ("rel.jsonl", GOOD + '{"qid": "q1", "query": "x", "rel_map": {"d": 99999999999}}\n', "out of range"),
        (
            "rel_huge.jsonl",
            GOOD + '{"qid": "q1", "query": "x", "rel_map": {"d": 1' + "0" * 400 + "}}\n",
            "out of range",
        ),
        (
            "score.jsonl",
            GOOD + '{"qid": "q1", "query": "x", "retrieved_ids": ["d"], "retrieved_scores": [1' + "0" * 400 + "]}\n",
            "must be a finite number",
        ),
        (
            "span.jsonl",
            GOOD + '{"qid": "q1", "query": "x", "gold_evidence": [{"doc_id": "d", "start": 0, "end": 3000000000}]}\n',
            r"integer 0 to 2147483647",
        ),
        ("control_id.jsonl", GOOD + '{"qid": "q\\u0007", "query": "x"}\n', "control character"),
        ("long_id.jsonl", GOOD + json.dumps({"qid": "q" * 1200, "query": "x"}) + "\n", "longer than 1000 bytes"),
        ("nul.csv", "qid,query\nq0,fine\nq1,a\0b\n", "query contains a NUL character"),
        ("json_cell.csv", 'qid,query,rel_map\nq0,fine,\nq1,x,"{""d"": 5000000000}"\n', "out of range"),
    ],
)
def test_bad_record_is_one_error_naming_file_and_line_and_skip_bad_skips_it(conn, tmp_path, name, text, message):
    """Values PostgreSQL cannot store are an InputError at the record's line; --skip-bad stores the good record."""
    path = write(tmp_path / name, text)
    fmt = name.rsplit(".", 1)[1]
    with pytest.raises(InputError, match=message) as caught:
        import_records(conn, path, fmt, "ds")
    assert (caught.value.path, caught.value.line) == (path, 3 if fmt == "csv" else 2)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400
    assert count(conn, "dataset") == 0
    summary = import_records(conn, path, fmt, "ds", skip_bad=True)
    assert summary.queries == 1 and [line for line, _ in summary.skipped] == [caught.value.line]
    assert conn.execute("select qid from ragsql.query").fetchall() == [("q0",)]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("empty.jsonl", "", r"holds no records \(it is empty, or only blank lines\)"),
        ("blank.jsonl", "\n  \n", "holds no records"),
        ("empty.csv", "", r"holds no records \(it is empty, or only a header row\)"),
        ("header.csv", "qid,query\n", "holds no records"),
        (
            "all_bad.jsonl",
            '{"qid": "q1", "query": "a\\u0000"}\n',
            r"no good record: all 1 were bad \(the first, line 1",
        ),
    ],
)
def test_a_file_without_records_is_an_error_and_creates_nothing(conn, tmp_path, name, text, message):
    """An empty file (or one whose every record is bad, with skip_bad) names the file and creates no dataset."""
    path = write(tmp_path / name, text)
    with pytest.raises(InputError, match=message) as caught:
        import_records(conn, path, name.rsplit(".", 1)[1], "ds", skip_bad=True)
    assert caught.value.path == path
    assert count(conn, "dataset") == 0


@pytest.mark.parametrize(
    ("qrels", "run", "where", "message"),
    [
        ("t1 0 d\0x 1\n", None, ("q.qrels", 1), "the docno contains a NUL character"),
        ("t1 0 d1 1\nt1 0 d2 99999999999\n", None, ("q.qrels", 2), r"relevance 99999999999 is out of range"),
        (
            "t1 0 d1 1\n",
            "t1 Q0 d1 1 0.5 r\nt\x01 Q0 d1 1 0.5 r\n",
            ("r.run", 2),
            "the qid contains a control character",
        ),
        ("t1 0 d1 1\n", "t1 Q0 d1 1 0.5 r\x00\n", ("r.run", 1), "the tag contains a NUL"),
        ("", None, ("q.qrels", None), "the qrels file holds no judgments"),
        ("# only a comment\n\n", None, ("q.qrels", None), "holds no judgments"),
        ("t1 0 d1 1\n", "", ("r.run", None), "the run file holds no results"),
    ],
)
def test_trec_hostile_files_name_file_and_line_and_store_nothing(conn, tmp_path, qrels, run, where, message):
    """NUL and control characters in ids, relevance beyond integer and empty files are InputErrors."""
    qrels_path = write(tmp_path / "q.qrels", qrels)
    run_path = write(tmp_path / "r.run", run) if run is not None else None
    with pytest.raises(InputError, match=message) as caught:
        import_trec(conn, "ds", qrels_path, run_path, run_name="named")
    assert (Path(caught.value.path).name, caught.value.line) == where
    assert count(conn, "dataset") == 0


def test_cli_prints_one_error_line_without_traceback(fresh_db, tmp_path, capsys):
    """Each hostile file gives exactly one `ragsql: error: FILE:LINE: ...` line on stderr and a non-zero exit."""
    cases = [
        (["import", "jsonl"], "s.jsonl", '{"qid": "q", "query": "\\ud800"}\n', ":1: query contains a lone surrogate"),
        (["import", "jsonl"], "d.jsonl", DEEP, ":1: invalid JSON: nested too deeply"),
        (["import", "csv"], "n.csv", "qid,query\nq1,a\0b\n", ":2: query contains a NUL"),
        (["import", "jsonl"], "e.jsonl", "", ": the file holds no records"),
    ]
    for command, name, text, message in cases:
        path = write(tmp_path / name, text)
        assert main([*command, path, "--dataset", "ds"]) != 0
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"ragsql: error: {path}{message}"), lines
    path = write(tmp_path / "q.qrels", "t1 0 d\0 1\n")
    assert main(["import", "trec", "--qrels", path, "--dataset", "ds"]) != 0
    assert capsys.readouterr().err.startswith(f"ragsql: error: {path}:1: the docno contains a NUL")
    with connect(fresh_db) as c:
        assert count(c, "dataset") == 0


def test_ingest_reports_and_skips_files_holding_a_nul_and_ingests_the_good_ones(fresh_db, tmp_path, capsys):
    """A file holding NUL (in text, or as \\u0000 in JSONL), a lone surrogate or nothing is reported as FILE:LINE
    and skipped; the good files are ingested; with --strict nothing is stored."""
    folder = tmp_path / "docs"
    write(folder / "a_good.txt", "A good document.\n")
    write(folder / "b_good.jsonl", '{"id": "j1", "text": "Also good."}\n')
    bad = {
        "c_nul.txt": ("line one\nline two\nthree \0 here\n", 3, "the text contains a NUL character"),
        "d_nul.jsonl": (
            '{"id": "j2", "text": "fine"}\n{"id": "j3", "text": "x\\u0000"}\n',
            2,
            "the text contains a NUL",
        ),
        "e_surrogate.jsonl": (
            '{"id": "j4", "text": "ok", "topic": "\\udc00"}\n',
            1,
            "metadata['topic'] contains a lone surrogate",
        ),
        "f_deep.jsonl": (
            DEEP.replace('"qid": "q1", "query": "x"', '"id": "j5", "text": "ok"'),
            1,
            "malformed JSON: nested too deeply",
        ),
        "g_empty.jsonl": ("", None, "no documents (the file is empty"),
    }
    for name, (text, _, _) in bad.items():
        write(folder / name, text)
    assert main(["ingest", str(folder), "--corpus", "c", "--embedder", "offline:32"]) == 0
    err = capsys.readouterr().err
    for name, (_, line, message) in bad.items():
        where = f"{folder / name}:{line}" if line else f"{folder / name}"
        assert f"{where}: {message}" in err, (name, err)
    assert "Traceback" not in err
    with connect(fresh_db) as c:
        assert count(c, "document") == 2
        assert c.execute("select text from ragsql.document order by text").fetchall() == [
            ("A good document.\n",),
            ("Also good.",),
        ]
    assert main(["ingest", str(folder), "--corpus", "strict", "--strict", "--embedder", "offline:32"]) != 0
    err = capsys.readouterr().err
    assert (
        err.startswith(f"ragsql: error: {folder / 'c_nul.txt'}:3: the text contains a NUL") and "Traceback" not in err
    )
    with connect(fresh_db) as c:
        assert c.execute("select count(*) from ragsql.corpus where name = 'strict'").fetchone()[0] == 0


def test_ingest_of_only_unsupported_or_bad_files_is_an_error_and_creates_nothing(conn, tmp_path):
    """A folder with no supported file names what it found and what is supported; all-bad files are an error."""
    write(tmp_path / "only" / "paper.pdf", b"%PDF-1.4")
    write(tmp_path / "only" / "notes.docx", b"PK")
    write(tmp_path / "only" / "sub" / "more.pdf", b"%PDF-1.4")
    with pytest.raises(
        InputError,
        match=r"nothing to ingest: found 3 files \(1 \.docx, 2 \.pdf\), none of a "
        r"supported kind \(\.txt, \.md, \.markdown, \.jsonl\)",
    ) as caught:
        ingest(conn, [tmp_path / "only"], "c", settings=OFFLINE)
    assert caught.value.path == str(tmp_path / "only")
    write(tmp_path / "bad" / "x.txt", "nul\0\n")
    with pytest.raises(InputError, match="nothing to ingest: no good file among the 1 of a supported kind"):
        ingest(conn, [tmp_path / "bad"], "c", settings=OFFLINE)
    assert count(conn, "corpus") == 0


def test_tiny_chunk_sizes_work_or_are_one_usage_line(conn, shared_db_url, tmp_path, capsys, monkeypatch):
    """--chunk-size 1 leaves whitespace-only pieces out (positions stay 1..n); an overlap too big is one line."""
    monkeypatch.setenv("RAGSQL_DATABASE_URL", shared_db_url)
    path = write(tmp_path / "a.txt", "ab c.\n\nd e\n")
    assert main(["ingest", path, "--corpus", "c", "--chunk-size", "1"]) == 2  # before conn takes any lock
    err = capsys.readouterr().err
    assert err.startswith("ragsql: usage: ") and "overlap" in err and len(err.splitlines()) == 1
    summary = ingest(conn, [path], "c", chunk_size=1, overlap=0, settings=OFFLINE)
    rows = conn.execute("select position, text from ragsql.chunk order by position").fetchall()
    assert rows == [(1, "a"), (2, "b"), (3, "c"), (4, "."), (5, "d"), (6, "e")] and summary.chunks == 6


class _Counting:
    """An embedder that records how many texts each call embeds and delegates to the real one."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []
        self.name, self.offline = inner.name, inner.offline

    async def embed(self, texts):
        self.calls.append(len(texts))
        return await self.inner.embed(texts)

    async def aclose(self):
        await self.inner.aclose()


def test_a_long_document_is_chunked_and_embedded_in_bounded_batches(conn, tmp_path, monkeypatch):
    """Chunks are embedded BATCH_CHUNKS at a time and documents fetched BATCH_BYTES at a time, and the rows equal
    those of one big batch."""
    text = "\n\n".join(f"Paragraph {i} says something about topic {i % 7}." for i in range(400))
    paths = [write(tmp_path / f"d{i}.txt", text + f"\n\nEnd of {i}.\n") for i in range(3)]

    def rows(corpus: str) -> list:
        return conn.execute(
            "select d.doc_id, c.position, c.start_char, c.end_char, c.length, c.embedding::text from ragsql.chunk c "
            "join ragsql.document d on d.id = c.document_id join ragsql.corpus k on k.id = d.corpus_id "
            "where k.name = %s order by 1, 2",
            (corpus,),
        ).fetchall()

    made = []
    real = ingest_module.make_embedder
    monkeypatch.setattr(ingest_module, "make_embedder", lambda *a: made.append(_Counting(real(*a))) or made[-1])
    ingest(conn, paths, "whole", chunk_size=120, overlap=20, settings=OFFLINE)
    monkeypatch.setattr(ingest_module, "BATCH_CHUNKS", 50)
    monkeypatch.setattr(ingest_module, "BATCH_BYTES", len(text) // 2)
    fetched = []
    real_fetch = ingest_module.store.fetch_documents
    monkeypatch.setattr(
        ingest_module.store, "fetch_documents", lambda c, ids: fetched.append(len(ids)) or real_fetch(c, ids)
    )
    ingest(conn, paths, "batched", chunk_size=120, overlap=20, settings=OFFLINE)
    assert max(made[1].calls) == 50 and len(made[1].calls) > 3 and len(made[0].calls) < len(made[1].calls)
    assert fetched == [1, 1, 1]
    assert rows("batched") == rows("whole") != []


@pytest.mark.parametrize("splitter", ["character", "recursive", "markdown"])
def test_a_text_longer_than_a_section_is_chunked_section_by_section_with_exact_spans(monkeypatch, splitter):
    """Sections are cut at blank lines (else line breaks, spaces, or hard): spans stay exact, positions 1..n,
    and every non-blank character of the text is in a chunk."""
    splitting = importlib.import_module("ragsql.corpus.splitting")
    monkeypatch.setattr(splitting, "SECTION", 300)
    text = "\n\n".join(f"# Part {i}\n\nSentence {i} about retrieval. Another one, with 中文。" for i in range(40))
    text += "\n\n" + "x" * 700 + "\n" + " ".join(["word"] * 200)
    chunks = Chunker(splitter, 120, 30).split(text)
    assert [c.position for c in chunks] == list(range(1, len(chunks) + 1))
    assert all(text[c.start : c.end] == c.text and c.text.strip() for c in chunks)
    covered = set().union(*(range(c.start, c.end) for c in chunks))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    assert max(c.end for c in chunks) <= len(text) and all(len(c.text) <= 300 for c in chunks)


def test_a_csv_whose_header_line_is_blank_is_one_input_error(tmp_path):
    """A blank first line is an InputError at line 1 (found by hypothesis: an IndexError before)."""
    from ragsql.formats import parse_records

    path = write(tmp_path / "blank.csv", "\nq1,text\n")
    with pytest.raises(InputError, match="the CSV header, is empty") as caught:
        list(parse_records(["\n", "q1,text\n"], "csv", path))
    assert caught.value.line == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["fuse", "--runs", "a,b", "--run", "f", "--method", "wsum", "--weights", "nan,1"],
            """--weights "nan,1": 'nan' is not a finite number""",
        ),
        (
            ["fuse", "--runs", "a,b", "--run", "f", "--method", "wsum", "--weights", "1,1e400"],
            "'1e400' is not a finite",
        ),
        (
            ["check", "--run", "x", "--min", "nDCG@10=1e400"],
            """--min "nDCG@10=1e400": '1e400' is not a finite number""",
        ),
        (["check", "--run", "x", "--max-drop", "AP=-1e999", "--baseline", "y"], "'-1e999' is not a finite number"),
    ],
)
def test_numbers_beyond_float8_are_one_usage_line_before_any_database_work(capsys, monkeypatch, args, message):
    """A number no float8 holds (nan, 1e400) in a list option is one `ragsql: usage:` line, exit 2, and nothing
    connects (the database URL points nowhere)."""
    monkeypatch.setenv("RAGSQL_DATABASE_URL", "postgresql://ragsql@127.0.0.1:9/ragsql")
    monkeypatch.setenv("RAGSQL_CONNECT_TIMEOUT", "0")
    code = main(args)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1 and err.startswith("ragsql: usage: ") and message in err, err


MARKUP_NAMES = ["[/bold] x", "[red]", "[link=x] budget $5_a_b$", "_x :smile:"]


def test_names_with_markup_dollars_and_underscores_are_printed_literally_by_every_command(
    fresh_db, tmp_path, capsys, monkeypatch
):
    """Datasets and runs named with rich markup, emoji codes, `$` and `_` are printed as written and every command
    exits 0 (issue 26: `[/bold] x` crashed list, show, metrics, scores and report, and a successful judge
    exited 1)."""
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    example = Path(__file__).parents[1] / "ragsql" / "data" / "example_evalset.jsonl"
    for name in MARKUP_NAMES:
        assert main(["import", "jsonl", str(example), "--dataset", name, "--run", name]) == 0, capsys.readouterr().err
    capsys.readouterr()
    commands = [["list", "runs"], ["list", "datasets"]] + [
        command
        for name in MARKUP_NAMES
        for command in (
            ["judge", "--run", name, "--offline", "--metrics", "faithfulness"],
            ["show", "run", name],
            ["metrics", "--run", name],
            ["scores", "--run", name],
            ["diagnose", "--run", name],
            ["report", "--run", name, "--resamples", "100", "--html", str(tmp_path / "r.html")],
        )
    ]
    for command in commands:
        code = main(command)
        out, err = capsys.readouterr()
        assert code == 0 and "Traceback" not in err, (command, code, err)
        for name in MARKUP_NAMES if command[0] == "list" else [command[-1] if command[0] == "show" else command[2]]:
            assert name in out, (command, name, out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "jsonl", "{file}", "--dataset", "a\0b"], r"argument 'a\x00b' contains a NUL character"),
        (["import", "jsonl", "{file}", "--dataset", "d", "--run", "r\ud800"], r"argument 'r\ud800' is not valid UTF-8"),
        (["metrics", "--run", "r\udcff"], r"argument 'r\udcff' is not valid UTF-8"),
    ],
)
def test_an_argument_postgresql_cannot_store_is_one_usage_line(fresh_db, tmp_path, capsys, args, message):
    """A NUL or a lone surrogate (an argv byte that is no UTF-8) in any argument is one line naming it, exit 2,
    and nothing is stored."""
    path = write(tmp_path / "good.jsonl", GOOD)
    code = main([a.replace("{file}", path) for a in args])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1 and err.startswith("ragsql: usage: ") and message in err, err
    with connect(fresh_db) as c:
        assert count(c, "dataset") == 0
