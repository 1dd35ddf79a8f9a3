"""From user options to the engine's parts: one place that the CLI, server and benchmark all go through."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass

from . import calibration, kernels
from .acceptance import GreedyAcceptance, SamplingAcceptance
from .drafters import CombinedDrafter, DraftModelDrafter, PromptLookupDrafter
from .engine import Generation, StopCondition, TokenCallback, generate
from .models import ModelError
from .policy import AdaptiveDraftLength, FixedDraftLength
from .prompts import LEAST_OPENING

DEFAULT_MAX_TOKENS = 1024


@dataclass
class DecodeOptions:
    speculate: bool = True  # False: plain decoding, same prompt, same engine
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int | None = None  # None: the caller's budget (a rewrite: relative to the code), else 1024
    max_draft: int = 32
    # Tokens of the opening copy verified within the prefill (a rewrite asks for prompts.opening_length: its code's
    # first line, and at least this many).
    opening_draft: int = LEAST_OPENING
    draft_length: int | None = None  # a fixed draft length instead of the adaptive one


def check_same_vocabulary(target, draft) -> None:
    """A draft model must tokenize exactly like the target, or its drafts mean other words."""
    if target.n_vocab != draft.n_vocab:
        raise ModelError(
            f"the draft model's vocabulary has {draft.n_vocab} tokens, the target's {target.n_vocab}: "
            "choose a draft model of the same family (same tokenizer)"
        )
    step = max(1, target.n_vocab // 997)
    for tok in [*range(0, target.n_vocab, step), target.n_vocab - 1]:
        if target.token_bytes(tok) != draft.token_bytes(tok):
            raise ModelError(
                f"the draft model's token {tok} is {draft.token_bytes(tok)!r}, the target's is "
                f"{target.token_bytes(tok)!r}: choose a draft model with the same tokenizer"
            )


class Decoder:
    """A target model (and optional draft model) ready to decode with the chosen options."""

    def __init__(
        self,
        backend,
        options: DecodeOptions | None = None,
        draft_backend=None,
        verify_seconds=None,
        policy_state=None,
        on_calibrate=None,
    ):
        """`verify_seconds` and `policy_state`: the verify costs and acceptance estimates to plan drafts with,
        fixed, instead of what this machine's calibration and earlier rewrites say (batch workers take the
        driver's, so that every worker drafts, and so writes, exactly as the driver would). Without them the
        decoder learns: it starts from what earlier requests on this model taught (acceptance estimates, and the
        verify costs the rounds really took, correcting the calibration), and saves it after each request.
        `on_calibrate(done, total)`: while this machine's verify costs are measured (a model file's first run;
        the target's, then a draft model's)."""
        self.backend = backend
        self.options = options or DecodeOptions()
        self._newlines: dict[int, bool] = {}  # token -> its text holds a line break
        self.draft_backend = draft_backend
        if draft_backend is not None:
            check_same_vocabulary(backend, draft_backend)
        self.learning = self.options.speculate and verify_seconds is None and policy_state is None
        self.learned = calibration.LearnedState(backend) if self.learning else None
        state = self.learned.load() if self.learned is not None else {}
        if not self.options.speculate:
            self.verify_seconds = None
        else:
            measured = verify_seconds or calibration.verify_seconds(backend, on_measure=on_calibrate)
            self.verify_seconds = list(measured)
            if verify_seconds is None and hasattr(backend, "tiled_matmul"):  # once per machine: which CPU kernels pay
                kernels.measure_other(backend, self.verify_seconds, on_progress=on_calibrate)
        self.calibrated = self.verify_seconds
        # Costs are learned online only where the decoder learns: one given its costs keeps them.
        self.costs = calibration.OnlineCosts(self.verify_seconds, state.get("costs")) if self.learning else None
        if self.costs is not None:
            self.verify_seconds = self.costs.costs()
        self.draft_step_seconds = (
            calibration.verify_seconds(draft_backend, on_measure=on_calibrate)[1] if draft_backend is not None else 0.0
        )
        # What the policy learns about acceptance is a property of the model: keep it across requests.
        self.policy = (
            AdaptiveDraftLength(self.verify_seconds, self.draft_step_seconds) if self.options.speculate else None
        )
        if self.policy is not None:
            self.policy.load(policy_state if policy_state is not None else state.get("acceptance"))

    def _reproducible(self) -> bool:
        """Sampling with a seed: the same text every time. The noise is the position's, so the text does not
        depend on the drafts, but the real model's logits do, very slightly, on how tokens are batched; so such
        a request drafts exactly as the last one did: from the prior and the calibration, learning nothing."""
        return self.options.temperature > 0 and self.options.seed is not None

    def _learn(self, generation: Generation) -> None:
        """Fold the rounds' real costs into the verify costs, and keep what was learned for the next request."""
        if not self.learning or self.options.draft_length is not None or self._reproducible():
            return
        for r in generation.stats.rounds:
            if not r.opening and r.origin != "model":  # a draft model's rounds include its own steps
                self.costs.observe(len(r.drafted) + 1, r.seconds)
        self.verify_seconds = self.costs.costs()
        self.policy.verify_seconds = list(self.verify_seconds)
        self.learned.save({"acceptance": self.policy.state(), "costs": self.costs.state()})

    def _parts(self):
        o = self.options
        acceptance = SamplingAcceptance(o.temperature, o.top_p, o.seed) if o.temperature > 0 else GreedyAcceptance()
        if not o.speculate:
            return acceptance, None, None
        if o.draft_length is not None:
            policy = FixedDraftLength(o.draft_length)
        elif self._reproducible():
            policy = AdaptiveDraftLength(self.calibrated, self.draft_step_seconds)
        elif self.learning:
            policy = self.policy
        else:  # fixed estimates: every request starts from them, whatever came before it
            policy = copy.deepcopy(self.policy)
        drafter = PromptLookupDrafter(has_newline=self._has_newline if hasattr(self.backend, "token_bytes") else None)
        if self.draft_backend is not None:
            model = DraftModelDrafter(self.draft_backend, policy, acceptance)
            drafter = CombinedDrafter(drafter, model, policy)
        return acceptance, drafter, policy

    def _has_newline(self, token: int) -> bool:
        # Asked for every prompt token of every request: the vocabulary's answers are kept, not asked of llama.cpp.
        known = self._newlines.get(token)
        if known is None:
            known = self._newlines[token] = b"\n" in self.backend.token_bytes(token)
        return known

    def decode(
        self,
        prompt: Sequence[int],
        *,
        stop: StopCondition | None = None,
        on_tokens: TokenCallback | None = None,
        max_tokens: int | None = None,
        opening_draft: int | None = None,
        scores: bool = False,
    ) -> Generation:
        acceptance, drafter, policy = self._parts()
        room = self.backend.n_ctx - len(prompt)
        wanted = next(n for n in (max_tokens, self.options.max_tokens, DEFAULT_MAX_TOKENS) if n is not None)
        if room <= 1:
            raise ValueError(f"the prompt ({len(prompt)} tokens) fills the model's context ({self.backend.n_ctx})")
        generation = generate(
            self.backend,
            prompt,
            acceptance,
            drafter=drafter,
            policy=policy,
            max_tokens=min(wanted, room - self.options.max_draft - 1),
            max_draft=self.options.max_draft,
            opening_draft=self.options.opening_draft if opening_draft is None else opening_draft,
            stop=stop,
            on_tokens=on_tokens,
            scores=scores,
        )
        generation.stats.verify_seconds = list(self.verify_seconds) if self.verify_seconds else None
        self._learn(generation)
        return generation

    def limit(self) -> float:
        costs = self.verify_seconds or calibration.verify_seconds(self.backend)
        return calibration.speedup_limit(costs)


PREFIX_CACHE_MB = 256  # kept prompt states: memory (and, with prompts_on_disk, as much disk)


def open_decoder(
    model: str | None = None,
    draft_model: str | None = None,
    *,
    threads: int | None = None,
    options: DecodeOptions | None = None,
    n_ctx: int | None = None,
    prefix_cache_mb: int = PREFIX_CACHE_MB,
    prompts_on_disk: bool = False,
    gpu_layers: int | None = None,
    on_prepare=None,
    on_calibrate=None,
    verify_seconds=None,
    policy_state=None,
) -> Decoder:
    """Load the target (and draft) model and calibrate: what the CLI, batch mode and the server start with.
    `model`: a name or a GGUF path (None: $EDITSPEC_MODEL, else `coder`); `draft_model` likewise (None:
    $EDITSPEC_DRAFT_MODEL, else none); `gpu_layers` go to both; `on_prepare(done, total)` while a named model is
    assembled on first use; `on_calibrate(done, total)` while this machine's verify costs are measured (the first
    run of a model file and thread count). `prompts_on_disk`: kept prompt states go to editspec's cache too (as many
    MB as `prefix_cache_mb` again), where a later process on the same model file finds them."""
    from .backend import LlamaBackend
    from .models import DRAFT_MODEL_ENV, prompt_states_dir, resolve_model_path

    backend = LlamaBackend(
        model,
        n_ctx=n_ctx,
        n_threads=threads,
        prefix_cache_bytes=prefix_cache_mb << 20,
        prefix_cache_dir=prompt_states_dir() if prompts_on_disk else None,
        n_gpu_layers=gpu_layers,
        on_prepare=on_prepare,
    )
    draft = None
    draft_model = draft_model or os.environ.get(DRAFT_MODEL_ENV)
    if draft_model:
        path = resolve_model_path(draft_model, DRAFT_MODEL_ENV, progress=on_prepare)
        draft = LlamaBackend(path, n_ctx=backend.n_ctx, n_threads=threads, n_gpu_layers=gpu_layers)
    return Decoder(
        backend,
        options,
        draft_backend=draft,
        verify_seconds=verify_seconds,
        policy_state=policy_state,
        on_calibrate=on_calibrate,
    )
