import os
from pathlib import Path

import pytest

# The user's cache as it was when the run began: the coder model is assembled there once per machine.
USER_CACHE = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")


def pytest_configure(config):
    # The fast suite runs on `tiny` (behaviour, not quality), whatever the user's environment says; the tests on
    # the default model choose it explicitly. Set before any fixture, module-scoped ones included.
    os.environ["EDITSPEC_MODEL"] = "tiny"


@pytest.fixture(scope="session")
def backend():
    """The tiny model (SmolLM2-135M-Instruct), loaded once for the whole run: behaviour, not quality."""
    from editspec.backend import LlamaBackend

    b = LlamaBackend("tiny", n_ctx=2048)
    yield b
    b.close()


@pytest.fixture
def coder_env(monkeypatch):
    """For the tests where the product's result is the point: the default model (no $EDITSPEC_MODEL), with the
    user's cache, where `editspec rewrite` assembles it once per machine and keeps its calibration."""
    from editspec.models import MODELS

    monkeypatch.setenv("XDG_CACHE_HOME", USER_CACHE)
    monkeypatch.delenv("EDITSPEC_MODEL")
    return MODELS["coder"].prepare()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Calibrations go to a per-session temporary cache, never the user's; the fast suite runs on `tiny`
    unless a test chooses otherwise."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("EDITSPEC_MODEL", "tiny")
    monkeypatch.delenv("EDITSPEC_DRAFT_MODEL", raising=False)
    monkeypatch.delenv("EDITSPEC_GPU_LAYERS", raising=False)


@pytest.fixture
def scripted_model(monkeypatch):
    """The CLI (in-process) on the scripted model of tests/scripted.py: every answer known to the character."""
    import editspec.decoding
    from tests.scripted import ScriptedBackend

    def open_decoder(model=None, draft_model=None, *, options=None, **_):
        return editspec.decoding.Decoder(ScriptedBackend(), options)

    monkeypatch.setattr(editspec.decoding, "open_decoder", open_decoder)
