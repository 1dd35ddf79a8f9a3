"""See the speculation: a per-token, per-round trace of one rewrite, and a self-contained HTML page of it.

`build_trace` turns the engine's statistics into plain data (saved in `--json` results); `render_html` draws
it: the generated text with every token marked by origin (copied from the source, drafted by the draft
model, or the target's own), the rounds as a timeline with rejected draft tails struck through, the figures
(α, tokens per pass, measured speed-up beside the formula's prediction) and an inline SVG chart. No network,
no external scripts or fonts.
"""

from __future__ import annotations

import codecs
import html
import json
from collections.abc import Sequence

from .engine import Stats
from .policy import request_speedups


def _texts(backend, tokens: Sequence[int]) -> list[str]:
    """Each token's text; a character split across tokens belongs to the token that completes it."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return [decoder.decode(backend.token_bytes(t)) for t in tokens]


def _source_line(prompt_text: str, offsets: list[int], position: int, length: int) -> dict:
    """The prompt lines a copy came from (position and length in tokens)."""
    start = offsets[position]
    end = offsets[min(position + max(length, 1), len(offsets) - 1)]
    line_start = prompt_text.rfind("\n", 0, start) + 1
    line_end = prompt_text.find("\n", end)
    return {
        "offset": start,
        "text": prompt_text[line_start : line_end if line_end >= 0 else len(prompt_text)],
        "line": prompt_text.count("\n", 0, start) + 1,
    }


def build_trace(backend, prompt: Sequence[int], output: Sequence[int], stats: Stats) -> dict:
    texts = _texts(backend, output)
    prompt_texts = _texts(backend, prompt)
    offsets = [0]
    for t in prompt_texts:
        offsets.append(offsets[-1] + len(t))
    prompt_text = "".join(prompt_texts)

    tokens = []
    rounds = []
    i = 0
    if output and not (stats.rounds and stats.rounds[0].opening):
        tokens.append({"text": texts[0], "origin": "target", "round": -1})
        i = 1
    for n, r in enumerate(stats.rounds):
        if i >= len(output):
            break
        origin = {"lookup": "copied", "model": "drafted"}.get(r.origin or "", "target")
        source = None
        if r.origin == "lookup" and r.copied_from is not None:
            if r.copied_from < len(prompt):
                source = _source_line(prompt_text, offsets, r.copied_from, len(r.drafted))
            else:
                source = {"offset": None, "line": None, "text": "(copied from the output written so far)"}
        drafted_texts = _texts(backend, r.drafted)
        for j in range(r.accepted + 1):
            if i >= len(output):
                break
            kind = origin if j < r.accepted else "target"
            tokens.append({"text": texts[i], "origin": kind, "round": n})
            i += 1
        rounds.append(
            {
                "drafted": len(r.drafted),
                "accepted": r.accepted,
                "origin": origin if r.drafted else None,
                "accepted_text": "".join(drafted_texts[: r.accepted]),
                "rejected_text": "".join(drafted_texts[r.accepted :]),
                "target_text": backend.detokenize([r.next_token]),
                "seconds": r.seconds,
                "source": source,
                "opening": r.opening,
            }
        )
    alpha = stats.acceptance_rate
    decode_rounds = [r for r in rounds if not r["opening"]]
    mean_draft = sum(r["drafted"] for r in decode_rounds) / len(decode_rounds) if decode_rounds else 0.0
    figures = {
        "acceptance_rate": alpha,
        "tokens_per_pass": stats.tokens_per_pass,
        "mean_draft_length": mean_draft,
        "generated_tokens": stats.generated_tokens,
        "target_passes": stats.target_passes,
        "prefill_seconds": stats.prefill_seconds,
        "decode_seconds": stats.decode_seconds,
    }
    speedups = request_speedups(stats)  # the statistics line's figures
    if speedups:
        figures["measured_speedup"], figures["predicted_speedup"] = speedups
    return {"tokens": tokens, "rounds": rounds, "figures": figures, "output": "".join(texts)}


def forked_trace(
    backend, prompt: Sequence[int], forced: Sequence[int], output: Sequence[int], stats: Stats, origins: Sequence[str]
) -> dict:
    """The trace of an answer the model was made to start from `forced` tokens after the prompt (a second look's
    fork, see `Rewriter._look_again`: the first answer's tokens up to the fork, then the one put in its place; or
    a function's own header, `Rewriter._from_own_header`), with those tokens in front. Its rounds are its own."""
    trace = build_trace(backend, [*prompt, *forced], output, stats)
    texts = _texts(backend, forced)
    head = [{"text": t, "origin": o, "round": -1} for t, o in zip(texts, origins, strict=False)]
    return {**trace, "tokens": head + trace["tokens"], "output": "".join(texts) + trace["output"]}


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
pre.code{background:#fff;border:1px solid #ddd;padding:12px;white-space:pre-wrap;font:13px/1.5 monospace}
span.tok{border-radius:2px}
.copied{background:#c8f0c8}.drafted{background:#c8e0ff}.target{background:#ffe3a8}
span.tok:hover,span.tok.sel{outline:2px solid #333}
.legend span{padding:2px 8px;margin-right:8px}
table{border-collapse:collapse;font:12px monospace}td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top}
del{color:#b00}.fig{display:inline-block;margin:0 18px 8px 0}.fig b{display:block;font-size:18px}
#source{background:#fff;border:1px dashed #999;padding:8px;font:12px monospace;white-space:pre-wrap;min-height:1.5em}
"""

SCRIPT = """
document.querySelectorAll('span.tok').forEach(function (el) {
  el.addEventListener('click', function () {
    document.querySelectorAll('span.tok.sel').forEach(function (s) { s.classList.remove('sel'); });
    el.classList.add('sel');
    var src = el.getAttribute('data-source');
    document.getElementById('source').textContent = src ? src : 'This token was written by the model itself.';
  });
});
"""


def _chart(rounds: list[dict]) -> str:
    """Drafted (light) and accepted (dark) tokens per round, as bars."""
    if not rounds:
        return "<p>No rounds: the answer came from the prefill alone.</p>"
    width, height = max(300, 6 * len(rounds)), 140
    top = max(max(r["drafted"] for r in rounds), 1)
    bar = width / len(rounds)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 20}" role="img" '
        f'aria-label="accepted draft length per round">'
    ]
    for i, r in enumerate(rounds):
        x = i * bar
        h_draft = height * r["drafted"] / top
        h_acc = height * r["accepted"] / top
        parts.append(
            f'<rect x="{x:.1f}" y="{height - h_draft:.1f}" width="{max(bar - 1, 1):.1f}" '
            f'height="{h_draft:.1f}" fill="#d8d8d8"/>'
        )
        parts.append(
            f'<rect x="{x:.1f}" y="{height - h_acc:.1f}" width="{max(bar - 1, 1):.1f}" '
            f'height="{h_acc:.1f}" fill="#3a9a3a"><title>round {i + 1}: {r["accepted"]} of '
            f"{r['drafted']} accepted</title></rect>"
        )
    parts.append(
        f'<text x="0" y="{height + 15}" font-size="11">round 1</text>'
        f'<text x="{width - 60}" y="{height + 15}" font-size="11">round {len(rounds)}</text></svg>'
    )
    return "".join(parts)


def _second_look_note(trace: dict) -> str:
    look = trace.get("second_look")
    if not look:
        return ""
    return (
        f"<p><b>Second look.</b> The model first wrote the code back unchanged; this answer forks from that one at "
        f"line {look['forked_at_line']} (the likeliest of {look['tried']} forks that change the code). The rounds "
        "below are the fork's.</p>"
    )


def _own_header_note(trace: dict) -> str:
    restart = trace.get("own_header")
    if not restart:
        return ""
    opening = " … ".join(line.strip() for line in restart["first_answer"].splitlines() if line.strip())
    kind, astray, where = (
        ("function", "opened with another of the file's definitions", "at")
        if restart.get("kind") == "function"
        else ("method", "went on to write a class of its own", "inside the class, at")
    )
    return (
        f"<p><b>From the {kind}'s own header.</b> The model's first answer {astray} (<code>{html.escape(opening)}"
        f"</code>); this one was started again {where} the {kind}'s header. The rounds below are this one's.</p>"
    )


def render_html(trace: dict, title: str = "editspec trace") -> str:
    e = html.escape
    spans = []
    for t in trace["tokens"]:
        source = None
        if t["origin"] != "target" and t["round"] >= 0:
            src = trace["rounds"][t["round"]].get("source")
            if src:
                where = f"line {src['line']} of the prompt" if src.get("line") else "the output"
                source = f"copied from {where}:\n{src['text']}"
        attrs = f' data-source="{e(source)}" title="{e(source)}"' if source else ""
        spans.append(f'<span class="tok {t["origin"]}" data-round="{t["round"]}"{attrs}>{e(t["text"])}</span>')
    f = trace["figures"]
    figures = [
        ("acceptance α", f"{f['acceptance_rate']:.2f}"),
        ("tokens per target pass", f"{f['tokens_per_pass']:.2f}"),
        ("mean draft length γ", f"{f['mean_draft_length']:.1f}"),
        ("target passes", str(f["target_passes"])),
        ("prefill", f"{f['prefill_seconds']:.2f} s"),
        ("decode", f"{f['decode_seconds']:.2f} s"),
    ]
    if "measured_speedup" in f:
        figures.append(("speed-up over plain (measured)", f"{f['measured_speedup']:.2f}x"))
        figures.append(("predicted from α for these draft lengths", f"{f['predicted_speedup']:.2f}x"))
    rows = []
    for i, r in enumerate(trace["rounds"]):
        src = r.get("source") or {}
        number = "prefill" if r.get("opening") else str(i + 1)
        rows.append(
            f"<tr><td>{number}</td><td>{r['origin'] or '-'}</td><td>{r['drafted']}</td><td>{r['accepted']}</td>"
            f"<td>{e(r['accepted_text'])}<del>{e(r['rejected_text'])}</del></td><td>{e(r['target_text'])}</td>"
            f"<td>{r['seconds'] * 1000:.1f}</td><td>{e(src.get('text', ''))}</td></tr>"
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title><style>{CSS}</style></head>
<body>
<h1>{e(title)}</h1>
<p class="legend"><span class="copied">copied from the source, accepted</span><span class="drafted">drafted by the
draft model, accepted</span><span class="target">the target model's own token</span></p>
<div>{"".join(f'<span class="fig">{e(k)}<b>{e(v)}</b></span>' for k, v in figures)}</div>
{_own_header_note(trace)}{_second_look_note(trace)}
<h2>The generated text ({len(trace["tokens"])} tokens; click a token to see where it came from)</h2>
<pre class="code" id="output">{"".join(spans)}</pre>
<div id="source"></div>
<h2>Accepted draft length per round</h2>
{_chart(trace["rounds"])}
<h2>Rounds</h2>
<table><thead><tr><th>#</th><th>draft</th><th>drafted</th><th>accepted</th><th>draft (rejected tail struck)</th>
<th>target's token</th><th>ms</th><th>copied from</th></tr></thead><tbody>{"".join(rows)}</tbody></table>
<script type="application/json" id="trace-data">{e(json.dumps(trace))}</script>
<script>{SCRIPT}</script>
</body></html>
"""
