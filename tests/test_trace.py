"""The trace page of a real rewrite: one marked span per token, nothing external, and it renders."""

import html.parser
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from editspec.cli import EXIT_INPUT, main
from editspec.decoding import DecodeOptions, Decoder
from editspec.locate import definitions, find_by_name, language_for
from editspec.rewrite import Rewriter, SourceFile
from editspec.trace import render_html

CODE = (
    "def describe(values):\n    count = len(values)\n    biggest = max(values)\n    smallest = min(values)\n"
    "    text = 'count ' + str(count)\n    text = text + ' max ' + str(biggest)\n"
    "    text = text + ' min ' + str(smallest)\n    return text\n"
)
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


class Page(html.parser.HTMLParser):
    VOID = {"meta", "br", "img", "input", "link", "rect"}

    def __init__(self):
        super().__init__()
        self.stack, self.spans, self.current, self.problems, self.external = [], [], None, [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href"):
            if attrs.get(name):
                self.external.append(attrs[name])
        if tag == "span" and "tok" in (attrs.get("class") or "").split():
            self.current = ""
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()
        if tag == "span" and self.current is not None:
            self.spans.append(self.current)
            self.current = None

    def handle_data(self, data):
        if self.current is not None:
            self.current += data


INSTRUCTION = "Rename the function describe to summarize."


@pytest.fixture(scope="module")
def rewriter(backend):
    return Rewriter(Decoder(backend, DecodeOptions(max_tokens=200)))


@pytest.fixture(scope="module")
def result(rewriter):
    spec = language_for("x.py")
    target = find_by_name(definitions(CODE.encode(), spec), "describe")
    return rewriter.rewrite(SourceFile.from_bytes(CODE.encode()), spec, target, INSTRUCTION)


def test_one_span_per_token_and_they_spell_the_output(result, rewriter, backend):
    page = render_html(result.trace, "t")
    parser = Page()
    parser.feed(page)
    parser.close()
    assert page.startswith("<!DOCTYPE html>") and parser.problems == [] and parser.stack == []
    assert len(parser.spans) == result.stats.generated_tokens == len(result.trace["tokens"])
    assert "".join(parser.spans) == result.trace["output"]
    assert parser.external == []  # no external scripts, styles, fonts or images
    origins = {t["origin"] for t in result.trace["tokens"]}
    assert "copied" in origins and "target" in origins
    rounds = result.trace["rounds"]
    assert sum(r["accepted"] for r in rounds) == result.stats.accepted_tokens
    spec = language_for("x.py")
    target = find_by_name(definitions(CODE.encode(), spec), "describe")
    prompt = backend.detokenize(
        rewriter.prompt_tokens(SourceFile.from_bytes(CODE.encode()), spec, target, INSTRUCTION)[0]
    )
    lines = prompt.split("\n")
    from_prompt = [r for r in rounds if r["origin"] == "copied" and r["accepted"] and r["source"]["line"]]
    assert from_prompt
    for r in from_prompt:
        src = r["source"]
        # The line named is where the copy starts, and the text shown holds exactly what was drafted.
        assert src["text"].startswith(lines[src["line"] - 1]), (src, r)
        assert r["accepted_text"] + r["rejected_text"] in src["text"], (src, r)
        assert src["text"] in prompt


def test_the_page_shows_the_speed_up_the_statistics_line_prints(result):
    """The same request, the same figures: the trace page and `editspec rewrite`'s line both charge the opening copy
    as a pass, count against the request's own plain steps, and plan with the costs the request planned with (the
    page once left the opening out and took the decoder's costs as learning left them after the request)."""
    from editspec.display import summary_line

    f = result.trace["figures"]
    line = summary_line(result.stats)
    assert f"speed-up {f['measured_speedup']:.2f}x over plain (α predicts {f['predicted_speedup']:.2f}x" in line


def test_trace_command_from_saved_json(tmp_path, result):
    saved = tmp_path / "result.json"
    saved.write_text(json.dumps(result.to_json()))
    run = CliRunner().invoke(main, ["trace", str(saved)])
    assert run.exit_code == 0, run.output
    assert (tmp_path / "result.html").read_text().count('<span class="tok ') == result.stats.generated_tokens
    (tmp_path / "junk.json").write_text("{}")
    bad = CliRunner().invoke(main, ["trace", str(tmp_path / "junk.json")])
    assert bad.exit_code == EXIT_INPUT and "not a result saved" in bad.output


@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian's chromium is not installed")
def test_renders_in_headless_chromium(tmp_path, result):
    page = tmp_path / "trace.html"
    page.write_text(render_html(result.trace, "editspec trace"))
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "trace.png"
    shot.unlink(missing_ok=True)
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1200,1400",
    ]
    run = subprocess.run(
        ["chromium", *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert shot.is_file() and shot.stat().st_size > 10_000, run.stderr[-2000:]
    assert "Uncaught" not in run.stderr and "SyntaxError" not in run.stderr
    dom = subprocess.run(["chromium", *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.stdout.count('class="tok ') == result.stats.generated_tokens
