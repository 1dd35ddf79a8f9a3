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


def split_lines(text: str) -> list[str]:
    """Lines with their ends, split at "\n" only (what the model's "\n" lines correspond to)."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def region_newline(region: str) -> str:
    """The line end a region's new lines get: the one most of its lines have (a file may mix them)."""
    crlf = region.count("\r\n")
    return "\r\n" if crlf and crlf >= region.count("\n") - crlf else "\n"


def with_newline(text: str, newline: str) -> str:
    return text.replace("\n", newline) if newline != "\n" else text


def changed_span(old: str, new: str) -> tuple[int, int, int]:
    """(a, old_end, new_end): old[a:old_end] became new[a:new_end], the rest is common prefix and suffix."""
    n = min(len(old), len(new))
    lo, hi = 0, n  # the longest common prefix, by halving (each comparison runs in C)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[:mid] == new[:mid]:
            lo = mid
        else:
            hi = mid - 1
    a = lo
    lo, hi = 0, n - a
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid :] == new[len(new) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return a, len(old) - lo, len(new) - lo


def apply_edits(doc: TextDocument, text: str, edits: list[types.TextEdit]) -> str:
    """`text` with the edits of one workspace edit applied, as an editor does: every range is of `text` as it was
    (so the last one in the text goes first; they do not overlap)."""
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = apply_edit(doc, text, edit)
    return text


def apply_edit(doc: TextDocument, text: str, edit: types.TextEdit) -> str:
    """`text` with an LSP edit applied as an editor applies it (positions in the document's encoding)."""
    from .documents import LspTextDocument

    scratch = LspTextDocument(doc.uri, source=text, position_codec=doc.position_codec)
    try:
        scratch.apply_change(types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text))
    except Exception as e:  # positions outside that text
        raise OutsideDocument(str(e)) from None
    return scratch.source
