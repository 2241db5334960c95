"""Reading the user's text files: UTF-8 lines, with unreadable files and bad bytes as one clear error."""

from __future__ import annotations

from collections.abc import Iterator

from ragsql.errors import InputError

__all__ = ["text_lines"]


def text_lines(path: str) -> Iterator[str]:
    """Lines of a UTF-8 text file (BOM dropped); unreadable files and bad bytes are InputErrors with the line."""
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(f"not UTF-8 text (byte {exc.start + 1} of the line)", path, number) from None
                yield text.lstrip("\ufeff") if number == 1 else text
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path) from None
