"""TREC qrels and run files, parsed as trec_eval 10 reads them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ragsql.errors import InputError
from ragsql.formats.values import INT_MAX, id_problem

__all__ = ["parse_qrels", "parse_run"]


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


def parse_run(lines: Iterable[str], path: str = "<run>") -> Iterator[tuple[str, str, float, str]]:
    """Yield (qid, docno, score, tag) from `qid Q0 docno rank score tag` lines (extra fields ignored).

    The rank column is ignored, as trec_eval ignores it; a docno retrieved twice for a query is an error.
    """
    seen: set[tuple[str, str]] = set()
    for number, fields in _fields(lines):
        if len(fields) < 6:
            raise InputError(
                f"expected 6 fields 'qid Q0 docno rank score tag', found {len(fields)}", path, number
            )
        qid, _, docno, _, score_text, tag = fields[:6]
        _require_ids(path, number, qid=qid, docno=docno, tag=tag)
        try:
            score = float(score_text)
        except ValueError:
            raise InputError(f"score {score_text[:40]!r} is not a number", path, number) from None
        if score != score or score in (float("inf"), float("-inf")):
            raise InputError(f"score {score_text[:40]!r} is not a finite number", path, number)
        if (qid, docno) in seen:
            raise InputError(f"{docno} is retrieved twice for query {qid}", path, number)
        seen.add((qid, docno))
        yield qid, docno, score, tag
