"""`ragsql ingest`: load documents into a corpus, chunk, tokenise and embed them into a corpus version."""

from ragsql.ingest.ingest import IngestSummary, ingest

__all__ = ["IngestSummary", "ingest"]
