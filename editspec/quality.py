"""`editspec bench --quality`: does the rewrite do the job?

Over the CanItEdit problems whose reference edit is confined to one definition (that definition is the target:
the innermost function, method or class that holds the whole change), whose code and tests need only the
standard library, and whose reference passes its own tests: rewrite `before` through exactly the code path of
`editspec rewrite FILE --function NAME --apply` (locate by name, `Rewriter.rewrite`, `apply_rewrite`), then run
the problem's tests on the written file in a subprocess with a timeout. In the same run, per problem: plain
decoding through the same path (speculation must not change pass/fail), and what a plain llama-cpp-python
user would do: `create_chat_completion` given the whole file and the instruction, the edited file taken from
the answer's code block.
"""

from __future__ import annotations

import ast
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .backend import LlamaBackend
from .bench import _llama_cpp_model_params_patched, find_data
from .decoding import PREFIX_CACHE_MB, DecodeOptions, Decoder
from .locate import Definition, LocateError, definitions, find_by_name, language_for, outermost
from .prefix_cache import PrefixCache
from .prompts import whole_file_messages
from .rewrite import (
    ResultRefused,
    RewriteError,
    Rewriter,
    SourceFile,
    apply_rewrite,
)

METHODS = ("editspec", "plain", "whole_file")
TEST_TIMEOUT = 30  # seconds for one problem's tests
PY = language_for("case.py")


@dataclass
class Problem:
    case: str  # "<id>-<name>"
    before: str
    after: str
    instruction: str
    tests: str
    target: str  # the definition's name, as `--function` takes it


def confining_definition(before: str, after: str) -> Definition | None:
    """The innermost definition of `before` that holds the whole reference edit: `after` is `before` with only
    that definition's region replaced."""
    b = before.encode()
    a = after.encode()
    best = None
    after_defs = definitions(a, PY)
    for d in definitions(b, PY):
        head, tail = b[: d.start], b[d.end :].rstrip()
        if a.startswith(head) and a.rstrip().endswith(tail) and len(a.rstrip()) >= len(head) + len(tail):
            replaced = a[len(head) : len(a.rstrip()) - len(tail)]
            if replaced.strip() == b[d.start : d.end].strip():
                continue  # no change inside: not the edit's definition
            if len(_outermost_within(after_defs, len(head), len(head) + len(replaced))) != 1:
                continue  # the edit adds or removes definitions beside it
            if best is None or d.end - d.start < best.end - best.start:
                best = d
    return best


def _outermost_within(defs: list[Definition], start: int, end: int) -> list[Definition]:
    """The definitions of a parsed file that lie in [start, end) and are not inside another one there. Counted in
    the whole file, not in the region's text alone: a method's text followed by a new top-level class does not
    parse as two definitions on its own (the indented first line makes it an error node)."""
    return outermost([d for d in defs if start <= d.node_start and d.node_end <= end])


def imported_modules(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {"<unparsable>"}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def run_tests(code: str, tests: str, workdir: Path, timeout: float = TEST_TIMEOUT) -> tuple[bool, str]:
    """The problem's tests appended to the code, run in a fresh interpreter; (passed, the last line of why not)."""
    script = workdir / "run_tests.py"
    script.write_text(code.rstrip("\n") + "\n\n" + tests + "\n")
    try:
        done = subprocess.run(
            [sys.executable, str(script)], cwd=workdir, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return False, f"tests timed out after {timeout:.0f}s"
    if done.returncode == 0:
        return True, ""
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return False, lines[-1][:200] if lines else f"exit code {done.returncode}"


def select_problems(rows: list[dict], workdir: Path) -> tuple[list[Problem], list[dict]]:
    """The problems a single-definition rewrite can solve, and the others with why they were left out."""
    chosen, left_out = [], []
    stdlib = set(sys.stdlib_module_names)
    for row in rows:
        case = f"{row['id']}-{row['name']}"
        target = confining_definition(row["before"], row["after"])
        if target is None:
            left_out.append({"case": case, "why": "the reference edit is not inside one definition"})
            continue
        third_party = sorted((imported_modules(row["after"]) | imported_modules(row["tests"])) - stdlib)
        if third_party:
            left_out.append({"case": case, "why": f"needs {', '.join(third_party)}"})
            continue
        passed, why = run_tests(row["after"], row["tests"], workdir)
        if not passed:
            left_out.append({"case": case, "why": f"the reference fails its own tests: {why}"})
            continue
        chosen.append(
            Problem(case, row["before"], row["after"], row["instruction_descriptive"], row["tests"], target.name)
        )
    return chosen, left_out


def rewrite_as_the_cli_does(rewriter: Rewriter, problem: Problem, workdir: Path, states: Path | None = None) -> dict:
    """`editspec rewrite case.py --function NAME --instruction ... --apply`, then the tests on the written file.
    As a fresh process: nothing in memory, and on disk (`states`: None for none) the prompt states that earlier
    rewrites left there, as `editspec rewrite` keeps them (of other problems: their system prompt's part)."""
    path = workdir / "case.py"
    path.write_text(problem.before)
    backend = rewriter.backend
    backend.truncate(0)
    backend.prefix_cache = PrefixCache(PREFIX_CACHE_MB << 20, states) if states is not None else None
    t0 = time.perf_counter()
    outcome: dict = {}
    try:
        source = SourceFile.read(path)
        target = find_by_name(definitions(source.text.encode(), PY), problem.target)
        result = rewriter.rewrite(source, PY, target, problem.instruction)
        s = result.stats
        outcome.update(
            prompt_tokens=s.prompt_tokens,
            reused_prompt_tokens=s.reused_prompt_tokens,
            tokens=s.generated_tokens,
            prefill_seconds=round(s.prefill_seconds, 3),
            decode_seconds=round(s.decode_seconds, 3),
            tokens_per_s=round(s.decode_tokens_per_second, 1),
            accepted=s.accepted_tokens,
            drafted=s.drafted_tokens,
            target_passes=s.target_passes,
            new_region=result.new_region,  # kept in --json, refused or not: what the model wrote
            second_look=bool(result.second_look),  # the answer is a fork of one that wrote the code back
            own_header=bool(result.trace.get("own_header")),  # started again at its own header (opened_elsewhere)
            written_back=result.unchanged,  # the answer is the code as it was (after any second look)
            imports=result.imports,  # import statements the answer added to the file's imports
            undefined_names=result.undefined_names,  # names it reads that nothing defines (the rewrite's note)
            bad_calls=result.bad_calls,  # calls of the file's own functions they cannot take (the rewrite's note)
            parameter_changes=result.parameter_changes,  # how its callers' calls stop fitting (the rewrite's note)
            renamed_to=result.renamed_to,  # the definition's new name, where it renamed it (the rewrite's note)
        )
        apply_rewrite(result)
    except ResultRefused as e:
        outcome.update(status="refused", why=str(e).removeprefix("not written: ").split("; check the diff")[0])
    except (RewriteError, LocateError, ValueError) as e:
        outcome.update(status="refused", why=str(e))
    outcome["seconds"] = round(time.perf_counter() - t0, 3)
    if "status" not in outcome:
        passed, why = run_tests(path.read_text(), problem.tests, workdir)
        outcome.update(status="pass" if passed else "fail", why=why)
    return outcome


def code_block(answer: str) -> str:
    """The answer's code: its first fenced block (the rest of the answer if the block is not closed)."""
    m = re.search(r"```[\w+-]*\n(.*?)(?:```|\Z)", answer, re.S)
    return m.group(1) if m else answer


def whole_file_llama_cpp(llm, problem: Problem, workdir: Path, max_tokens: int) -> dict:
    """What a plain llama-cpp-python user would do: the whole file and the instruction, greedy, the edited file
    taken from the answer's code block."""
    messages = whole_file_messages(problem.before, problem.instruction)
    llm.reset()
    t0 = time.perf_counter()
    first = None
    text, chunks = "", 0
    for chunk in llm.create_chat_completion(messages, temperature=0.0, max_tokens=max_tokens, stream=True):
        delta = chunk["choices"][0]["delta"].get("content") or ""
        if delta:
            first = first if first is not None else time.perf_counter() - t0
            text += delta
            chunks += 1
    total = time.perf_counter() - t0
    first = first if first is not None else total
    passed, why = run_tests(code_block(text), problem.tests, workdir)
    return {
        "status": "pass" if passed else "fail",
        "why": why,
        "tokens": chunks,
        "prefill_seconds": round(first, 3),
        "decode_seconds": round(total - first, 3),
        "seconds": round(total, 3),
        "tokens_per_s": round((chunks - 1) / (total - first), 1) if chunks > 1 and total > first else 0.0,
    }


def run_quality(
    *,
    model: str | None = None,
    data: str | None = None,
    limit: int | None = None,
    threads: int | None = None,
    methods: tuple[str, ...] = METHODS,
    progress: Callable[[str], None] = lambda m: None,
) -> dict:
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown quality method(s) {', '.join(sorted(unknown))}: choose from {', '.join(METHODS)}")
    rows = [json.loads(line) for line in find_data(data).read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="editspec-quality-") as tmp:
        workdir = Path(tmp)
        problems, left_out = select_problems(rows, workdir)
        progress(f"{len(problems)} of {len(rows)} CanItEdit problems are single-definition and standard-library only")
        problems = problems[:limit] if limit else problems
        backend = LlamaBackend(model, n_threads=threads, n_ctx=8192)
        # Each method keeps prompt states on disk as `editspec rewrite` does, in a folder of its own: a problem
        # finds what the method's earlier problems left, never its own prompt from the other method.
        states = {m: backend.states_dir(workdir / f"prompts-{m}") for m in ("editspec", "plain")}
        spec_rewriter = Rewriter(Decoder(backend, DecodeOptions()))
        plain_rewriter = Rewriter(Decoder(backend, DecodeOptions(speculate=False)))
        llm = None
        if "whole_file" in methods:
            from llama_cpp import Llama

            with _llama_cpp_model_params_patched():
                llm = Llama(
                    str(backend.path),
                    n_ctx=8192,
                    n_threads=backend.n_threads,
                    n_threads_batch=backend.n_threads,
                    verbose=False,
                )
        cases = []
        for i, problem in enumerate(problems, start=1):
            row: dict = {"case": problem.case, "target": problem.target}
            if "editspec" in methods:
                row["editspec"] = rewrite_as_the_cli_does(spec_rewriter, problem, workdir, states["editspec"])
            if "plain" in methods:
                row["plain"] = rewrite_as_the_cli_does(plain_rewriter, problem, workdir, states["plain"])
            if llm is not None:
                budget = 2 * len(backend.tokenize(problem.before)) + 256
                row["whole_file"] = whole_file_llama_cpp(llm, problem, workdir, budget)
            cases.append(row)
            progress(
                f"[{i}/{len(problems)}] {problem.case} ({problem.target}): "
                + " · ".join(f"{m} {row[m]['status']} {row[m]['seconds']:.1f}s" for m in methods)
                + (f" — {row['editspec']['why']}" if row.get("editspec", {}).get("why") else "")
            )
        threads_used, tiled = backend.n_threads, backend.tiled_matmul
        model_name = backend.path.name
        backend.close()
        del llm
    return {
        "model": model_name,
        "threads": threads_used,
        "tiled_matmul": tiled,  # llama.cpp's CPU kernels both methods ran with (kernels.py)
        "problems": len(problems),
        "left_out": left_out,
        "cases": cases,
        "summary": summarize(cases, methods),
    }


def summarize(cases: list[dict], methods: tuple[str, ...]) -> dict:
    def med(values):
        values = [v for v in values if v is not None]
        return round(statistics.median(values), 3) if values else None

    summary: dict = {}
    n = len(cases)
    for m in methods:
        runs = [c[m] for c in cases]
        count = {s: sum(1 for r in runs if r["status"] == s) for s in ("pass", "fail", "refused")}
        summary[m] = {
            "pass": count["pass"],
            "pass_at_1": round(count["pass"] / n, 3) if n else 0.0,
            "wrong_edits": count["fail"],
            "refused": count["refused"],
            "refusal_rate": round(count["refused"] / n, 3) if n else 0.0,
            "refusals": [{"case": c["case"], "why": c[m]["why"]} for c in cases if c[m]["status"] == "refused"],
            "median_seconds": med(r["seconds"] for r in runs),
            "median_prefill_seconds": med(r.get("prefill_seconds") for r in runs),
            "median_decode_seconds": med(r.get("decode_seconds") for r in runs),
            "median_tokens_per_s": med(r.get("tokens_per_s") for r in runs if r.get("tokens_per_s")),
        }
        if m != "whole_file":
            looked = [r for r in runs if r.get("second_look")]
            summary[m]["second_looks"] = len(looked)
            summary[m]["second_look_passes"] = sum(1 for r in looked if r["status"] == "pass")
            summary[m]["written_back"] = sum(1 for r in runs if r.get("written_back"))
            summary[m]["own_headers"] = sum(1 for r in runs if r.get("own_header"))
            summary[m]["undefined_names"] = sum(1 for r in runs if r.get("undefined_names"))
            summary[m]["bad_calls"] = sum(1 for r in runs if r.get("bad_calls"))
            summary[m]["parameter_changes"] = sum(1 for r in runs if r.get("parameter_changes"))
            summary[m]["renamed"] = sum(1 for r in runs if r.get("renamed_to"))
    if "editspec" in methods and "plain" in methods:
        differ = [c["case"] for c in cases if (c["editspec"]["status"] == "pass") != (c["plain"]["status"] == "pass")]
        summary["speculative_vs_plain_pass_differs"] = differ
    if "editspec" in methods and "whole_file" in methods:
        e, w = summary["editspec"], summary["whole_file"]
        summary["editspec_over_whole_file_median_seconds"] = (
            round(e["median_seconds"] / w["median_seconds"], 3) if e["median_seconds"] and w["median_seconds"] else None
        )
    return summary
