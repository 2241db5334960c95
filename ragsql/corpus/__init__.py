"""Corpus building blocks with no database: reading source files, splitting documents into chunks with their
exact character spans, and jieba tokens for Chinese BM25."""

from ragsql.corpus.readers import EXTENSIONS, SourceDocument, content_hash, find_files, read_documents
from ragsql.corpus.splitting import SPLITTERS, Chunk, Chunker
from ragsql.corpus.tokens import SEGMENTERS, zh_terms

__all__ = [
    "EXTENSIONS",
    "SEGMENTERS",
    "SPLITTERS",
    "Chunk",
    "Chunker",
    "SourceDocument",
    "content_hash",
    "find_files",
    "read_documents",
    "zh_terms",
]
