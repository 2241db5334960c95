"""File formats ragsql reads: TREC qrels/runs, JSONL and CSV eval sets. Parsing only, no database."""

from ragsql.formats.records import Record, context_docno, parse_records
from ragsql.formats.trec import RankedBlock, parse_qrels, parse_run, rank_run

__all__ = ["RankedBlock", "Record", "context_docno", "parse_qrels", "parse_records", "parse_run", "rank_run"]
