"""One rewrite streamed into a document as workspace edits.

The model runs in a worker thread (the editspec core, unchanged); its progress comes back to this coroutine,
which shows it as $/progress and replaces the function's region step by step: the whole lines written so far,
then the rest of the original. Every edit is computed against the document as it is now: an edit elsewhere
moves the region and the rewrite goes on; an edit inside the region stops it and leaves the user's text.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from editspec.locate import Definition, LanguageSpec
from editspec.rewrite import (
    Progress,
    RewriteCancelled,
    Rewriter,
    RewriteResult,
    SourceFile,
    common_indent,
    indent_lines,
    text_edits,
)

from . import positions


class RegionLost(Exception):
    """The user edited inside the region being rewritten."""


@dataclass
class RewriteJob:
    server: LanguageServer
    uri: str
    source: SourceFile  # the document as it was when the rewrite started ("\n" line ends)
    spec: LanguageSpec
    target: Definition
    instruction: str
    crlf: bool
    streaming: bool
    edit_interval: float
    progress_token: str | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    edits_sent: int = 0
    stopped_by_user_edit: bool = False

    def __post_init__(self):
        data = self.source.text.encode("utf-8")
        lf_start = len(data[: self.target.start].decode("utf-8"))
        region = data[self.target.start : self.target.end].decode("utf-8")
        self.original = positions.to_document_newlines(region, self.crlf)  # the region in the document's style
        self.current = self.original  # what the document holds in the region now
        doc_text = self.server.workspace.get_text_document(self.uri).source
        self.start = positions.from_lf_offset(doc_text, lf_start)
        lines = region.splitlines(keepends=True)
        self.indent = common_indent(lines)
        self.original_lines = lines

    # -- the region in the live document ---------------------------------------------------------------

    def _locate(self) -> None:
        """Find the region again; it may have moved (edits above it) or been edited (stop)."""
        text = self.server.workspace.get_text_document(self.uri).source
        if text[self.start : self.start + len(self.current)] == self.current:
            return
        found = _find_all(text, self.current)
        if not found:
            raise RegionLost()
        self.start = min(found, key=lambda i: abs(i - self.start))

    async def _replace_region(self, new: str, label: str | None = None) -> bool:
        """Turn the document's region into `new` with small edits; True when the client applied them."""
        self._locate()
        if new == self.current:
            return True
        doc = self.server.workspace.get_text_document(self.uri)
        edits = [
            types.TextEdit(positions.range_at(doc, e.start, e.end), e.new_text)
            for e in text_edits(self.current, new, self.start)
        ]
        caps = self.server.client_capabilities.workspace
        if caps and caps.workspace_edit and caps.workspace_edit.document_changes:
            edit = types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        types.OptionalVersionedTextDocumentIdentifier(uri=self.uri, version=doc.version), edits
                    )
                ]
            )
        else:
            edit = types.WorkspaceEdit(changes={self.uri: edits})
        result = await self.server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))
        if not result.applied:
            return False
        previous, self.current = self.current, new
        self.edits_sent += 1
        await self._await_document(previous)
        return True

    async def _await_document(self, previous: str, timeout: float = 2.0) -> None:
        """Wait for the client's didChange that follows an applied edit."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.server.workspace.get_text_document(self.uri).source
            if self.current in text and (
                previous not in text or self.current.startswith(previous) or previous == self.current
            ):
                return
            await asyncio.sleep(0.005)

    # -- streaming ---------------------------------------------------------------------------------------

    def _streamed_region(self, code_so_far: str) -> str | None:
        """The whole lines written so far, then the rest of the original region."""
        complete = code_so_far[: code_so_far.rfind("\n") + 1]
        if not complete:
            return None
        written = complete.count("\n")
        rest = "".join(self.original_lines[written:])
        return positions.to_document_newlines(indent_lines(complete, self.indent) + rest, self.crlf)

    def _report(self, message: str, percentage: int | None = None) -> None:
        if self.progress_token is not None:
            self.server.work_done_progress.report(
                self.progress_token, types.WorkDoneProgressReport(message=message, percentage=percentage)
            )

    def _cancel_requested(self) -> bool:
        token = self.progress_token
        futures = self.server.work_done_progress.tokens
        return self.cancelled.is_set() or (token is not None and token in futures and futures[token].cancelled())

    async def run(self, rewriter: Rewriter) -> RewriteResult:
        """Generate and stream; the document ends with the final text, or as it was on cancel or failure."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Progress | None] = asyncio.Queue()

        def on_progress(p: Progress) -> bool:
            loop.call_soon_threadsafe(queue.put_nowait, p)
            return self._cancel_requested()

        work = loop.run_in_executor(
            None, rewriter.rewrite, self.source, self.spec, self.target, self.instruction, on_progress
        )
        work.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, None))
        t_first, last_edit, streamed_lines = None, 0.0, 0
        try:
            while (p := await queue.get()) is not None:
                while not queue.empty():  # keep only the newest progress
                    newer = queue.get_nowait()
                    if newer is None:
                        queue.put_nowait(None)
                        break
                    p = newer
                now = time.monotonic()
                t_first = t_first or now
                rate = (p.tokens - 1) / (now - t_first) if now > t_first else 0.0
                alpha = p.accepted / p.drafted if p.drafted else 0.0
                self._report(f"{p.tokens} tokens · {rate:.0f} tok/s · acceptance {alpha:.0%}")
                lines = p.text.count("\n")
                if (
                    self.streaming
                    and lines > streamed_lines
                    and now - last_edit >= self.edit_interval
                    and not self._cancel_requested()
                ):
                    region = self._streamed_region(p.text)
                    if region is not None:
                        await self._replace_region(region)
                        streamed_lines, last_edit = lines, now
            result = await work
        except RegionLost:
            self.stopped_by_user_edit = True
            self.cancelled.set()
            await _settle(work)
            raise
        except BaseException:
            self.cancelled.set()
            await _settle(work)
            await self._restore()
            raise
        if self._cancel_requested():  # the cancel came after the model finished, before the final edit
            await self._restore()
            raise RewriteCancelled("the rewrite was cancelled")
        problem = result.problem()
        if problem:
            await self._restore()
            raise RewriteRefused(problem, result)
        final = positions.to_document_newlines(result.new_region, self.crlf)
        if not await self._replace_region(final, label="editspec: rewrite"):
            await self._restore()
            raise RewriteCancelled("the editor did not apply the final edit; the function is as it was")
        return result

    async def _restore(self) -> None:
        """Put the function back exactly as it was (unless the user has edited inside it)."""
        try:
            if self.current != self.original:
                await self._replace_region(self.original, label="editspec: restore")
        except RegionLost:
            self.stopped_by_user_edit = True


class RewriteRefused(Exception):
    def __init__(self, problem: str, result: RewriteResult):
        super().__init__(problem)
        self.result = result


async def _settle(work: asyncio.Future) -> None:
    try:
        await work
    except BaseException:
        pass


def _find_all(text: str, part: str) -> list[int]:
    found, i = [], text.find(part)
    while i >= 0:
        found.append(i)
        i = text.find(part, i + 1)
    return found
