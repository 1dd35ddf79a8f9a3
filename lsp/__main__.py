from lsp.server import main

main()
