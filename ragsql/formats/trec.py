"""TREC qrels and run files, parsed as trec_eval 10 reads them; a run's results ranked as trec_eval ranks them."""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

from ragsql.errors import InputError
from ragsql.formats.files import byte_blocks, decode_line
from ragsql.formats.values import INT_MAX, MAX_ID_BYTES, id_problem

__all__ = ["RankedBlock", "parse_qrels", "parse_run", "rank_run", "trec_eval_order"]

# Controls that str.split() does not split on: an id holding one is an error (and \x01 marks line ends below).
_UNSAFE = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
# The same test on the UTF-8 bytes, several times faster: the ASCII ones are what bytes.translate does not delete
# from the block; the others (U+007F..U+009F but U+0085) are encoded as \xc2 and a second byte.
_SAFE_BYTES = bytes(sorted(set(range(256)) - set(range(0x00, 0x09)) - set(range(0x0E, 0x1C)) - {0x7F}))
# Lines trec_eval skips: a comment ('#' in column 0) or nothing but whitespace.
_SKIPPED = re.compile(r"^(?:#[^\n]*|[^\S\n]*)(?:\n|\Z)", re.MULTILINE)
_SHORT_ID = MAX_ID_BYTES // 4  # an id of at most this many characters is short enough, whatever its characters


def _fields(lines: Iterable[str]) -> Iterator[tuple[int, list[str]]]:
    # trec_eval: blank lines are skipped; '#' starts a comment only in column 0 (docnos may contain '#').
    for number, line in enumerate(lines, start=1):
        if line.startswith("#") or not line.strip():
            continue
        yield number, line.split()


def _require_ids(path: str, number: int, **ids: str) -> None:
    for what, value in ids.items():
        if problem := id_problem(value):
            raise InputError(f"the {what} {problem}", path, number)


def parse_qrels(lines: Iterable[str], path: str = "<qrels>") -> Iterator[tuple[str, str, int]]:
    """Yield (qid, docno, relevance) from `qid iter docno rel` lines; a docno judged twice is an error."""
    seen: set[tuple[str, str]] = set()
    for number, fields in _fields(lines):
        if len(fields) != 4:
            raise InputError(f"expected 4 fields 'qid iter docno rel', found {len(fields)}", path, number)
        qid, _, docno, rel = fields
        _require_ids(path, number, qid=qid, docno=docno)
        try:
            relevance = int(rel)
        except ValueError:
            raise InputError(f"relevance {rel[:40]!r} is not an integer", path, number) from None
        if abs(relevance) > INT_MAX:
            raise InputError(f"relevance {rel[:40]} is out of range (-{INT_MAX} to {INT_MAX})", path, number)
        if (qid, docno) in seen:
            raise InputError(f"{docno} is judged twice for query {qid}", path, number)
        seen.add((qid, docno))
        yield qid, docno, relevance


def _run_row(fields: list[str], path: str, number: int) -> tuple[str, str, float, str]:
    """(qid, docno, score, tag) of the fields of one run line, checked."""
    if len(fields) < 6:
        raise InputError(f"expected 6 fields 'qid Q0 docno rank score tag', found {len(fields)}", path, number)
    qid, _, docno, _, score_text, tag = fields[:6]
    _require_ids(path, number, qid=qid, docno=docno, tag=tag)
    try:
        score = float(score_text)
    except ValueError:
        raise InputError(f"score {score_text[:40]!r} is not a number", path, number) from None
    if not math.isfinite(score):
        raise InputError(f"score {score_text[:40]!r} is not a finite number", path, number)
    return qid, docno, score, tag


def parse_run(lines: Iterable[str], path: str = "<run>") -> Iterator[tuple[str, str, float, str]]:
    """Yield (qid, docno, score, tag) from `qid Q0 docno rank score tag` lines (extra fields ignored).

    The rank column is ignored, as trec_eval ignores it; a docno retrieved twice for a query is an error.
    """
    seen: set[tuple[str, str]] = set()
    for number, fields in _fields(lines):
        qid, docno, score, tag = _run_row(fields, path, number)
        if (qid, docno) in seen:
            raise InputError(f"{docno} is retrieved twice for query {qid}", path, number)
        seen.add((qid, docno))
        yield qid, docno, score, tag


def trec_eval_order(docnos: Iterable[str], scores: Iterable[float]) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """One query's results in trec_eval's order: score descending, ties by docno descending (code points, which is
    UTF-8 byte order, as trec_eval's strcmp); rank i is position i (from 1)."""
    ordered = sorted(zip(scores, docnos), reverse=True)
    return tuple(map(itemgetter(1), ordered)), tuple(map(itemgetter(0), ordered))


@dataclass
class _Rows:
    """Rows of a run file as columns, and where each run of consecutive lines starts (row index, line number)."""

    qids: list[str] = field(default_factory=list)
    docnos: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    starts: list[tuple[int, int]] = field(default_factory=list)

    def line(self, row: int) -> int:
        index, number = self.starts[bisect_right(self.starts, (row, math.inf)) - 1]
        return number + row - index

    def add(self, first_line: int, qids: list[str], docnos: list[str], scores: list[float], tags: list[str]) -> None:
        self.starts.append((len(self.qids), first_line))
        self.qids += qids
        self.docnos += docnos
        self.scores += scores
        self.tags += tags


def _fast(text: str, first: int, rows: _Rows) -> bool:
    """Add the lines of `text` (no comment or blank line among them) to rows when each has the same number of
    fields, every id is short and every score a finite number; False (nothing added) otherwise."""
    if not text.endswith("\n"):
        text += "\n"
    count = text.count("\n")
    width = len(text[: text.index("\n")].split())
    step = width + 1
    # every line then ends in one \x01 token: all lines have `width` fields exactly when the \x01 tokens are
    # `count` in number and all at the positions a multiple of step later
    tokens = text.replace("\n", " \x01 ").split()
    if width < 6 or len(tokens) != step * count or tokens[width::step].count("\x01") != count:
        return False
    qids, docnos, tags = tokens[0::step], tokens[2::step], tokens[5::step]
    if (
        max(map(len, docnos)) > _SHORT_ID
        or max(map(len, qids)) > _SHORT_ID
        or len(tags[0]) > _SHORT_ID
        or tags.count(tags[0]) != count
        and max(map(len, tags)) > _SHORT_ID
    ):  # one tag, as a rule
        return False
    try:
        scores = list(map(float, tokens[4::step]))
    except ValueError:
        return False
    if not all(map(math.isfinite, scores)):
        return False
    rows.add(first, qids, docnos, scores, tags)
    return True


def _lines(text: str, first: int, path: str, rows: _Rows) -> InputError | None:
    """Add the lines of `text` (no comment or blank line among them) to rows, fast when they allow it; else one
    at a time up to the first bad line, whose error is returned."""
    if not text or _UNSAFE.search(text) is None and _fast(text, first, rows):
        return None
    for number, line in enumerate(text.split("\n"), start=first):
        if not line:  # the end of the text (a blank line is never in it)
            break
        try:
            qid, docno, score, tag = _run_row(line.split(), path, number)
        except InputError as exc:
            return exc
        rows.add(number, [qid], [docno], [score], [tag])
    return None


def _block(data: bytes, first: int, path: str) -> tuple[_Rows, InputError | None]:
    """The rows of one block of whole lines, up to its first bad line, and that line's error (or None)."""
    rows = _Rows()
    try:
        text = data.decode("utf-8")
        bad = None
    except UnicodeDecodeError as exc:
        cut = data.rfind(b"\n", 0, exc.start) + 1
        text = data[:cut].decode("utf-8")
        end = data.find(b"\n", cut)
        bad = (first + data.count(b"\n", 0, cut), data[cut:] if end < 0 else data[cut : end + 1])
    if first == 1:
        text = text.lstrip("\ufeff")
    if (
        bad is None
        and not (text.startswith("#") or "\n#" in text)
        and not data.translate(None, _SAFE_BYTES)
        and (b"\xc2" not in data or _UNSAFE.search(text) is None)
        and _fast(text, first, rows)
    ):
        return rows, None
    start, number = 0, first
    for skipped in _SKIPPED.finditer(text):
        if skipped.start() == len(text):
            break
        if error := _lines(text[start : skipped.start()], number, path, rows):
            return rows, error
        number += text.count("\n", start, skipped.end())
        start = skipped.end()
    if error := _lines(text[start:], number, path, rows):
        return rows, error
    if bad is not None:
        try:
            decode_line(bad[1], path, bad[0])
        except InputError as exc:
            return rows, exc
    return rows, None


@dataclass
class RankedBlock:
    """What a block of a run file completes: its queries, ranked (qid, docnos, scores in rank order), and rows of
    queries the file left earlier (qids, docnos, scores), which only the whole file can rank."""

    tag: str
    qids: list[str]
    queries: list[tuple[str, tuple[str, ...], tuple[float, ...]]]
    loose: tuple[list[str], list[str], list[float]]

    @property
    def rows(self) -> int:
        return sum(len(docnos) for _, docnos, _ in self.queries) + len(self.loose[0])


def rank_run(path: str) -> Iterator[RankedBlock]:
    """Read a TREC run in blocks and yield, block by block, the queries completed so far, each ranked as trec_eval
    ranks it (trec_eval_order), with the qids each block names in order of first appearance.

    The file is checked as parse_run checks it and the first bad line raises its InputError, after the lines
    before it were checked for a docno retrieved twice. A run lists each query's results together, so memory
    holds one block and one query; the results of a query that comes back after other queries are `loose`, left
    to the caller to rank with the query's earlier ones and to check for a docno retrieved twice (duplicate).
    """
    current: str | None = None
    docnos: list[str] = []
    scores: list[float] = []
    seen: set[str] = set()
    done: set[str] = set()
    for first, data in byte_blocks(path):
        rows, error = _block(data, first, path)
        block = RankedBlock(rows.tags[0] if rows.tags else "", [], [], ([], [], []))
        start = 0
        for qid, group in groupby(rows.qids):
            end = start + len(list(group))
            block.qids.append(qid)
            if qid != current and current is not None:
                block.queries.append((current, *trec_eval_order(docnos, scores)))
                done.add(current)
                current, docnos, scores, seen = None, [], [], set()
            if qid in done:
                block.loose[0].extend(rows.qids[start:end])
                block.loose[1].extend(rows.docnos[start:end])
                block.loose[2].extend(rows.scores[start:end])
            else:
                _require_new(rows, start, end, seen, path)
                current = qid
                docnos += rows.docnos[start:end]
                scores += rows.scores[start:end]
            start = end
        if error is not None:
            raise error
        if rows.qids:
            block.qids = list(dict.fromkeys(block.qids))
            yield block
    if current is not None:
        yield RankedBlock("", [], [(current, *trec_eval_order(docnos, scores))], ([], [], []))


def _require_new(rows: _Rows, start: int, end: int, seen: set[str], path: str) -> None:
    """Add the docnos of rows start..end-1 (one query's) to `seen`; one seen before is an error at its line."""
    group = rows.docnos[start:end]
    fresh = set(group)
    if len(fresh) == len(group) and seen.isdisjoint(fresh):
        seen |= fresh
        return
    for row in range(start, end):
        docno = rows.docnos[row]
        if docno in seen:
            raise InputError(f"{docno} is retrieved twice for query {rows.qids[row]}", path, rows.line(row))
        seen.add(docno)
