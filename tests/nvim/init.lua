-- Minimal config for the headless tests: the plugin from this repository, the server from $EDITSPEC_TEST_PYTHON.
vim.opt.runtimepath:prepend(vim.env.EDITSPEC_PLUGIN)
vim.opt.swapfile = false
vim.opt.undolevels = 1000
require('editspec').setup({
  cmd = { vim.env.EDITSPEC_TEST_PYTHON, '-m', 'lsp' },
  settings = { maxTokens = 300, editIntervalMs = 0 },
})
