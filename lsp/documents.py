"""Open documents as LSP sees them, and the changes made to them.

pygls splits a document into lines with `str.splitlines()`, which also breaks at form feed, `\\v`,
`\\x1c`-`\\x1e`, `\\x85`, U+2028 and U+2029; LSP breaks lines only at "\\n", "\\r\\n" and "\\r". A document with
such a character would have every position after it off by a line (in our edits and in the client's
incremental changes alike), so documents here split lines as LSP does. Every change to an open document is
also told to whoever watches it (a running rewrite tracks its region through them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from urllib.parse import unquote

from pygls.workspace import TextDocument, Workspace

LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def lsp_lines(text: str) -> list[str]:
    """The document's lines with their ends, split where LSP splits them: "\\n", "\\r\\n" and "\\r" only."""
    return LINE.findall(text)


class LspTextDocument(TextDocument):
    @property
    def lines(self) -> Sequence[str]:
        return tuple(lsp_lines(self.source))

    @property
    def source(self) -> str:
        # An open document's text only: pygls would read an unopened document from disk here, on the event
        # loop (a FIFO blocks it for good); editspec works on open documents only.
        return self._source or ""


# Called as watcher(old_text, new_text) after each change to an open document; watcher(None, None) when it
# is closed.
Watcher = Callable[[str | None, str | None], None]


class LspWorkspace(Workspace):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.watchers: dict[str, Watcher] = {}

    def _create_text_document(self, doc_uri, source=None, version=None, language_id=None) -> TextDocument:
        return LspTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )

    def update_text_document(self, text_doc, change) -> None:
        doc = self.text_documents.get(unquote(text_doc.uri))
        if doc is None:
            raise ValueError(f"a change to {text_doc.uri}, which is not open")
        old = doc.source
        super().update_text_document(text_doc, change)
        watcher = self.watchers.get(text_doc.uri)
        if watcher is not None:
            watcher(old, doc.source)

    def remove_text_document(self, doc_uri: str) -> None:
        super().remove_text_document(doc_uri)
        watcher = self.watchers.get(doc_uri)
        if watcher is not None:
            watcher(None, None)
