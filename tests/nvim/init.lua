-- Minimal config for the headless tests: the plugin from this repository, the server from $EDITSPEC_TEST_PYTHON.
vim.opt.runtimepath:prepend(vim.env.EDITSPEC_PLUGIN)
vim.opt.swapfile = false
vim.opt.undolevels = 1000
require('editspec').setup({
  -- the scripted model (tests.scripted_lsp) when the test names it: its answer is known to the character
  cmd = { vim.env.EDITSPEC_TEST_PYTHON, '-m', vim.env.EDITSPEC_SERVER_MODULE or 'lsp' },
  settings = { maxTokens = 1000, editIntervalMs = 0 },
})
