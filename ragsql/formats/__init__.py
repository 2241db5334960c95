"""File formats ragsql reads: TREC qrels/runs, JSONL and CSV eval sets. Parsing only, no database."""

from ragsql.formats.trec import parse_qrels, parse_run

__all__ = ["parse_qrels", "parse_run"]
