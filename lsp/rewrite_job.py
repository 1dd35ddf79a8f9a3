"""One rewrite streamed into a document as workspace edits.

The model runs in a worker thread (the editspec core, unchanged); its progress comes back to this coroutine,
which shows it as $/progress and replaces the function's region step by step: the whole lines written so far,
then the rest of the original. Every edit is computed against the document as it is now: an edit elsewhere
moves the region and the rewrite goes on; an edit inside the region stops it and leaves the user's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from editspec.locate import Definition, LanguageSpec, import_insertion, parse
from editspec.rewrite import (
    Progress,
    RewriteCancelled,
    Rewriter,
    RewriteResult,
    SourceFile,
    common_indent,
    dedent,
    indent_lines,
    indented_as_shown,
    lf_lines,
    open_string_row,
)

from . import positions


class RegionLost(Exception):
    """The user edited inside the region being rewritten."""


log = logging.getLogger("editspec.lsp")


@dataclass
class RewriteJob:
    server: LanguageServer
    uri: str
    source: SourceFile  # the document as it was when the rewrite started ("\n" line ends)
    spec: LanguageSpec
    target: Definition
    instruction: str
    streaming: bool
    edit_interval: float
    progress_token: str | None = None
    apply_timeout: float = 10.0  # seconds the editor may take to answer workspace/applyEdit
    cancelled: threading.Event = field(default_factory=threading.Event)
    edits_sent: int = 0
    stopped_by_user_edit: bool = False

    def __post_init__(self):
        doc_text = self.server.workspace.get_text_document(self.uri).source
        data = self.source.text.encode("utf-8")
        lf_start = len(data[: self.target.start].decode("utf-8"))
        lf_end = lf_start + len(data[self.target.start : self.target.end].decode("utf-8"))
        self.start = positions.from_lf_offset(doc_text, lf_start)
        # The region as the document holds it, its own line ends included (a file may mix them).
        self.original = doc_text[self.start : positions.from_lf_offset(doc_text, lf_end)]
        self.current = self.original  # what the document holds in the region now
        self.newline = positions.region_newline(self.original)
        self.original_lines = positions.split_lines(self.original)
        self.indent = common_indent(positions.split_lines(self.original.replace("\r\n", "\n")))
        self.shown = dedent(self.original.replace("\r\n", "\n"), self.indent)  # the code as the model sees it
        self.lost = False  # the user edited inside the region: stop, keep their text
        self.closed = False  # the document was closed: the rewrite is cancelled (and the region lost)
        self.pending: str | None = None  # the region our edit in flight will make
        self.sent: tuple[list[types.TextEdit], str] | None = None  # its edits, and the document they were made on
        self.head = ""  # imports the final edit puts at the region's start (once widened to the document's imports)
        self.stale: tuple[str, str] | None = None  # (before, after): the editor applied our edit out of date
        self.repairing: str | None = None  # the document our repair of a stale edit will make
        self.changed = asyncio.Event()
        self.server.workspace.watchers[self.uri] = self.document_changed

    def close(self) -> None:
        if self.server.workspace.watchers.get(self.uri) == self.document_changed:
            del self.server.workspace.watchers[self.uri]

    # -- the region in the live document ---------------------------------------------------------------

    def document_changed(self, old: str | None, new: str | None) -> None:
        """Follow the region through a change to the document (never by searching for its text: a copy of
        the function elsewhere would be taken for it). None, None: the document was closed."""
        self.changed.set()
        if old is None or new is None:
            self.lost = self.closed = True
            self.cancelled.set()
            return
        if self.lost or old == new:
            return
        end = self.start + len(self.current)
        if self.repairing is not None:
            if new == self.repairing:
                self.repairing = None
            else:
                self.lost = True
            return
        if self.pending is not None:
            if new == old[: self.start] + self.pending + old[end:]:  # our edit
                self.current, self.pending = self.pending, None
                return
            if self._is_stale_application(old, new):
                self.stale = (old, new)
                return
        a, old_b, new_b = positions.changed_span(old, new)
        if old_b <= self.start:
            self.start += len(new) - len(old)  # before the region (an insertion at its start included)
        elif a >= end:
            pass  # after it
        else:
            self.lost = True

    def _is_stale_application(self, old: str, new: str) -> bool:
        """Without versioned edits, an editor applies our edit to whatever it holds: if the user typed
        meanwhile, at the wrong place. Recognise that (the edit applied to `old` gives `new`) to undo it."""
        if self.sent is None or self.sent[1] == old:
            return False
        doc = self.server.workspace.get_text_document(self.uri)
        try:
            return positions.apply_edits(doc, old, self.sent[0]) == new
        except positions.OutsideDocument:
            return False

    def _applied_to_no_effect(self, edits: list[types.TextEdit], sent_on: str) -> bool:
        """The editor says it applied our edit, but the document changed otherwise since we sent it, and our
        edit applied to it now changes nothing: it was applied out of date (no versions), to no effect."""
        doc = self.server.workspace.get_text_document(self.uri)
        if doc.source == sent_on:
            return False
        try:
            return positions.apply_edits(doc, doc.source, edits) == doc.source
        except positions.OutsideDocument:
            return False

    def _check(self) -> None:
        if self.lost:
            raise RegionLost()

    async def _wait_for_change(self, timeout: float) -> None:
        self.changed.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout)

    async def _apply(self, edits: list[types.TextEdit], label: str | None) -> bool:
        """Send one workspace edit; True only for a well-formed "applied" answer. An editor that does not answer in
        time is taken not to have applied it (and is never waited on for good)."""
        doc = self.server.workspace.get_text_document(self.uri)
        caps = self.server.client_capabilities.workspace
        if caps and caps.workspace_edit and caps.workspace_edit.document_changes:
            where = types.OptionalVersionedTextDocumentIdentifier(uri=self.uri, version=doc.version)
            change = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(where, edits)])
        else:
            change = types.WorkspaceEdit(changes={self.uri: edits})
        request = self.server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=change, label=label))
        try:
            result = await asyncio.wait_for(request, self.apply_timeout)
        except asyncio.TimeoutError:
            raise EditorSilent(
                f"the editor did not answer workspace/applyEdit within {self.apply_timeout:g} s"
            ) from None
        except Exception as e:  # an error reply, or a malformed one: not applied
            log.warning("workspace/applyEdit failed: %s", e)
            return False
        return isinstance(result, types.ApplyWorkspaceEditResult) and result.applied is True

    def _edits(self, doc, new: str) -> list[types.TextEdit]:
        """The edits that turn the region into `new`: where it changes, and apart from that the imports at the
        region's start (`head`, once widened to them), so that the text between is never written over with itself."""
        old_head = self.head if self.head and self.current.startswith(self.head) else ""
        new_head = self.head if self.head and new.startswith(self.head) else ""
        edits = []
        if old_head != new_head:
            edits.append(types.TextEdit(positions.range_at(doc, self.start, self.start + len(old_head)), new_head))
        at, rest = self.start + len(old_head), new[len(new_head) :]
        a, old_b, new_b = positions.changed_span(self.current[len(old_head) :], rest)
        if old_b > a or new_b > a:
            edits.append(types.TextEdit(positions.range_at(doc, at + a, at + old_b), rest[a:new_b]))
        return edits

    async def _replace_region(self, new: str, label: str | None = None, attempts: int = 1) -> bool:
        """Turn the document's region into `new` with one workspace edit; True when the editor applied it and the
        document has it. An edit refused because the document moved on is computed again (`attempts`)."""
        for _ in range(attempts):
            self._check()
            if new == self.current:
                return True
            doc = self.server.workspace.get_text_document(self.uri)
            edits = self._edits(doc, new)
            doc_text = doc.source
            self.pending, self.sent, self.stale = new, (edits, doc_text), None
            try:
                applied = await self._apply(edits, label)
                deadline = time.monotonic() + self.apply_timeout
                while applied and self.pending is not None and self.stale is None and not self.lost:
                    if self._applied_to_no_effect(edits, doc_text):
                        applied = False  # out of date, where it changed nothing: compute it again
                        break
                    if time.monotonic() > deadline:  # applied, says the editor, but the document never showed it
                        raise EditorSilent("the editor applied an edit but never sent the changed document")
                    await self._wait_for_change(min(0.2, deadline - time.monotonic()))
            finally:
                self.pending, self.sent = None, None
            if self.stale is not None:
                await self._repair()
                continue
            self._check()
            if applied:
                self.edits_sent += 1
                return True
        return False

    async def _repair(self) -> None:
        """Undo our edit that the editor applied out of date: the document goes back to what it was before."""
        before, after = self.stale
        self.stale = None
        doc = self.server.workspace.get_text_document(self.uri)
        if doc.source != after:
            self.lost = True
            raise RegionLost()
        a, old_b, new_b = positions.changed_span(after, before)
        edit = types.TextEdit(positions.range_at(doc, a, old_b), before[a:new_b])
        self.repairing = before
        log.warning("the editor applied an edit to a document it had changed meanwhile; undoing it")
        applied = await self._apply([edit], "editspec: undo an out-of-date edit")
        deadline = time.monotonic() + self.apply_timeout
        while applied and self.repairing is not None and not self.lost and time.monotonic() < deadline:
            await self._wait_for_change(deadline - time.monotonic())
        if not applied or self.repairing is not None:
            self.repairing, self.lost = None, True
            raise RegionLost()

    # -- streaming ---------------------------------------------------------------------------------------

    def _streamed_region(self, code_so_far: str) -> str | None:
        """The whole lines written so far, then the rest of the original region. Indented as the final result will
        be; where that changes the answer's indentation, the lines after a string left open wait for it to close
        (whether they are the string's own text, kept as written, cannot be told before)."""
        complete = code_so_far[: code_so_far.rfind("\n") + 1]
        indented = indented_as_shown(self.shown, complete, self.spec)
        if indented != complete:
            row = open_string_row(complete, self.spec)
            if row is not None:
                complete = "".join(lf_lines(complete)[: row + 1])
                indented = indented_as_shown(self.shown, complete, self.spec)
        if not complete:
            return None
        rest = "".join(self.original_lines[complete.count("\n") :])
        return positions.with_newline(indent_lines(indented, self.indent), self.newline) + rest

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
        final = positions.with_newline(result.new_region, self.newline)
        if result.imports:
            final = self._widen_to_imports(result.imports) + final
        if not await self._replace_region(final, label="editspec: rewrite", attempts=3):
            await self._restore()
            raise RewriteCancelled("the editor did not apply the final edit; the function is as it was")
        return result

    def _widen_to_imports(self, imports: list[str]) -> str:
        """The answer's new imports go where the document's imports are (as `editspec rewrite` puts them): the
        region grows up to that line, so that one workspace edit writes them and the function at once (two text
        edits: the text between is left alone), and a restore takes both back. Returns what the region's new text
        starts with: the imports, then the text between."""
        doc_text = self.server.workspace.get_text_document(self.uri).source
        lf = doc_text.replace("\r\n", "\n").encode("utf-8")
        before = len(doc_text[: self.start].replace("\r\n", "\n").encode("utf-8"))
        at, block = import_insertion(lf, parse(lf, self.spec), self.spec, before, imports)
        start = positions.from_lf_offset(doc_text, len(lf[: min(at, before)].decode("utf-8")))
        between = doc_text[start : self.start]
        self.start, self.original, self.current = start, between + self.original, between + self.current
        self.head = positions.with_newline(block, self.newline)
        return self.head + between

    async def _restore(self) -> None:
        """Put the function back exactly as it was (unless the user has edited inside it)."""
        try:
            if self.current != self.original and not await self._replace_region(
                self.original, label="editspec: restore", attempts=3
            ):
                raise EditorSilent("the editor did not apply the edit putting the function back")
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


class EditorSilent(Exception):
    """The editor did not answer, or never showed the edit it said it applied: the document may hold a
    half-written function, and only the user can see it."""
