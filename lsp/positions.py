"""The only place where LSP positions and text offsets meet.

The editspec core works on text with "\n" line ends; a document may use "\r\n". Offsets into the
normalised text are mapped to offsets into the document's own text here, and those to LSP positions in the
session's encoding by pygls (UTF-16, UTF-8 or UTF-32, whatever the client negotiated).
"""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace import TextDocument


class OutsideDocument(ValueError):
    pass


def offset_at(doc: TextDocument, position: types.Position) -> int:
    """Character offset into doc.source; a position past the last line is an error, not clamped."""
    lines = doc.lines
    if position.line < 0 or position.character < 0 or position.line > len(lines):
        raise OutsideDocument(
            f"position {position.line}:{position.character} is outside the document ({len(lines)} lines)"
        )
    return doc.offset_at_position(position)


def range_at(doc: TextDocument, start: int, end: int) -> types.Range:
    return types.Range(doc.client_position_at_offset(start), doc.client_position_at_offset(end))


def uses_crlf(text: str) -> bool:
    return "\r\n" in text


def to_lf_offset(text: str, offset: int) -> int:
    """Offset in the "\n" version of text for an offset in text itself."""
    return offset - text.count("\r\n", 0, offset)


def from_lf_offset(text: str, offset: int) -> int:
    """Offset in text for an offset into its "\n" version."""
    if "\r" not in text:
        return offset
    lf_seen = doc_offset = 0
    while lf_seen < offset and doc_offset < len(text):
        if text.startswith("\r\n", doc_offset):
            doc_offset += 2
        else:
            doc_offset += 1
        lf_seen += 1
    return doc_offset


def to_document_newlines(text: str, crlf: bool) -> str:
    return text.replace("\n", "\r\n") if crlf else text
