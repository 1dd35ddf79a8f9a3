"""Edit prompts in the model's own chat template, and the stop at the closing code fence.

Layout: what repeats between requests comes first (the system prompt, then the file context, the same for
every function of a file), what changes comes last (the function, then the instruction), so a kept KV-cache
prefix serves the next request: another function of the file re-reads the function and the instruction, the
same function with another instruction only the instruction. The function comes before the instruction
because an editor knows it first: everything but the instruction is read ahead while the user types it.
The assistant's turn is opened with a code fence: a tiny model then writes code, not an explanation.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from jinja2.sandbox import ImmutableSandboxedEnvironment

SYSTEM_PROMPT = (
    "You are a precise code editor. Rewrite the code the user gives you as the instruction says. "
    "Reply with the complete rewritten code in one fenced code block and nothing else."
)
# Without a last sentence "Keep everything the instruction does not ask you to change exactly as it was.":
# on 49 CanItEdit problems with the coder model, 14 passed against 13 (4-tensor_operations gained, none lost).

# ChatML, used when a GGUF carries no template of its own.
FALLBACK_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
FENCE = "```"


def fence_for(code: str) -> str:
    """The code fence for a piece of code: three backticks, or one more than the longest run of backticks in it
    (Markdown's rule), so that the code's own fences (a Rust doc comment's example, a docstring's Markdown)
    neither close the block the model is shown nor stop its answer halfway."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    return "`" * max(len(FENCE), longest + 1)


def edit_messages(
    code: str,
    instruction: str,
    language: str = "python",
    context: str = "",
    scope: str = "",
    name: str = "",
    fence: str = FENCE,
    shares_lines: bool = False,
) -> list[dict]:
    """`shares_lines`: the code holds other definitions on the lines of `name`'s (see locate.sharing_lines), which
    the answer must keep."""
    parts = []
    if context:
        # A list, not a code block: shown as code, a model tends to write the file's outline back first.
        listed = "\n".join(f"- `{line.strip()}`" for line in context.splitlines() if line.strip())
        parts.append(f"The rest of the file has, among others:\n{listed}\n")
    inside = f" (it is inside `{scope.strip()}`)" if scope.strip() else ""
    parts.append(f"Code to edit{inside}:\n{fence}{language}\n{code.rstrip()}\n{fence}\n")
    parts.append(f"Instruction: {instruction.strip()}")
    if shares_lines and name:
        parts.append(f"Write the complete edited code: `{name}` edited, everything else in it exactly as it is.")
    else:
        only = f" of `{name}` and nothing else" if name else ""
        parts.append(f"Write the complete edited code{only}.")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(parts)}]


def whole_file_messages(before: str, instruction: str) -> list[dict]:
    """The benchmarks' baseline, what a plain llama-cpp-python user would send: the instruction and the whole
    file (the same system prompt)."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"{instruction}\n\n{FENCE}python\n{before.rstrip()}\n{FENCE}"},
    ]


@functools.lru_cache(maxsize=8)
def _compiled(template: str):
    """Compiling a chat template takes milliseconds: once per template, not once per request."""
    return ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(template)


def render_chat(template: str | None, messages: Sequence[dict], bos: str = "", eos: str = "") -> str:
    return _compiled(template or FALLBACK_TEMPLATE).render(
        messages=list(messages), add_generation_prompt=True, bos_token=bos, eos_token=eos
    )


USER_SLOT = "\ue000editspec\ue000"  # stands for the user's message while the template is rendered


def _edit_parts(
    backend, code: str, instruction: str, language: str = "python", *args, fence: str | None = None, **kwargs
) -> tuple[str, str, str]:
    """The edit prompt in three parts: the template's text before the user's message, the message, and the
    template's text after it (with the opened code fence). A template that does not show the message once, as it
    is, gives the whole prompt as the first part. Arguments after `language`: `edit_messages`'s (context, scope,
    name)."""
    fence = fence or fence_for(code)
    messages = edit_messages(code, instruction, language, *args, fence=fence, **kwargs)
    user = messages[-1]["content"]
    parts = f"{_render(backend, [*messages[:-1], dict(messages[-1], content=USER_SLOT)])}{fence}{language}\n"
    if parts.count(USER_SLOT) != 1:
        return f"{_render(backend, messages)}{fence}{language}\n", "", ""
    before, after = parts.split(USER_SLOT)
    return before, user, after


def _render(backend, messages: Sequence[dict]) -> str:
    """The chat in the model's template, its turn opened."""
    bos = backend.token_text(backend.bos_token) if backend.bos_token >= 0 else ""
    eos = backend.token_text(backend.eos_token) if backend.eos_token >= 0 else ""
    return render_chat(backend.chat_template(), messages, bos, eos)


def edit_prompt(backend, code: str, instruction: str, *args, **kwargs) -> str:
    """The whole prompt text, ending in the opened code fence the answer continues: `fence_for(code)` unless
    `fence` is given (the answer's stop and split must use the same). Further arguments: `edit_messages`'s."""
    return "".join(_edit_parts(backend, code, instruction, *args, **kwargs))


def edit_prompt_tokens(backend, code: str, instruction: str, *args, **kwargs) -> list[int]:
    """`edit_prompt`'s tokens (the same arguments), with the user's message (their code, file context and
    instruction) read as plain text: code that holds a chat template's control text (`<|im_end|>` in a string)
    must not end the message or open another turn. The template's own parts are read with their control tokens.
    For every other text the same tokens as reading the whole prompt at once (the template's parts and the message
    are split at control tokens either way)."""
    before, user, after = _edit_parts(backend, code, instruction, *args, **kwargs)
    return backend.tokenize(before) + backend.tokenize(user, parse_special=False) + backend.tokenize(after)


MAX_OPENING = 48  # tokens: an opening that long is past the first line of any sensible signature
# Tokens the opening verifies at least, past a short first line too. Within the prompt's batch a drafted token costs
# about a quarter of a plain step here (7-8 ms against 29), less than in any verify pass, and a request that starts
# with no lead over plain decoding drafts cautiously until its copies have won one. Replayed on the coder's
# CanItEdit answers at this machine's verify costs (the opening charged as a pass of its own, as the benchmark
# does), at least 16 against the first line alone: whole-file answers 1.835x -> 1.868x plain (geometric mean),
# the quality benchmark's rewrites 1.621x -> 1.655x; 12, or whole lines up to 24 or 32, did less; 32 as well on
# average, with a lower lowest answer (0.926x against 0.955x).
LEAST_OPENING = 16


def opening_length(backend, code: str) -> int:
    """How much of the opening copy (the code's start, which the prompt's end points at) to verify within the
    prefill: the code's first line and the token after it, so that line is out with the prompt and an editor
    can show it, and at least LEAST_OPENING tokens. Much longer would be verified at a guess: the lines after a
    signature are where edits begin."""
    first = next((line for line in code.splitlines() if line.strip()), "")
    return min(MAX_OPENING, max(LEAST_OPENING, len(backend.tokenize(first.strip() + "\n")) + 1))


def chat_prompt(backend, user_text: str) -> str:
    """A plain one-turn chat prompt (the benchmark's "nothing to copy" case)."""
    return render_chat(backend.chat_template(), [{"role": "user", "content": user_text}])


# A line of backticks alone: how a model closes a block it was shown with a longer fence, more often than not
# (asked with four, the coder model closes with three). A line of the code itself is never one such at the start
# of a line unless in a string that starts further left, and an answer cut there does not parse: refused, never
# written.
BARE_FENCE = re.compile(r"(?m)^`{3,}[ \t]*$")
BARE_FENCE_LINE = re.compile(rb"(?:^|\n)`{3,}[ \t]*\r?\n")


# The closing fence counts where Markdown's does: at the start of a line, indented by at most three spaces. A doc
# comment's own example the model adds (`/// ```` in Rust, ` * ```` in JSDoc, an indented docstring's Markdown)
# is code, not the answer's end: cut there, the rewrite held a comment and no code, and was refused.
MAX_FENCE_INDENT = 3


def _line_fence(fence: bytes) -> re.Pattern[bytes]:
    return re.compile(rb"\n[ \t]{0,%d}" % MAX_FENCE_INDENT + re.escape(fence))


class FenceStop:
    """A stop condition: true once the generated text has the closing code fence (`fence`: the prompt's) at the
    start of a line (see MAX_FENCE_INDENT), or, for a fence longer than three backticks, a whole line of backticks
    alone (see BARE_FENCE)."""

    def __init__(self, backend, fence: str = FENCE):
        self.backend = backend
        self.fence = fence.encode()
        self.line_fence = _line_fence(self.fence)
        self.bare = len(fence) > len(FENCE)
        self.text = b"\n"  # the answer starts a line (the opening fence's line is the prompt's)
        self.closed = False  # the fence has been written

    def __call__(self, output: Sequence[int]) -> bool:
        piece = self.backend.token_bytes(output[-1])
        self.text += piece
        tail = self.text[-(len(piece) + len(self.fence) + MAX_FENCE_INDENT + 1) :]
        self.closed = self.closed or self.line_fence.search(tail) is not None
        if self.bare and not self.closed and b"\n" in piece:
            line_start = self.text.rfind(b"\n", 0, len(self.text) - len(piece))
            self.closed = BARE_FENCE_LINE.search(self.text, max(line_start, 0)) is not None
        return self.closed

    def tokens_before_stop(self, tokens: Sequence[int]) -> int:
        """How many of `tokens` the output can take before one closes the fence. A draft that copies the code's
        last line runs on past its closing fence into the prompt's instruction; verifying that costs a pass over
        tokens the stop would throw away. The closing token itself is left to the target (it comes free)."""
        keep = len(self.fence) + MAX_FENCE_INDENT
        text = self.text[-keep:]
        for i, tok in enumerate(tokens):
            text += self.backend.token_bytes(tok)
            if self.line_fence.search(text) is not None:
                return i
            text = text[-keep:]
        return len(tokens)


def code_before_fence(text: str, fence: str = FENCE) -> str:
    """The answer's code: everything before the closing fence at a line's start (see MAX_FENCE_INDENT; for a longer
    fence than three backticks, before a line of backticks alone too). An answer the model closed inside a line
    only (the stop did not see it) is kept whole: it does not parse, and is refused."""
    closing = _line_fence(fence.encode()).search(b"\n" + text.encode())
    code = text.encode()[: closing.start()].decode() if closing else text
    if len(fence) > len(FENCE):
        bare = BARE_FENCE.search(code)
        code = code[: bare.start()] if bare else code
    return code
