"""rank_run: a TREC run read in blocks, checked line by line as parse_run checks it, each query ranked as trec_eval
ranks it (score descending, ties by docno descending in byte order) — no database."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ragsql.errors import InputError
from ragsql.formats import files, parse_run, rank_run
from ragsql.formats.files import byte_blocks, text_lines
from ragsql.formats.trec import trec_eval_order
from tests.loading import generated_run


@contextlib.contextmanager
def block_bytes(size: int):
    """Read files in blocks of about `size` bytes (many blocks even for a small file)."""
    kept = files.BLOCK_BYTES
    files.BLOCK_BYTES = size
    try:
        yield
    finally:
        files.BLOCK_BYTES = kept


def rankings(path: str) -> dict[str, list[tuple[str, float]]]:
    """{qid: [(docno, score), ...] in rank order} from rank_run; a query's loose rows ranked with its others, as
    the importer has the database do."""
    ranked: dict[str, list[tuple[str, float]]] = {}
    loose: dict[str, list[tuple[str, float]]] = {}
    for block in rank_run(path):
        for qid, docnos, scores in block.queries:
            assert qid not in ranked, f"{qid} completed twice"
            ranked[qid] = list(zip(docnos, scores))
        for qid, docno, score in zip(*block.loose):
            assert qid in ranked, f"loose rows of {qid}, which no block completed before"
            loose.setdefault(qid, []).append((docno, score))
    for qid, rows in loose.items():
        docnos, scores = zip(*(ranked[qid] + rows))
        ranked[qid] = list(zip(*trec_eval_order(docnos, scores)))
    return ranked


def expected(path: str) -> dict[str, list[tuple[str, float]]]:
    """The same from parse_run, sorted by trec_eval's rule written out: score, then the docno's UTF-8 bytes, both
    descending."""
    rows: dict[str, list[tuple[str, float]]] = {}
    for qid, docno, score, _ in parse_run(text_lines(path), path):
        rows.setdefault(qid, []).append((docno, score))
    return {
        qid: sorted(r, key=lambda pair: (pair[1], pair[0].encode("utf-8")), reverse=True) for qid, r in rows.items()
    }


def outcome(call) -> tuple[object, str | None, int | None]:
    try:
        return call(), None, None
    except InputError as exc:
        return None, str(exc), exc.line


def write(folder: Path, data: bytes) -> str:
    path = folder / "r.run"
    path.write_bytes(data)
    return str(path)


def test_ties_rank_by_docno_descending_in_utf8_byte_order(tmp_path):
    """Equal scores rank by docno descending in byte order: 'é' (c3 a9) and '中' (e4 b8 ad) above 'z', 'd9' above
    'd10'; -0.0 ties with 0.0."""
    path = write(
        tmp_path,
        "t1 Q0 d10 1 0.5 r\nt1 Q0 z 2 0.5 r\nt1 Q0 中 3 0.5 r\nt1 Q0 é 4 0.5 r\n"
        "t1 Q0 d9 5 0.5 r\nt1 Q0 top 6 0.9 r\nt1 Q0 -0 7 -0.0 r\nt1 Q0 +0 8 0.0 r\n".encode(),
    )
    assert rankings(path) == {
        "t1": [("top", 0.9), ("中", 0.5), ("é", 0.5), ("z", 0.5), ("d9", 0.5), ("d10", 0.5), ("-0", -0.0), ("+0", 0.0)]
    }


def test_blocks_cover_the_file_and_number_its_lines(tmp_path):
    """byte_blocks returns every byte once, in whole lines, with each block's first line number; a line longer
    than a block and a last line without a newline come whole."""
    data = b"a\n" + b"x" * 50 + b"\nb\n\nc"
    path = write(tmp_path, data)
    blocks = list(byte_blocks(path, 8))
    assert b"".join(block for _, block in blocks) == data
    assert all(block.endswith(b"\n") for _, block in blocks[:-1])
    for first, block in blocks:
        assert data.count(b"\n", 0, data.index(block)) + 1 == first


def test_a_query_split_over_blocks_is_ranked_whole_and_a_duplicate_names_its_line(tmp_path):
    """A query's lines in several blocks are ranked together; its docno given again in a later block is an error
    at that line, before a bad line further on."""
    lines = [f"q1 Q0 d{i} {i} {i % 3} r" for i in range(40)] + ["q2 Q0 d1 1 1 r"]
    path = write(tmp_path, ("\n".join(lines) + "\n").encode())
    with block_bytes(32):
        assert rankings(path) == expected(path)
        bad = write(tmp_path, ("\n".join([*lines, "q2 Q0 d9 1 1 r", "q2 Q0 d1 2 0 r", "q2 oops"]) + "\n").encode())
        with pytest.raises(InputError, match="d1 is retrieved twice for query q2") as caught:
            rankings(bad)
        assert caught.value.line == 43


def test_comments_blank_lines_and_extra_fields_inside_a_block(tmp_path):
    """A '#' line of six fields is a comment wherever it is, a blank or whitespace-only line is skipped, a BOM
    starts line 1 only, fields after the tag are ignored, and the lines keep their numbers."""
    text = "\ufeffq1 Q0 a 1 3 r\n#q1 Q0 b 2 2 r\n\n \t\x0c\r\nq1 Q0 c 3 1 r x y\r\n"
    path = write(tmp_path, (text + "q1 Q0 a 4 0 r\n").encode())
    with pytest.raises(InputError, match="a is retrieved twice for query q1") as caught:
        rankings(path)
    assert caught.value.line == 6
    path = write(tmp_path, text.encode())
    assert rankings(path) == {"q1": [("a", 3.0), ("c", 1.0)]}
    path = write(tmp_path, b"q1 Q0 a 1 3 r\n#q1 Q0 b 2 2 r\nq1 Q0 c 3 1 r\n")
    assert rankings(path) == {"q1": [("a", 3.0), ("c", 1.0)]}


def test_a_query_the_file_comes_back_to_is_left_loose(tmp_path):
    """A query whose lines are not all together: its later lines are loose rows, for the caller to rank with the
    earlier ones."""
    path = write(tmp_path, b"q1 Q0 a 1 1 r\nq2 Q0 b 1 1 r\nq1 Q0 c 2 2 r\nq1 Q0 d 3 2 r\n")
    blocks = list(rank_run(path))
    assert [q for b in blocks for q, _, _ in b.queries] == ["q1", "q2"]
    assert [list(column) for b in blocks for column in b.loose if b.loose[0]] == [["q1", "q1"], ["c", "d"], [2.0, 2.0]]
    assert rankings(path) == expected(path) == {"q1": [("d", 2.0), ("c", 2.0), ("a", 1.0)], "q2": [("b", 1.0)]}


def test_generated_runs_with_ties_rank_as_written_out(tmp_path):
    """Runs of 30 queries × 40 results, one-decimal scores (many ties), ids in several scripts, in rank order,
    shuffled, or with queries coming back, read in small blocks: every ranking equals trec_eval's rule."""
    for layout in ("rank order", "shuffled within queries", "queries come back", "all shuffled"):
        path = tmp_path / f"{layout}.run"
        ranked = generated_run(path, layout, seed=7)
        with block_bytes(1000):
            got = rankings(str(path))
        assert got == expected(str(path)), layout
        assert [(q, rank, d, s) for q, rows in sorted(got.items()) for rank, (d, s) in enumerate(rows, 1)] == ranked


_token = st.sampled_from(
    [
        "q1",
        "q2",
        "q3",
        "d1",
        "d2",
        "d3",
        "é",
        "中",
        "a\\b",
        "x#",
        "Q0",
        "1",
        "0.5",
        "2",
        "-1",
        "1e3",
        "1_0",
        "nan",
        "inf",
        "1e999",
        "x" * 251,
        "d\x00",
        "d\x07",
        "d\x85e",
        "d\xa0e",
    ]
)
_line = st.one_of(
    st.tuples(
        st.sampled_from(["q1", "q2", "q3"]),
        st.just("Q0"),
        st.sampled_from(["d1", "d2", "d3", "é", "中", "a\\b"]),
        st.just("1"),
        st.sampled_from(["0.5", "1", "1.0", "-0.0", "0", "2"]),
        st.just("r"),
    ).map(" ".join),
    st.lists(_token, min_size=0, max_size=8).map(" ".join),
    st.sampled_from(
        [
            "",
            "  ",
            "# comment q1 Q0 d1 1 1 r",
            "#q1 Q0 d2 1 1 r",
            "# q1 Q0 d3 1 r",
            " # not a comment",
            "\r",
            "\ufeff",
            "\x0c",
        ]
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_line, max_size=12),
    ending=st.sampled_from(["\n", "\r\n"]),
    last=st.booleans(),
    garbage=st.just(b"") | st.binary(max_size=3),
    at=st.integers(0, 10**6),
    size=st.integers(1, 400),
)
def test_any_run_is_read_as_parse_run_reads_it(lines, ending, last, garbage, at, size):
    """Any file, read in blocks of any size: rank_run raises parse_run's first error (message and line), or ranks
    what parse_run reads; only a docno given twice for a query the file came back to is left to the database."""
    data = (ending.join(lines) + (ending if last else "")).encode("utf-8")
    at %= len(data) + 1
    data = data[:at] + garbage + data[at:]
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder), data)
        with block_bytes(size):
            got = outcome(lambda: rankings(path))
        want = outcome(lambda: expected(path))
    if want[1] is None or "retrieved twice" not in want[1]:
        assert got == want
    else:  # the duplicate's query came back, or it is reported as parse_run reports it
        assert got == want or got[1] is None or got[2] > want[2]


def test_unreadable_file_is_one_input_error(tmp_path):
    """A missing file is an InputError naming it, as text_lines reports it."""
    missing = str(tmp_path / "none.run")
    with pytest.raises(InputError, match="cannot read the file") as caught:
        list(rank_run(missing))
    assert caught.value.path == missing and os.path.basename(missing) in str(caught.value)
