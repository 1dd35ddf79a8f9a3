"""Choosing a model: the bundled default, a user's GGUF, and one clear message for each bad choice."""

import pytest

from editspec.decoding import check_same_vocabulary
from editspec.models import ModelError, default_model_path, extra_buffers_allowed, resolve_model_path


def test_default_model_is_the_bundled_smollm2():
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.read_bytes()[:4] == b"GGUF"


def test_environment_variable_chooses_the_model(monkeypatch):
    monkeypatch.setenv("EDITSPEC_MODEL", str(default_model_path()))
    assert resolve_model_path(None) == default_model_path()
    monkeypatch.setenv("EDITSPEC_MODEL", "/nonexistent/model.gguf")
    with pytest.raises(ModelError, match="not found"):
        resolve_model_path(None)


def test_bad_model_paths_say_what_is_wrong(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        resolve_model_path(tmp_path / "missing.gguf")
    with pytest.raises(ModelError, match="directory"):
        resolve_model_path(tmp_path)
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(ModelError, match="not a GGUF"):
        resolve_model_path(text)


def test_a_truncated_gguf_is_a_clear_error(tmp_path):
    from editspec.backend import LlamaBackend

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(default_model_path().read_bytes()[:4096])
    with pytest.raises(ModelError, match="could not load"):
        LlamaBackend(broken)


def test_extra_buffers_can_be_forced(monkeypatch):
    monkeypatch.setenv("EDITSPEC_EXTRA_BUFFERS", "0")
    assert extra_buffers_allowed() is False
    monkeypatch.setenv("EDITSPEC_EXTRA_BUFFERS", "1")
    assert extra_buffers_allowed() is True


class Vocab:
    def __init__(self, n, pieces=None):
        self.n_vocab = n
        self.pieces = pieces or {}

    def token_bytes(self, tok):
        return self.pieces.get(tok, b"t%d" % tok)


def test_draft_model_vocabulary_must_match():
    check_same_vocabulary(Vocab(1000), Vocab(1000))
    with pytest.raises(ModelError, match="vocabulary has 999 tokens"):
        check_same_vocabulary(Vocab(1000), Vocab(999))
    with pytest.raises(ModelError, match="same tokenizer"):
        check_same_vocabulary(Vocab(1000), Vocab(1000, {0: b"other"}))
