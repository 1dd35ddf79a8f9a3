"""Typed settings, read from initializationOptions and workspace/didChangeConfiguration."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from editspec.decoding import DecodeOptions

DEFAULT_PRESETS = ["Add type hints", "Add a docstring", "Simplify this code"]


@dataclass(frozen=True)
class Settings:
    model: str | None = None  # a model name (coder, tiny) or a GGUF path; None: $EDITSPEC_MODEL, else coder
    draft_model: str | None = None  # None: $EDITSPEC_DRAFT_MODEL, else none
    threads: int | None = None
    gpu_layers: int | None = None  # layers offloaded to a GPU, -1 all; None: $EDITSPEC_GPU_LAYERS, else 0
    temperature: float = 0.0
    max_tokens: int | None = None  # None: 4x the function's tokens + 256
    context_tokens: int = 256
    streaming: str = "edits"  # "edits": stream into the document; "final": one edit at the end
    edit_interval_ms: int = 100  # at most one streamed edit per this many milliseconds
    presets: list[str] = field(default_factory=lambda: list(DEFAULT_PRESETS))
    preload: bool = True  # load the model in the background right after initialize
    prefix_cache_mb: int = 256  # memory for kept prompt prefixes (KV states), least recently used evicted
    read_ahead: bool = True  # on a code action, read the function's prompt prefix while the user types
    apply_edit_timeout_ms: int = 10000  # how long the editor may take to answer workspace/applyEdit
    second_look: bool = True  # an answer that writes the function back unchanged gets a second look

    @property
    def model_key(self) -> tuple:
        """What the loaded model depends on: change any of it and the model is loaded again (the decoding options
        below and the memory for kept prompts are not among them: the model's users take them as they are when
        they start, keeping the model and the prompts it holds)."""
        return (self.model, self.draft_model, self.threads, self.gpu_layers)

    def decode_options(self) -> DecodeOptions:
        return DecodeOptions(temperature=self.temperature, max_tokens=self.max_tokens)


DEFAULTS = Settings()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def updated(settings: Settings, options: object) -> Settings:
    """Settings with the given options applied (camelCase or snake_case keys, optionally under "editspec"); a key
    left out keeps its value, a null puts the setting's default back. Raises ValueError naming the first bad
    value."""
    if options is None:
        return settings
    if not isinstance(options, dict):
        raise ValueError("editspec settings must be an object")
    options = options.get("editspec", options)
    if not isinstance(options, dict):
        raise ValueError("editspec settings must be an object")
    changes = {}
    for f in fields(Settings):
        for key in (f.name, _camel(f.name)):
            if key in options:
                value = options[key]
                changes[f.name] = getattr(DEFAULTS, f.name) if value is None else _check(f.name, value)
    return replace(settings, **changes)


def _check(name: str, value):
    expect = {
        "model": (str, type(None)),
        "draft_model": (str, type(None)),
        "threads": (int, type(None)),
        "gpu_layers": (int, type(None)),
        "temperature": (int, float),
        "max_tokens": (int, type(None)),
        "context_tokens": int,
        "streaming": str,
        "edit_interval_ms": int,
        "presets": list,
        "preload": bool,
        "prefix_cache_mb": int,
        "read_ahead": bool,
        "apply_edit_timeout_ms": int,
        "second_look": bool,
    }[name]
    if isinstance(value, bool) and expect is not bool or not isinstance(value, expect):
        raise ValueError(f"setting {name!r} has a value of the wrong type: {value!r}")
    if name == "streaming" and value not in ("edits", "final"):
        raise ValueError("setting 'streaming' must be 'edits' or 'final'")
    if name == "presets" and not all(isinstance(p, str) and p.strip() for p in value):
        raise ValueError("setting 'presets' must be a list of instructions")
    if (
        name in ("max_tokens", "threads", "edit_interval_ms", "prefix_cache_mb", "apply_edit_timeout_ms")
        and value is not None
        and value < (0 if name in ("edit_interval_ms", "prefix_cache_mb") else 1)
    ):
        raise ValueError(f"setting {name!r} must be positive")
    if name == "gpu_layers" and value is not None and value < -1:
        raise ValueError("setting 'gpuLayers' must be -1 (all), 0 (none) or more")
    if name == "temperature" and value < 0:
        raise ValueError("setting 'temperature' must be 0 or more")
    return value or None if name in ("model", "draft_model") else value
