"""Splitting documents into chunks with langchain's text splitters, each chunk with its exact character span.

``character`` splits at blank lines (CharacterTextSplitter), ``recursive`` at paragraphs, lines, then Chinese
and English sentence and clause ends, then spaces and characters, ``markdown`` at headings, code fences and
rules first (RecursiveCharacterTextSplitter.from_language). Separators are kept, so every chunk is a substring
of the document; its span is verified, never guessed. A text longer than SECTION characters is chunked section
by section (each cut at a blank line, else a line break, else a space), so splitting a document of any size holds
only one section's pieces in memory; a chunk never spans two sections.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from ragsql.errors import InputError

if TYPE_CHECKING:
    from langchain_text_splitters import TextSplitter

__all__ = ["SECTION", "SEPARATORS", "SPLITTERS", "Chunk", "Chunker"]

SPLITTERS = ("character", "recursive", "markdown")
SEPARATORS = ["\n\n", "\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ", "，", ", ", " ", ""]
"""Separators of the recursive splitter, coarsest first, for Chinese and English text."""
SECTION = 1_000_000
"""Longest piece of text handed to the splitter at once (see the module docstring)."""

# A paragraph longer than the chunk size stays whole with the character splitter, by design: langchain's
# "Created a chunk of size ..." warning per such chunk is noise.
_QUIET = "langchain_text_splitters.base"


class Chunk(NamedTuple):
    """A chunk: 1-based position in its document, span [start, end) of the document text, and that text."""

    position: int
    start: int
    end: int
    text: str


def _splitter(kind: str, size: int, overlap: int) -> TextSplitter:
    # imported here: langchain takes a third of a second to import, which every CLI command would pay
    from langchain_text_splitters import CharacterTextSplitter, Language, RecursiveCharacterTextSplitter

    logging.getLogger(_QUIET).setLevel(logging.ERROR)
    options = {"chunk_size": size, "chunk_overlap": overlap, "add_start_index": True}
    if kind == "character":
        return CharacterTextSplitter(separator="\n\n", keep_separator="end", **options)
    if kind == "recursive":
        return RecursiveCharacterTextSplitter(separators=SEPARATORS, keep_separator="end", **options)
    if kind == "markdown":
        return RecursiveCharacterTextSplitter.from_language(Language.MARKDOWN, keep_separator="start", **options)
    raise InputError(f"unknown splitter {kind!r}: use one of {', '.join(SPLITTERS)}")


class Chunker:
    """One chunking configuration: splitter kind, chunk size and overlap (in characters)."""

    def __init__(self, kind: str = "recursive", size: int = 500, overlap: int = 100):
        if size < 1:
            raise InputError(f"the chunk size must be positive, got {size}")
        if not 0 <= overlap < size:
            raise InputError(f"the overlap must be at least 0 and less than the chunk size ({size}), got {overlap}")
        self.kind, self.size, self.overlap = kind, size, overlap
        self._splitter = _splitter(kind, size, overlap)

    def split(self, text: str) -> list[Chunk]:
        """The chunks of `text`, in order, each with text == text[start:end]."""
        return list(self.chunks(text))

    def chunks(self, text: str) -> Iterator[Chunk]:
        """The chunks of `text` one by one, each with text == text[start:end]; pieces that are only whitespace
        (a chunk size of a few characters makes them) are left out, and positions count the chunks kept."""
        position = 0
        for offset, section in _sections(text, SECTION):
            previous = -1
            for doc in self._splitter.create_documents([section]):
                piece = doc.page_content
                start = _locate(section, piece, doc.metadata.get("start_index", -1), previous)
                previous = start
                if piece.strip():
                    position += 1
                    yield Chunk(position, offset + start, offset + start + len(piece), piece)


def _sections(text: str, size: int) -> Iterator[tuple[int, str]]:
    """(offset, section) of `text` in sections of at most `size` characters, each cut after the last blank line,
    else line break, else space of its second half (else at `size`)."""
    start = 0
    while len(text) - start > size:
        end = start + size
        for separator in ("\n\n", "\n", " "):
            cut = text.rfind(separator, start + size // 2, end)
            if cut >= 0:
                end = cut + len(separator)
                break
        yield start, text[start:end]
        start = end
    yield start, text[start:]


def _locate(text: str, piece: str, hint: int, previous: int) -> int:
    """Where `piece` starts in `text`: the splitter's start index when it is right, else the first occurrence
    after the previous chunk's start (then anywhere); a piece that is not in the text is an error."""
    if hint > previous and text.startswith(piece, hint):
        return hint
    for start in (text.find(piece, previous + 1), text.find(piece)):
        if start >= 0:
            return start
    raise ValueError(f"the splitter returned a chunk that is not part of the text: {piece[:40]!r}")
