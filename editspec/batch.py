"""`editspec batch`: one instruction over every selected function of a tree.

Files are independent jobs (`plan` lists them, `rewrite_file` does one), so a later step can hand them to
several worker processes or machines; here one process runs them in turn, the model using all cores.
A file is written (atomically) only when all its functions are done, so an interruption leaves every file
either as it was or fully rewritten; a small state file records finished files, and of a file part-way through
the functions done so far (a `Checkpoint`), and a rerun resumes from there.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shlex
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pathspec

from .locate import (
    CLASS_LIKE,
    Definition,
    LanguageSpec,
    LocateError,
    definitions,
    dotted,
    language_for,
    line_and_column,
    nested_names,
    part_of,
)
from .rewrite import (
    Progress,
    RewriteError,
    Rewriter,
    SourceFile,
    moved,
    writable_target,
    write_atomically,
)

NOT_FUNCTIONS = CLASS_LIKE | {"type_spec", "struct_item", "enum_item", "interface_declaration"}
DEFAULT_STATE = ".editspec-batch.json"


class BatchError(Exception):
    pass


def _ignore_specs(directory: Path) -> pathspec.PathSpec | None:
    ignore = directory / ".gitignore"
    if not ignore.is_file():
        return None
    return pathspec.GitIgnoreSpec.from_lines(ignore.read_text(errors="replace").splitlines())


def _ignored(specs: list[tuple[Path, pathspec.PathSpec]], path: Path, is_dir: bool) -> bool:
    """Whether a .gitignore in an enclosing directory ignores `path`."""
    for spec_dir, spec in specs:
        if spec_dir in path.parents:
            rel = path.relative_to(spec_dir).as_posix() + ("/" if is_dir else "")
            if spec.match_file(rel):
                return True
    return False


def _git_listed(root: Path) -> list[Path] | None:
    """The files git sees under a directory in a work tree (tracked, and untracked but not ignored: every
    .gitignore up to the repository's root, .git/info/exclude and the global excludes file, as git reads
    them), or None outside a work tree or without git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    names = sorted(set(os.fsdecode(n) for n in out.stdout.split(b"\0") if n))
    return [root / name for name in names if not any(part == ".git" for part in Path(name).parts)]


def collect_files(roots: Iterable[Path], globs: Sequence[str] = ()) -> list[Path]:
    """Source files under the roots in a supported language, minus what git ignores (inside a work tree, git
    is asked; elsewhere the .gitignore files under the roots are read); links are never followed out of their
    root, and a file reached twice (a link to a file of the tree, or two roots that overlap) is taken once.
    `globs`: file patterns (a path under its root, or a name, matching any of them; none: every file)."""
    found: list[Path] = []
    seen: dict[Path, int] = {}  # real path -> its place in `found`
    for root in roots:
        if not root.exists():
            raise BatchError(f"no such file or directory: {root}")
        base = root.resolve()
        listed = None if root.is_file() else _git_listed(root)
        if root.is_file():
            candidates = [(root, root.name)]  # named on the command line: taken even if ignored
        elif listed is not None:
            candidates = [(path, path.relative_to(root).as_posix()) for path in listed]
        else:
            candidates = []
            specs: list[tuple[Path, pathspec.PathSpec]] = []
            for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
                here = Path(dirpath)
                spec = _ignore_specs(here)
                if spec is not None:
                    specs.append((here, spec))
                dirnames[:] = sorted(d for d in dirnames if d != ".git" and not _ignored(specs, here / d, True))
                for name in sorted(filenames):
                    path = here / name
                    if not _ignored(specs, path, False):
                        candidates.append((path, path.relative_to(root).as_posix()))
        for path, rel in candidates:
            real = path.resolve()
            if path.is_symlink() and root.is_dir() and base not in real.parents:
                continue  # a link out of the tree: not ours to rewrite
            if globs and not any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(path.name, g) for g in globs):
                continue
            try:
                language_for(path)
            except LocateError:
                continue
            if not real.is_file():
                continue
            if real in seen:
                if found[seen[real]].is_symlink() and not path.is_symlink():
                    found[seen[real]] = path  # the file by its own name rather than by a link's
                continue
            seen[real] = len(found)
            found.append(path)
    return found


def select_functions(
    defs: list[Definition],
    patterns: str | Sequence[str],
    left_out: list[tuple[str, str]] | None = None,
    file: str = "FILE",
    source: bytes = b"",
) -> list[Definition]:
    """Functions and methods whose name matches a pattern; never one inside another (their regions would
    overlap: the outer one's rewrite holds it), nor two sharing a line (`function a(){} function b(){}`): the
    second is added to `left_out` as (name, why), as it is not rewritten, with how to rewrite it alone (in the file
    `file`, whose text is `source`: by its name, or where the name is not the file's only one, by the line and
    column where its code starts)."""
    names = Counter(d.name for d in defs)
    patterns = [dotted(p) for p in ([patterns] if isinstance(patterns, str) else patterns)]
    chosen: list[Definition] = []
    for d, path in zip(defs, nested_names(defs), strict=True):
        if d.kind in NOT_FUNCTIONS:
            continue
        if not any(fnmatch.fnmatchcase(name, p) for name in (d.name, d.simple_name, path) for p in patterns):
            continue
        if chosen and d.start < chosen[-1].end:
            if left_out is not None and not part_of(d, chosen[-1]):
                if names[d.name] == 1 or not source:
                    which = f"-f {shlex.quote(d.name)}"
                else:
                    which = "--line {}:{}".format(*line_and_column(source, d.node_start))
                alone = f"rewrite it alone: editspec rewrite {shlex.quote(file)} {which}"
                left_out.append(
                    (
                        d.name,
                        f"not rewritten: it shares a line with {chosen[-1].name}, whose rewrite replaces that line "
                        f"({alone})",
                    )
                )
            continue
        chosen.append(d)
    return chosen


def planned(defs: list[Definition], wanted: Iterable[tuple[str, int]]) -> list[Definition]:
    """The definitions `wanted` names as (name, line), in the file's order: of several with one name on one line
    (`function m(){} function m(){}`, minified code), the first, as `select_functions` chose it; the others share
    its line and are not rewritten."""
    keys, found = set(wanted), []
    for d in defs:
        if (d.name, d.line) in keys:
            keys.discard((d.name, d.line))
            found.append(d)
    return found


@dataclass
class FileJob:
    path: Path
    language: LanguageSpec
    targets: list[Definition]
    raw: bytes = b""  # the file as planned: a worker rewrites this, and it is written only if still on disk
    left_out: list[tuple[str, str]] = field(default_factory=list)  # matching functions not rewritten, and why


def plan(
    files: list[Path], pattern: str | Sequence[str], apply: bool = False
) -> tuple[list[FileJob], list[tuple[Path, str]]]:
    """The jobs, and the files left out (with why): those that cannot be read and, with `apply`, those this user
    may not write (found now, not after the model's work on them)."""
    jobs, unreadable = [], []
    for path in files:
        spec = language_for(path)
        try:
            source = SourceFile.read(path)
            if apply:
                writable_target(path)
        except RewriteError as e:
            unreadable.append((path, str(e)))
            continue
        left_out: list[tuple[str, str]] = []
        data = source.text.encode("utf-8")
        targets = select_functions(definitions(data, spec), pattern, left_out, str(path), data)
        if targets:
            jobs.append(FileJob(path, spec, targets, source.raw, left_out))
    return jobs, unreadable


@dataclass
class FileOutcome:
    path: str
    status: str  # "rewritten", "unchanged", "failed" (nothing kept), "skipped" (changed on disk, unreadable)
    functions: int = 0
    rewritten: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (function, why)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (function, what to check): rewritten all the same
    diff: str = ""
    tokens: int = 0
    decode_seconds: float = 0.0
    plain_estimate_seconds: float = 0.0
    sha_before: str = ""
    sha_after: str = ""
    reason: str = ""
    worker: str = ""  # who rewrote it (host:pid), when workers did
    seconds: float = 0.0  # wall time of the file's job on its worker


# Called after each function with (function name, its outcome "rewritten"/"unchanged"/"failed", tokens).
FunctionCallback = Callable[[str, str, int], None]


@dataclass
class Checkpoint:
    """A file part-way through its rewrite: its text with the functions done so far rewritten (bottom-up: those
    below `pending`), the functions still to do as (name, line in `text`), and the outcome so far (a FileOutcome
    as a dict). A rerun goes on from here instead of from the file's first function."""

    text: str
    pending: list[tuple[str, int]]
    outcome: dict

    @property
    def done(self) -> int:
        return self.outcome.get("functions", 0) - len(self.pending)


def outcome_from_dict(entry: dict) -> FileOutcome:
    """A FileOutcome as `asdict` (and JSON) left it: its pairs come back as lists."""
    return FileOutcome(
        **dict(
            entry,
            failures=[tuple(f) for f in entry.get("failures", [])],
            notes=[tuple(n) for n in entry.get("notes", [])],
        )
    )


def rewrite_source(
    rewriter: Rewriter,
    source: SourceFile,
    language: LanguageSpec,
    wanted: list[tuple[str, int]],
    instruction: str,
    display_path: str,
    on_function: FunctionCallback | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    resume: Checkpoint | None = None,
    on_checkpoint: Callable[[Checkpoint], None] | None = None,
) -> tuple[str, FileOutcome]:
    """The rewrite of one file's content, touching no file: its new "\n" text and the outcome (no diff yet).
    `wanted`: the functions as (name, line) when planned. What a worker runs. `resume`: go on from a checkpoint
    of this content (started over when its functions are not all found in its text); `on_checkpoint` is called
    after each function."""
    outcome = FileOutcome(display_path, "unchanged", functions=len(wanted), sha_before=source.digest)
    current = source.text
    # The planned targets, found again in the text (functions, methods or classes alike).
    targets = definitions(current.encode("utf-8"), language)
    # Bottom-up: rewriting a later function never moves an earlier one (but for the imports it adds: `moved`).
    pending = list(reversed(planned(targets, wanted)))
    if resume is not None:
        left = list(map(tuple, resume.pending))
        found = planned(definitions(resume.text.encode("utf-8"), language), left)
        if len(found) == len(left) and resume.outcome.get("sha_before") == source.digest:
            outcome, current, pending = outcome_from_dict(resume.outcome), resume.text, list(reversed(found))
    while pending:
        target = pending.pop(0)
        snapshot = SourceFile(source.path, source.raw, current, source.crlf)
        try:
            result = rewriter.rewrite(snapshot, language, target, instruction, on_progress)
        except RewriteError as e:
            outcome.failures.append((target.name, str(e)))
            _notify(on_function, target.name, "failed", 0)
            _checkpoint(on_checkpoint, current, pending, outcome)
            continue
        outcome.tokens += result.stats.generated_tokens
        outcome.decode_seconds += result.stats.decode_seconds
        decoded = result.stats.generated_tokens - result.stats.prefill_output_tokens
        # As many plain steps as it decoded tokens, each what this rewrite's own plain steps took (see Stats); none
        # without speculation (nothing planned: it is plain decoding).
        if result.stats.verify_seconds:
            outcome.plain_estimate_seconds += max(decoded, 0) * result.stats.plain_step_seconds
        problem = result.problem()
        if problem:
            outcome.failures.append((target.name, problem))
            _notify(on_function, target.name, "failed", result.stats.generated_tokens)
            _checkpoint(on_checkpoint, current, pending, outcome)
            continue
        changed = result.new_text != current
        for warning in result.warnings():
            outcome.notes.append((target.name, warning))
        current = result.new_text
        pending = [moved(t, result) for t in pending]
        outcome.rewritten += changed
        _notify(on_function, target.name, "rewritten" if changed else "unchanged", result.stats.generated_tokens)
        _checkpoint(on_checkpoint, current, pending, outcome)
    if current == source.text and outcome.failures and not outcome.rewritten:
        outcome.status = "failed"
    return current, outcome


def finish_file(job: FileJob, current: str, outcome: FileOutcome, apply: bool) -> FileOutcome:
    """What only the driver does with a rewritten file: the diff, and with `apply` the atomic write, refused
    when the file on disk is no longer the one that was planned (then the file is skipped)."""
    outcome.notes.extend(job.left_out)
    source = SourceFile.from_bytes(job.raw, job.path)
    if current == source.text:
        return outcome
    outcome.status = "rewritten"
    new_bytes = source.encode(current)
    outcome.diff = source.diff_to(new_bytes)  # encoded once: a CRLF file's encoding diffs its lines
    outcome.sha_after = hashlib.sha256(new_bytes).hexdigest()
    if apply:
        try:
            write_atomically(job.path, new_bytes, source.raw)
        except RewriteError as e:
            return FileOutcome(
                outcome.path, "skipped", functions=outcome.functions, reason=str(e), sha_before=outcome.sha_before
            )
    return outcome


def rewrite_file(
    rewriter: Rewriter,
    job: FileJob,
    instruction: str,
    apply: bool,
    display_path: str,
    on_function: FunctionCallback | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> FileOutcome:
    """One file, in this process: rewrite its planned content, then diff or write it."""
    if not job.raw:
        try:
            job.raw = SourceFile.read(job.path).raw
        except RewriteError as e:
            return FileOutcome(display_path, "skipped", reason=str(e))
    source = SourceFile.from_bytes(job.raw, job.path)
    wanted = [(t.name, t.line) for t in job.targets]
    current, outcome = rewrite_source(
        rewriter, source, job.language, wanted, instruction, display_path, on_function, on_progress
    )
    return finish_file(job, current, outcome, apply)


def _notify(callback: FunctionCallback | None, name: str, what: str, tokens: int) -> None:
    if callback is not None:
        callback(name, what, tokens)


def _checkpoint(callback, current: str, pending: list[Definition], outcome: FileOutcome) -> None:
    if callback is not None and pending:  # after the last function the file itself is the result
        callback(Checkpoint(current, [(t.name, t.line) for t in reversed(pending)], asdict(outcome)))


class BatchState:
    """Finished files of a run, keyed by the run's settings, and of files part-way through, the last checkpoint;
    written atomically after every function."""

    def __init__(self, path: Path, key: str):
        self.path, self.key = path, key
        self.files: dict[str, dict] = {}
        self.partial: dict[str, dict] = {}  # display path -> {"planned": [[name, line]...], checkpoint fields}
        self.resumed = False
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("key") == key:
            self.files = data.get("files", {})
            self.partial = data.get("partial", {})
            self.resumed = bool(self.files or self.partial)

    def finished(self, display_path: str, file_path: Path, apply: bool) -> FileOutcome | None:
        """The recorded outcome, if that file is still as the run left it."""
        entry = self.files.get(display_path)
        if entry is None:
            return None
        try:
            digest = hashlib.sha256(file_path.read_bytes()).hexdigest()
        except OSError:
            return None
        expected = entry["sha_after"] if (apply and entry["status"] == "rewritten") else entry["sha_before"]
        if digest != expected:
            return None
        return outcome_from_dict(entry)

    def checkpoint(self, display_path: str, job: FileJob) -> Checkpoint | None:
        """Where the file's rewrite had got to, if it is still the file that was planned (the same content and
        functions); else None, and it starts over."""
        entry = self.partial.get(display_path)
        try:
            planned = [(t.name, t.line) for t in job.targets]
            if entry is None or [tuple(w) for w in entry["planned"]] != planned:
                return None
            resume = Checkpoint(entry["text"], [tuple(w) for w in entry["pending"]], dict(entry["outcome"]))
        except (KeyError, TypeError, ValueError):
            return None
        if resume.outcome.get("sha_before") != hashlib.sha256(job.raw).hexdigest():
            return None
        return resume

    def part_way(self, display_paths: Iterable[str]) -> dict[str, tuple[int, int]]:
        """Of these files, those part-way through: (functions planned, functions done)."""
        wanted = set(display_paths)
        return {
            d: (len(e["planned"]), len(e["planned"]) - len(e["pending"]))
            for d, e in self.partial.items()
            if d in wanted
        }

    def record_checkpoint(self, display_path: str, job: FileJob, checkpoint: Checkpoint) -> None:
        self.partial[display_path] = {"planned": [(t.name, t.line) for t in job.targets], **asdict(checkpoint)}
        self._write()

    def record(self, outcome: FileOutcome) -> None:
        self.files[outcome.path] = asdict(outcome)
        self.partial.pop(outcome.path, None)
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"key": self.key, "files": self.files, "partial": self.partial}, indent=1))
        os.replace(tmp, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def run_key(**settings) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
