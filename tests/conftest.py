import pytest


@pytest.fixture(scope="session")
def backend():
    """The bundled SmolLM2-135M-Instruct, loaded once for the whole run."""
    from editspec.backend import LlamaBackend

    b = LlamaBackend(n_ctx=2048)
    yield b
    b.close()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Calibrations go to a per-session temporary cache, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
