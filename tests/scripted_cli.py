"""`python -m tests.scripted_cli ...`: the editspec CLI with the scripted model (tests/scripted.py)."""

import editspec.decoding
from editspec.cli import main
from tests.scripted import scripted_decoder


def open_decoder(model=None, draft_model=None, *, options=None, **_):
    return scripted_decoder(options)


editspec.decoding.open_decoder = open_decoder  # in a worker process too: it imports this module, without main()
if __name__ == "__main__":
    main()
