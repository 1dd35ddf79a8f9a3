"""`editspec-lsp`: "rewrite this function" as a code action, streamed back as workspace edits.

One small handler per LSP method; the work is done by `editspec` (locating, prompting, decoding) and by
`RewriteJob` (streaming edits into the document).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import logging
import os
import sys
import threading
import uuid
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from editspec import calibration
from editspec.decoding import Decoder, open_decoder
from editspec.locate import Definition, LocateError, byte_offset, definitions, find_at, language_for, parse
from editspec.models import ModelError
from editspec.prefix_cache import keep_prompts
from editspec.rewrite import RewriteCancelled, RewriteError, Rewriter, SourceFile

from . import positions, transport
from .documents import LspWorkspace
from .rewrite_job import EditorSilent, RegionLost, RewriteJob, RewriteRefused
from .settings import Settings, updated

REWRITE = "editspec.rewrite"
CANCEL = "editspec.cancel"
TRACE = "editspec.trace"
log = logging.getLogger("editspec.lsp")
PROGRESS_CREATE_TIMEOUT = 10  # seconds a client may take to answer window/workDoneProgress/create
PARSE_BUDGET = 5.0  # seconds a document may take to parse; longer (generated code, say): no rewrites offered
SHUTDOWN_WAIT = 10.0  # seconds `shutdown` waits for running rewrites to put their functions back


class EditSpecProtocol(LanguageServerProtocol):
    """pygls answers $/cancelRequest for a running command but lets the command run on; tell our job too."""

    def _handle_cancel_notification(self, msg_id):
        job = self._server.jobs_by_request.get(msg_id)
        if job is not None:
            job.cancelled.set()
        super()._handle_cancel_notification(msg_id)

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args):
        """pygls's own cancels pending requests while iterating over them; a cancelled request removes itself
        from that dict ("dictionary changed size during iteration"). Our handler has stopped the rewrites."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown = True
        return None


class EditSpecServer(LanguageServer):
    def __init__(self):
        super().__init__("editspec", "0.1.0", protocol_cls=EditSpecProtocol)
        self.settings = Settings()
        self.jobs: dict[str, RewriteJob] = {}  # by document uri: one rewrite per document
        self.jobs_by_request: dict = {}
        self.starting: set[str] = set()  # documents whose rewrite is being set up (before it is a job)
        self.traces: dict[str, dict] = {}  # the last rewrite's trace per document uri
        self._model: concurrent.futures.Future[Decoder] | None = None
        self._model_key: tuple | None = None
        self._model_lock = threading.Lock()
        # Not pygls's thread pool: its stdio reader runs there, and must not wait behind a model load.
        self._loader = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="editspec-load")
        self.model_busy = asyncio.Lock()  # one model, one context: rewrites in different documents queue
        self.preparing: tuple[int, int] | None = None  # (bytes, of bytes) while a named model is assembled
        self.calibrating: tuple[int, int] | None = None  # (done, of) while this machine's verify costs are measured
        self._read_ahead_key: tuple | None = None
        self._read_ahead_task: asyncio.Task | None = None
        # Parsing runs here, never on the event loop; the last parse of each document is kept by version.
        self._parser = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="editspec-parse")
        self._parsed: dict[str, tuple[tuple, asyncio.Future]] = {}

    async def document_definitions(self, doc, spec) -> tuple[str, list[Definition]]:
        """The document's "\n" text and its definitions, parsed off the event loop (once per version), within
        PARSE_BUDGET seconds (LocateError otherwise)."""
        key = (doc.version, spec.name, len(doc.source))
        kept = self._parsed.get(doc.uri)
        if kept is None or kept[0] != key:
            text = doc.source.replace("\r\n", "\n")
            data = text.encode("utf-8")

            def work():
                return text, definitions(data, spec, parse(data, spec, budget=PARSE_BUDGET))

            kept = (key, asyncio.wrap_future(self._parser.submit(work)))
            self._parsed[doc.uri] = kept
        return await asyncio.shield(kept[1])

    def forget(self, uri: str) -> None:
        self._parsed.pop(uri, None)

    def open_document(self, uri: str):
        """The open document at uri, or None (never one read from disk)."""
        docs = self.workspace.text_documents
        return docs.get(unquote(uri))

    # -- transports: our reader (lsp/transport.py) instead of pygls's --------------------------------------

    def start_io(self, stdin=None, stdout=None) -> int:
        """Serve over stdio until `exit` or the end of input; returns the exit code LSP asks for."""
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        reads = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="editspec-stdin")
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)

        async def serve():
            await transport.serve(transport.stdin_reader(reads), self.protocol, self._stop_event)

        return self._run(loop, serve())

    def start_tcp(self, host: str, port: int) -> int:
        """Serve one client on host:port until it sends `exit` or disconnects."""
        self._stop_event = threading.Event()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)

        async def serve():
            done = loop.create_future()

            async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
                self.protocol.set_writer(writer)
                try:
                    await transport.serve(lambda: reader.read(1 << 16), self.protocol, self._stop_event)
                except BaseException as e:
                    if not done.done():
                        done.set_exception(e)
                    return
                if not done.done():
                    done.set_result(None)

            listener = await asyncio.start_server(connection, host, port)
            async with listener:
                await done

        return self._run(loop, serve())

    def _run(self, loop, main) -> int:
        try:
            loop.run_until_complete(main)
        except SystemExit as e:  # `exit`: 0 after `shutdown`, 1 without
            return e.code if isinstance(e.code, int) else 1
        except BrokenPipeError:
            log.error("the connection to the client is lost")
        except KeyboardInterrupt:
            pass
        return 0 if self.protocol._shutdown else 1

    def decoder(self) -> concurrent.futures.Future[Decoder]:
        """The shared model, loading in the background (once per settings that affect it)."""
        with self._model_lock:
            key = self.settings.model_key
            if self._model is None or self._model_key != key:
                s = self.settings
                self.preparing, self.calibrating = None, None
                self._model = self._loader.submit(
                    open_decoder,
                    s.model,
                    s.draft_model,
                    threads=s.threads,
                    options=s.decode_options(),
                    prefix_cache_mb=s.prefix_cache_mb,
                    gpu_layers=s.gpu_layers,
                    on_prepare=self._on_prepare,
                    on_calibrate=self._on_calibrate,
                )
                self._model_key = key
            return self._model

    async def progress_token(self, token: str) -> str | None:
        """A server-created progress token, or None when the client will not create one (then no progress)."""
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), PROGRESS_CREATE_TIMEOUT)
        except Exception as e:  # an error reply, a malformed one, or none: carry on without progress
            log.warning("the client did not create progress token %s: %s", token, e)
            return None
        return token

    def _on_prepare(self, done: int, total: int) -> None:
        """Called from the loading thread while the model is assembled; the warm start reports it."""
        self.preparing = (done, total)

    def _on_calibrate(self, done: int, total: int) -> None:
        """Called from the loading thread while this machine's verify costs are measured (once per model file)."""
        self.calibrating = (done, total)

    async def loading_message(self, loading: concurrent.futures.Future, report) -> None:
        """Report the model's assembly (the coder model's first use) and the measuring of this machine's verify
        costs (its first run) until loading is done."""
        while not loading.done():
            if self.calibrating is not None:
                done, total = self.calibrating
                report(f"{calibration.MEASURING}: {done * 100 // total}%", done * 100 // total)
            elif self.preparing is not None:
                done, total = self.preparing
                if done < total:
                    report(
                        f"assembling the model from its packages (once): {done * 100 // total}%", done * 100 // total
                    )
                else:
                    report("loading the model", None)
            await asyncio.sleep(0.25)

    def take_settings(self, decoder: Decoder) -> None:
        """The settings that apply to a loaded model as they are now (call holding `model_busy`): the decoding
        options and the memory for kept prompts. Changing them loads nothing."""
        decoder.options = self.settings.decode_options()
        keep_prompts(decoder.backend, self.settings.prefix_cache_mb << 20)

    def read_ahead(self, uri: str, version, source: SourceFile, spec, target) -> None:
        """While the user types an instruction, read the part of the prompt that does not depend on it (system
        prompt, file context, the function), so the rewrite reads little more than the instruction. Only when
        the model is loaded and idle, once per function and document version; never in a rewrite's way."""
        key = (uri, version, target.start, target.end)
        model = self._model
        if (
            not self.settings.read_ahead
            or key == self._read_ahead_key
            or model is None
            or not model.done()
            or model.exception() is not None
            or self.model_busy.locked()
            or self.jobs
        ):
            return
        self._read_ahead_key = key
        rewriter = Rewriter(model.result(), self.settings.context_tokens)

        async def run():
            async with self.model_busy:
                self.take_settings(rewriter.decoder)
                loop = asyncio.get_running_loop()
                try:
                    read = await loop.run_in_executor(None, rewriter.read_ahead, source, spec, target)
                    log.info("read ahead %d prompt tokens for %s", read, target.name)
                except Exception as e:  # only a head start: the rewrite itself will say what is wrong
                    log.warning("reading ahead for %s failed: %s", target.name, e)

        self._read_ahead_task = asyncio.ensure_future(run())

    def show(self, message: str, kind=types.MessageType.Error) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"editspec: {message}"))


server = EditSpecServer()


@server.feature(types.INITIALIZE)
def initialize(ls: EditSpecServer, params: types.InitializeParams) -> None:
    # Documents that split lines as LSP does, and tell a running rewrite of each change (lsp/documents.py).
    ws = ls.protocol._workspace
    ls.protocol._workspace = LspWorkspace(ws.root_uri, ws._sync_kind, list(ws.folders.values()), ws.position_encoding)
    try:
        ls.settings = updated(ls.settings, params.initialization_options)
    except ValueError as e:
        ls.show(f"{e}; using the defaults")


@server.feature(types.INITIALIZED)
async def initialized(ls: EditSpecServer, params: types.InitializedParams) -> None:
    """Warm start: the model loads while the user reads their code, with progress saying when it is ready."""
    if not ls.settings.preload:
        return
    loading = ls.decoder()
    window = ls.client_capabilities.window
    if not (window and window.work_done_progress):
        return
    token = await ls.progress_token(f"editspec-load-{uuid.uuid4()}")
    if token is None:
        return
    ls.work_done_progress.begin(
        token, types.WorkDoneProgressBegin(title="editspec", message="loading the model", percentage=0)
    )

    def report(message: str, percentage: int | None) -> None:
        ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=message, percentage=percentage))

    watcher = asyncio.ensure_future(ls.loading_message(loading, report))
    try:
        decoder = await asyncio.wrap_future(loading)
        message = f"ready: {decoder.backend.path.name}"
    except Exception as e:  # reported again, with the reason, when a rewrite asks for the model
        message = f"the model could not be loaded: {e}"
    await watcher
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))


@server.feature(types.SHUTDOWN)
async def shutdown(ls: EditSpecServer, params) -> None:
    """Stop every rewrite and let each put its function back before answering: after the answer, no edit."""
    for job in list(ls.jobs.values()):
        job.cancelled.set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SHUTDOWN_WAIT
    while (ls.jobs or ls.starting) and loop.time() < deadline:
        await asyncio.sleep(0.02)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: EditSpecServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.forget(params.text_document.uri)


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: EditSpecServer, params: types.DidChangeConfigurationParams) -> None:
    try:
        ls.settings = updated(ls.settings, params.settings)
    except ValueError as e:
        ls.show(str(e))


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite], resolve_provider=False),
)
async def code_action(ls: EditSpecServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    """Offer rewrites where the cursor or selection is inside a function. No model work: milliseconds (the
    parse runs off the event loop, once per document version)."""
    only = params.context.only
    if only and not any(types.CodeActionKind.RefactorRewrite.value.startswith(k) for k in only):
        return None
    doc = ls.open_document(params.text_document.uri)
    if doc is None:
        return None  # only open documents: an unopened one would be read from disk (a FIFO would block)
    try:
        spec = language_for(doc.path or doc.uri)
        offset = positions.to_lf_offset(doc.source, positions.offset_at(doc, params.range.start))
        text, defs = await ls.document_definitions(doc, spec)
        target = find_at(defs, byte_offset(text, offset))
    except (LocateError, positions.OutsideDocument):
        return None  # not a language we edit, a position outside, not inside a function, or too slow to parse
    with contextlib.suppress(RewriteError):
        ls.read_ahead(doc.uri, doc.version, SourceFile.from_bytes(text.encode("utf-8")), spec, target)
    where = {"uri": doc.uri, "position": {"line": params.range.start.line, "character": params.range.start.character}}
    actions = [
        types.CodeAction(
            title=f"Rewrite {target.name}… (editspec)",
            kind=types.CodeActionKind.RefactorRewrite,
            command=types.Command(title="Rewrite function…", command=REWRITE, arguments=[where]),
        )
    ]
    for preset in ls.settings.presets:
        actions.append(
            types.CodeAction(
                title=f"editspec: {preset} ({target.name})",
                kind=types.CodeActionKind.RefactorRewrite,
                command=types.Command(title=preset, command=REWRITE, arguments=[dict(where, instruction=preset)]),
            )
        )
    return actions


def _parse_rewrite_args(args: tuple) -> dict:
    if len(args) != 1 or not isinstance(args[0], dict):
        raise JsonRpcInvalidParams(f"{REWRITE} takes one object: {{uri, position or range, instruction}}")
    a = args[0]
    if not isinstance(a.get("uri"), str):
        raise JsonRpcInvalidParams(f"{REWRITE}: 'uri' (a string) is required")
    where = a.get("position") or (a.get("range") or {}).get("start")
    if not isinstance(where, dict) or not all(isinstance(where.get(k), int) for k in ("line", "character")):
        raise JsonRpcInvalidParams(f"{REWRITE}: 'position' {{line, character}} or 'range' is required")
    instruction = a.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise JsonRpcInvalidParams(f"{REWRITE}: 'instruction' is empty: say what to change")
    token = a.get("workDoneToken")
    if token is not None and not isinstance(token, (str, int)):
        raise JsonRpcInvalidParams(f"{REWRITE}: 'workDoneToken' must be a string or number")
    return {
        "uri": a["uri"],
        "position": types.Position(where["line"], where["character"]),
        "instruction": instruction,
        "token": token,
    }


async def _start_job(ls: EditSpecServer, a: dict) -> RewriteJob:
    """The job for a rewrite request: the function found in the document as it is when the job starts
    following its changes (a parse off the event loop may see the user type; then it parses again)."""
    uri = a["uri"]
    token = a["token"]
    if token is None and ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress:
        token = await ls.progress_token(str(uuid.uuid4()))
    for _ in range(5):
        doc = ls.open_document(uri)
        if doc is None:
            raise JsonRpcInvalidParams(f"{uri} was closed")
        version, text = doc.version, doc.source
        try:
            spec = language_for(doc.path or uri)
            source = SourceFile.from_bytes(text.encode("utf-8"))
            offset = positions.to_lf_offset(text, positions.offset_at(doc, a["position"]))
            lf_text, defs = await ls.document_definitions(doc, spec)
            target = find_at(defs, byte_offset(source.text, offset))
        except (LocateError, RewriteError, positions.OutsideDocument) as e:
            raise JsonRpcInvalidParams(str(e)) from None
        doc = ls.open_document(uri)
        if doc is not None and doc.version == version and doc.source == text and lf_text == source.text:
            return RewriteJob(
                ls,
                uri,
                source,
                spec,
                target,
                a["instruction"],
                streaming=ls.settings.streaming == "edits",
                edit_interval=ls.settings.edit_interval_ms / 1000,
                progress_token=token,
                apply_timeout=ls.settings.apply_edit_timeout_ms / 1000,
            )
    raise JsonRpcInvalidParams("the document keeps changing: try again when you stop typing")


@server.command(REWRITE)
async def rewrite(ls: EditSpecServer, *args) -> dict:
    """Rewrite the function at a position and stream it into the document."""
    a = _parse_rewrite_args(args)
    uri = a["uri"]
    caps = ls.client_capabilities.workspace
    if not (caps and caps.apply_edit):
        raise JsonRpcInvalidParams(
            "this editor cannot apply workspace edits (workspace/applyEdit), which editspec needs to write the rewrite"
        )
    if uri in ls.jobs or uri in ls.starting:
        raise JsonRpcInvalidParams("a rewrite is already running in this document: wait for it or cancel it")
    if ls.open_document(uri) is None:
        raise JsonRpcInvalidParams(f"unknown document {uri}: open it in the editor first")
    request_id = ls.protocol.msg_id
    ls.starting.add(uri)  # from here on, a second rewrite of this document is refused
    try:
        job = await _start_job(ls, a)
    finally:
        ls.starting.discard(uri)
    ls.jobs[uri] = job
    ls.jobs_by_request[request_id] = job
    token, target = job.progress_token, job.target
    if token is not None:
        ls.work_done_progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title=f"editspec: {target.name}", message="loading the model", cancellable=True
            ),
        )
    summary = "cancelled"
    try:
        decoder = await asyncio.wrap_future(ls.decoder())
        async with ls.model_busy:
            ls.take_settings(decoder)
            job._report("reading the prompt")
            result = await job.run(Rewriter(decoder, ls.settings.context_tokens, second_look=ls.settings.second_look))
        ls.traces[uri] = {"trace": result.trace, "title": f"editspec: {target.name} — {a['instruction']}"}
        s = result.stats
        summary = (
            f"{s.generated_tokens} tokens · {s.decode_tokens_per_second:.0f} tok/s · "
            f"acceptance {s.acceptance_rate:.0%} · {s.tokens_per_pass:.2f} tokens/pass · "
            f"prompt: read {s.prompt_tokens - s.reused_prompt_tokens} of {s.prompt_tokens} tokens"
        )
        if result.second_look:
            summary += " · a second look: the first answer was the function unchanged"
            ls.show(
                result.second_look_note("undo puts it back; the setting secondLook: false keeps the first answer"),
                types.MessageType.Info,
            )
        elif result.unchanged_note():
            ls.show(result.unchanged_note(), types.MessageType.Info)
        for warning in result.warnings():
            ls.show(warning, types.MessageType.Warning)
        return {
            "applied": True,
            "changed": result.changed,
            "edits": job.edits_sent,
            "target": target.name,
            "second_look": bool(result.second_look),
            "undefined_names": result.undefined_names,
            "early_names": result.early_names,
            "bad_calls": result.bad_calls,
            "parameter_changes": result.parameter_changes,
            "async_change": result.async_change,
            "async_calls": result.async_calls,
            "generator_change": result.generator_change,
            "generator_uses": result.generator_uses,
            "property_change": result.property_change,
            "property_uses": result.property_uses,
            "loose_code": result.loose_code,
            "missing_imports": result.missing_imports,
            "imports_left_out": result.imports_left_out,
            "unhoisted": result.unhoisted,
            "early_uses": result.early_uses,
            "arrow_misuses": result.arrow_misuses,
            "renamed_to": result.renamed_to or None,
            "renamed_uses": result.renamed_uses,
            "stats": s.summary(),
        }
    except EditorSilent as e:
        summary = f"stopped: {e}"
        ls.show(f"rewrite stopped: {e}; check the function (undo puts it back)", types.MessageType.Warning)
        return {"applied": False, "reason": "editor", "message": str(e)}
    except (RegionLost, RewriteCancelled) as e:
        if job.closed:  # closing the document cancels its rewrite, whichever way the job noticed first
            summary = "cancelled: the document was closed"
            return {"applied": False, "reason": "cancelled", "message": "the document was closed during the rewrite"}
        if isinstance(e, RewriteCancelled):
            summary = "cancelled; the function is as it was"
            return {"applied": False, "reason": "cancelled", "message": str(e)}
        summary = "stopped: the function was edited meanwhile"
        ls.show("rewrite stopped: you edited the function while it was being rewritten", types.MessageType.Warning)
        return {"applied": False, "reason": "edited"}
    except RewriteRefused as e:
        summary = f"not applied: {e}"
        ls.show(f"not applied: {e}", types.MessageType.Warning)
        return {"applied": False, "reason": "refused", "message": str(e)}
    except ModelError as e:
        summary = "the model could not be loaded"
        ls.show(str(e))
        raise JsonRpcInternalError(str(e)) from None
    except (RewriteError, ValueError) as e:
        summary = str(e)
        ls.show(str(e))
        raise JsonRpcInternalError(str(e)) from None
    except JsonRpcException:
        raise
    except Exception as e:
        summary = f"failed: {e}"
        log.exception("rewrite failed")
        ls.show(f"rewrite failed: {e}")
        raise JsonRpcInternalError(f"rewrite failed: {e}") from None
    finally:
        job.close()
        ls.jobs.pop(uri, None)
        ls.jobs_by_request.pop(request_id, None)
        if token is not None:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=summary))


@server.command(CANCEL)
def cancel(ls: EditSpecServer, *args) -> dict:
    """Stop the rewrite running in a document (or all rewrites); the function goes back as it was."""
    if len(args) > 1 or (args and not isinstance(args[0], str)):
        raise JsonRpcInvalidParams(f"{CANCEL} takes a document's uri, or nothing to cancel every rewrite")
    uris = list(args) if args else list(ls.jobs)
    for uri in uris:
        job = ls.jobs.get(uri)
        if job is not None:
            job.cancelled.set()
    return {"cancelled": [u for u in uris if u in ls.jobs]}


@server.command(TRACE)
def trace(ls: EditSpecServer, *args) -> dict:
    """The last rewrite's trace in a document, as data and as a self-contained HTML page."""
    from editspec.trace import render_html

    uri = args[0] if args and isinstance(args[0], str) else None
    if uri is None:
        raise JsonRpcInvalidParams(f"{TRACE} takes the document's uri")
    kept = ls.traces.get(uri)
    if kept is None:
        raise JsonRpcInvalidParams("no rewrite has finished in this document yet")
    return {"html": render_html(kept["trace"], kept["title"]), "trace": kept["trace"]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="editspec-lsp", description="editspec language server (stdio by default)")
    parser.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT instead of stdio")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper())
    code = server.start_tcp("127.0.0.1", args.tcp) if args.tcp else server.start_io()
    with contextlib.suppress(Exception):  # `exit` has closed stdout
        sys.stdout.flush()
    # Not sys.exit: that would wait for a model thread still decoding a rewrite nobody will see.
    os._exit(code)


if __name__ == "__main__":
    main()
