"""Reading the user's text files: UTF-8 lines, with unreadable files and bad bytes as one clear error."""

from __future__ import annotations

from collections.abc import Iterator

from ragsql.errors import InputError

__all__ = ["byte_blocks", "decode_line", "text_lines"]

BLOCK_BYTES = 1 << 22
"""Bytes read at a time by byte_blocks (a block is cut after its last newline, so it may hold a little more)."""


def text_lines(path: str) -> Iterator[str]:
    """Lines of a UTF-8 text file (BOM dropped); unreadable files and bad bytes are InputErrors with the line."""
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                yield decode_line(raw, path, number)
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path) from None


def decode_line(raw: bytes, path: str, number: int) -> str:
    """One line's bytes as text (the BOM dropped from line 1); bad UTF-8 is an InputError naming the line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start + 1} of the line)", path, number) from None
    return text.lstrip("\ufeff") if number == 1 else text


def byte_blocks(path: str, size: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, bytes) of successive blocks of whole lines of a file, each ending with a newline
    but perhaps the file's last; an unreadable file is an InputError. Blocks grow from 64 KiB to about `size`
    bytes (BLOCK_BYTES by default), so that the first is soon ready and the rest are few."""
    size = size or BLOCK_BYTES
    read = min(size, 1 << 16)
    try:
        with open(path, "rb") as handle:
            number, pending = 1, []  # the start of a line longer than a block waits here, joined once
            while data := handle.read(read):
                read = min(size, 2 * read)
                cut = data.rfind(b"\n") + 1
                if not cut:
                    pending.append(data)
                    continue
                block = b"".join([*pending, data[:cut]])
                yield number, block
                number += block.count(b"\n")
                pending = [data[cut:]] if cut < len(data) else []
            if pending:
                yield number, b"".join(pending)
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", path) from None
