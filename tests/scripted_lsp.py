"""`python -m tests.scripted_lsp`: editspec-lsp with the scripted model (tests/scripted.py) in place of a GGUF.
What the server asks the loader for is written to stderr, so that tests can see settings reach it."""

import json
import sys

from lsp import server
from tests.scripted import scripted_decoder


def open_decoder(model=None, draft_model=None, *, options=None, **kwargs):
    wanted = {k: v for k, v in kwargs.items() if k not in ("on_prepare", "on_calibrate")}  # callbacks: not settings
    wanted.update(model=model, draft_model=draft_model, max_tokens=options.max_tokens if options else None)
    print("scripted open_decoder: " + json.dumps(wanted, sort_keys=True), file=sys.stderr, flush=True)
    return scripted_decoder(options)


server.open_decoder = open_decoder
server.main()
