"""`python tests/paced_lsp.py`: editspec's language server (what `python -m lsp` runs, the real model and all)
with a pause of $EDITSPEC_PACE seconds (0.04 unless set) after each round of the answer, for the real VS Code
test. Its steps that cancel or kill a rewrite half-way need one still running when the key is pressed, and
`tiny` on a fast machine could finish first (CI saw it: a 0.9 s answer done while the driver typed a line, so
the kill found no rewrite to put back). What the model writes is unchanged, and so is what the server learns of
its rounds' costs: the pause comes in the round's callback, after the round's time is taken."""

import os
import time

from editspec import decoding
from lsp.server import main

PACE = float(os.environ.get("EDITSPEC_PACE", "0.04"))
_generate = decoding.generate


def paced_generate(*args, on_tokens=None, **kwargs):
    def paced(tokens, rnd):
        time.sleep(PACE)
        return on_tokens(tokens, rnd) if on_tokens is not None else None

    return _generate(*args, on_tokens=paced, **kwargs)


decoding.generate = paced_generate
main()
