"""The `editspec` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .models import DRAFT_MODEL_ENV, MODEL_ENV, ModelError

# Exit codes, documented in README.
EXIT_USAGE = 2
EXIT_INPUT = 3  # bad input file or arguments that name nothing
EXIT_MODEL = 4  # the model cannot be found or loaded

err = Console(stderr=True)


def fail(message: str, code: int) -> None:
    err.print(f"[bold red]editspec:[/] {message}", highlight=False)
    sys.exit(code)


model_option = click.option(
    "--model",
    envvar=MODEL_ENV,
    default=None,
    metavar="GGUF",
    help=f"target model (default: bundled SmolLM2-135M-Instruct; env {MODEL_ENV})",
)
draft_model_option = click.option(
    "--draft-model",
    envvar=DRAFT_MODEL_ENV,
    default=None,
    metavar="GGUF",
    help=f"a smaller model with the same vocabulary (env {DRAFT_MODEL_ENV})",
)
threads_option = click.option(
    "--threads", type=click.IntRange(1), default=None, help="CPU threads (default: all cores)"
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="editspec")
def main() -> None:
    """Fast local code edits with prompt-lookup speculative decoding."""


@main.command()
@model_option
@draft_model_option
@threads_option
@click.option("--data", default=None, metavar="JSONL", help="CanItEdit jsonl (default: ../shared/bench)")
@click.option("--limit", type=click.IntRange(1), default=12, show_default=True, help="CanItEdit cases")
@click.option("--methods", default=None, help="comma-separated subset of methods")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="write every measurement here",
)
def bench(model, draft_model, threads, data, limit, methods, json_path) -> None:
    """Compare decoding methods side by side (decode-only speed, prefill reported apart)."""
    from .bench import METHODS, run_benchmark

    chosen = tuple(m.strip() for m in methods.split(",")) if methods else METHODS
    try:
        result = run_benchmark(
            model=model,
            draft_model=draft_model,
            data=data,
            limit=limit,
            threads=threads,
            methods=chosen,
            progress=lambda m: err.print(m, highlight=False),
        )
    except ModelError as e:
        fail(str(e), EXIT_MODEL)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e), EXIT_INPUT)
    print_bench(result, chosen)
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1))
        err.print(f"wrote {json_path}")


def print_bench(result: dict, methods) -> None:
    out = Console()
    table = Table(
        title=f"{len(result['cases'])} CanItEdit cases, {result['machine']['threads']} threads "
        "(medians; decode-only speed)"
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
            f"{s['median_speedup_vs_plain']:.2f}x",
            f"{story:.2f}x" if story is not None else "-",
            f"{s['median_prefill_seconds']:.2f}",
            f"{s['same_as_plain']}/{s['cases']}",
        )
    out.print(table)
    out.print(f"This machine's limit (one decode step / best per-token verify cost): {result['limit']:.2f}x")
