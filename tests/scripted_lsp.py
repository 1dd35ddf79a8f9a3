"""`python -m tests.scripted_lsp`: editspec-lsp with the scripted model (tests/scripted.py) in place of a GGUF."""

from lsp import server
from tests.scripted import scripted_decoder


def open_decoder(model=None, draft_model=None, *, options=None, **_):
    return scripted_decoder(options)


server.open_decoder = open_decoder
server.main()
