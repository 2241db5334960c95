"""Source files of a corpus: which files an ingest reads, and the documents each holds.

``.txt`` and ``.md``/``.markdown`` files are one document each, whose doc_id is `document_id`'s: the path
relative to the folder given (or the file name, for a file given by itself), ``/``-separated, without the
extension, so ``docs/zh/moon.md`` ingested as ``docs/`` is ``zh/moon``. ``.jsonl`` files hold one document per
line (``id``, ``text``, optional ``title``, ``lang``/``language``; other fields become metadata). A file is read
whole before any of its documents is used, so a bad one raises `InputError` (with its line) and is never
half-loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ragsql.errors import InputError

__all__ = ["EXTENSIONS", "SourceDocument", "content_hash", "document_id", "find_files", "read_documents"]

EXTENSIONS = (".txt", ".md", ".markdown", ".jsonl")
_WHOLE_FILE = re.compile(r"\.(?:txt|md|markdown)$", re.IGNORECASE)
_LANGUAGE = re.compile(r"[a-z]{2,3}")
_MD_TITLE = re.compile(r"^# +(.+?)(?: +#+)? *$", re.MULTILINE)


@dataclass(frozen=True)
class SourceDocument:
    """One document as read: language None means 'detect it'; line is its JSONL line (None for a whole file)."""

    doc_id: str
    text: str
    title: str | None = None
    language: str | None = None
    metadata: dict = field(default_factory=dict)
    source: str = ""
    line: int | None = None


def content_hash(title: str | None, text: str, language: str | None, metadata: dict) -> str:
    """sha256 (hex) of the canonical JSON of a document's title, text, language and metadata."""
    canonical = json.dumps(
        {"title": title, "text": text, "language": language, "metadata": metadata},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def find_files(paths: Iterable[str | os.PathLike], on_skip: Callable[[str, str], None]) -> Iterator[tuple[str, str]]:
    """(path, name) of each readable file under `paths` (folders recursively, in sorted order, hidden entries
    left out); name is the `document_id` of a .txt or .md file. Files with another extension are passed to
    on_skip(path, message)."""
    for given in (os.fspath(path) for path in paths):
        if os.path.isdir(given):
            found = sorted(_walk(given))
            files = [(p, document_id(os.path.relpath(p, given))) for p in found]
        elif os.path.isfile(given):
            files = [(given, document_id(os.path.basename(given)))]
        else:
            raise InputError("no such file or folder", given)
        for path, name in files:
            if path.lower().endswith(EXTENSIONS):
                yield path, name
            else:
                on_skip(path, f"skipped: not one of {', '.join(EXTENSIONS)}")


def document_id(relative_path: str) -> str:
    """The doc_id of a .txt/.md/.markdown file: its path relative to the folder given, /-separated, without
    the extension (``zh/moon.md`` -> ``zh/moon``); gold evidence names the document by it."""
    return _WHOLE_FILE.sub("", relative_path.replace(os.sep, "/"))


def _walk(folder: str) -> Iterator[str]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        yield from (os.path.join(root, f) for f in files if not f.startswith("."))


def read_documents(path: str, name: str) -> list[SourceDocument]:
    """Every document of one file (see the module docstring); InputError(path, line) for a bad file."""
    text = _decode(path)
    if path.lower().endswith(".jsonl"):
        documents = list(_jsonl(text, path))
        if not documents:
            raise InputError("no documents (the file is empty, or only blank lines)", path)
        return documents
    text = text.replace("\r\n", "\n")
    if not text.strip():
        raise InputError("empty document", path)
    if path.lower().endswith(".txt"):
        title = next(line.strip() for line in text.splitlines() if line.strip())
    else:
        match = _MD_TITLE.search(text)
        title = match.group(1).strip() if match else None
    return [SourceDocument(name, text, title, None, {}, path)]


def _decode(path: str) -> str:
    """The file's text (UTF-8, BOM dropped); undecodable bytes are an InputError naming their line."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path) from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (byte {exc.start - line_start + 1} of the line)", path, line) from None


def _jsonl(text: str, path: str) -> Iterator[SourceDocument]:
    seen: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON: {exc.msg} (column {exc.colno})", path, number) from None
        except (RecursionError, ValueError):  # nested too deeply, or an integer of more than 4,300 digits
            raise InputError("malformed JSON: nested too deeply, or a number too long", path, number) from None
        if not isinstance(record, dict):
            raise InputError("a line must be a JSON object", path, number)
        doc = _document(record, path, number)
        if doc.doc_id in seen:
            raise InputError(f"duplicate id {doc.doc_id!r} (also on line {seen[doc.doc_id]})", path, number)
        seen[doc.doc_id] = number
        yield doc


def _document(record: dict, path: str, number: int) -> SourceDocument:
    """The document of one JSONL object; InputError for a missing id or text or a field of the wrong type."""
    record = dict(record)
    doc_id = record.pop("id", None)
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise InputError("missing or empty 'id' (a string or an integer)", path, number)
    text = record.pop("text", None)
    if not isinstance(text, str) or not text.strip():
        raise InputError("missing or empty 'text'", path, number)
    title = record.pop("title", None)
    if title is not None and not isinstance(title, str):
        raise InputError("'title' must be a string", path, number)
    lang, language = record.pop("lang", None), record.pop("language", None)
    language = _language(language if lang is None else lang, path, number)
    return SourceDocument(doc_id, text, title, language, record, path, number)


def _language(value: object, path: str, number: int) -> str | None:
    """A language code such as 'zh' or 'en' ('zh-CN' → 'zh'); None when not given."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    code = re.split(r"[-_]", value.strip().lower())[0] if isinstance(value, str) else ""
    if not _LANGUAGE.fullmatch(code):
        raise InputError(f"'lang' must be a language code such as 'zh' or 'en', got {value!r}", path, number)
    return code
