-- editspec for Neovim: starts editspec-lsp and gives :EditSpec, :EditSpecCancel and :EditSpecTrace.
-- A rewrite streams in as workspace edits; they are joined into one undo step, so one `u` takes it all back.
local M = {}

M.config = {
  cmd = { 'editspec-lsp' },
  filetypes = { 'python', 'javascript', 'typescript', 'typescriptreact', 'go', 'rust', 'java', 'c', 'cpp', 'cs' },
  root_markers = { 'pyproject.toml', 'package.json', 'go.mod', 'Cargo.toml', '.git' },
  settings = {}, -- passed as initializationOptions: model (coder, tiny or a GGUF path), draftModel, threads, gpuLayers, temperature, maxTokens, streaming, presets, ...
}

-- Per buffer: the rewrite running there (its progress token and how many edits it has streamed).
M.running = {}
M.last_result = {}

-- Neovim 0.11 made request/notify methods (client:request); 0.10 has them as fields (client.request).
local function call(client, method, ...)
  if vim.fn.has('nvim-0.11') == 1 then
    return client[method](client, ...)
  end
  return client[method](...)
end

local function client_for(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = 'editspec' })[1]
end

-- Join every edit of a running rewrite to the previous one: the whole rewrite is one undo step.
local function apply_edit(err, params, ctx)
  local default = vim.lsp.handlers['workspace/applyEdit']
  local bufnr = params and params.edit and M.buffer_of(params.edit)
  local state = bufnr and M.running[bufnr]
  if not state then
    return default(err, params, ctx)
  end
  if state.edits == 0 then
    state.original = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
  end
  local result
  vim.api.nvim_buf_call(bufnr, function()
    if state.edits > 0 then
      pcall(vim.cmd, 'undojoin')
    end
    result = default(err, params, ctx)
  end)
  state.edits = state.edits + 1
  state.tick = vim.api.nvim_buf_get_changedtick(bufnr)
  return result
end

-- The server stopped (it crashed, or was killed) with rewrites running: their answers will never come. Each buffer
-- goes back to what it was before the rewrite's first edit when nothing else changed it since (in the same undo
-- step); otherwise the message says that `u` takes the half-written function back.
function M.server_stopped(client_id, code, signal)
  for bufnr, state in pairs(M.running) do
    if state.client_id == client_id then
      M.running[bufnr] = nil
      local message = ('the language server stopped during the rewrite (exit code %d, signal %d)'):format(code, signal)
      if state.edits > 0 and vim.api.nvim_buf_is_valid(bufnr) then
        if vim.api.nvim_buf_get_changedtick(bufnr) == state.tick then
          vim.api.nvim_buf_call(bufnr, function()
            pcall(vim.cmd, 'undojoin')
            vim.api.nvim_buf_set_lines(bufnr, 0, -1, true, state.original)
          end)
          message = message .. '; the function is back as it was'
        else
          message = message .. '; it stopped half-way through the function: u takes it back'
        end
      end
      M.last_result[bufnr] = { error = message }
      vim.notify('editspec: ' .. message, vim.log.levels.ERROR)
    end
  end
end

function M.buffer_of(edit)
  local uri = edit.documentChanges and edit.documentChanges[1] and edit.documentChanges[1].textDocument.uri
  if not uri and edit.changes then
    uri = next(edit.changes)
  end
  return uri and vim.uri_to_bufnr(uri)
end

local function start(bufnr)
  local root = vim.fs.root(bufnr, M.config.root_markers) or vim.fn.getcwd()
  return vim.lsp.start({
    name = 'editspec',
    cmd = M.config.cmd,
    root_dir = root,
    init_options = M.config.settings,
    handlers = { ['workspace/applyEdit'] = apply_edit },
    on_exit = function(code, signal, client_id)
      vim.schedule(function() M.server_stopped(client_id, code, signal) end)
    end,
  }, { bufnr = bufnr })
end

local function cursor_position(client, bufnr)
  local cursor = vim.api.nvim_win_get_cursor(0)
  local line = vim.api.nvim_buf_get_lines(bufnr, cursor[1] - 1, cursor[1], true)[1]
  return { line = cursor[1] - 1, character = vim.str_utfindex(line, client.offset_encoding, cursor[2]) }
end

-- Asking for code actions lets the server read the prompt ahead while the user types the instruction.
local function read_ahead(bufnr)
  local client = client_for(bufnr)
  if not client then
    return
  end
  local at = cursor_position(client, bufnr)
  call(client, 'request', 'textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = { start = at, ['end'] = at },
    context = { diagnostics = {}, only = { 'refactor.rewrite' } },
  }, function() end, bufnr)
end

function M.rewrite(instruction, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not instruction or vim.trim(instruction) == '' then
    read_ahead(bufnr)
    vim.ui.input({ prompt = 'editspec instruction: ' }, function(text)
      if text and vim.trim(text) ~= '' then
        M.rewrite(text, bufnr)
      end
    end)
    return
  end
  local client = client_for(bufnr)
  if not client then
    vim.notify('editspec: the language server is not running for this buffer', vim.log.levels.ERROR)
    return
  end
  if M.running[bufnr] then
    vim.notify('editspec: a rewrite is already running here (:EditSpecCancel stops it)', vim.log.levels.WARN)
    return
  end
  local token = 'editspec-' .. tostring(vim.uv.hrtime())
  M.running[bufnr] = { token = token, edits = 0, client_id = client.id }
  local args = {
    uri = vim.uri_from_bufnr(bufnr),
    position = cursor_position(client, bufnr),
    instruction = instruction,
    workDoneToken = token,
  }
  call(client, 'request', 'workspace/executeCommand', { command = 'editspec.rewrite', arguments = { args } },
    function(err, result)
      M.running[bufnr] = nil
      M.last_result[bufnr] = err and { error = err.message } or result
      if err then
        vim.notify('editspec: ' .. err.message, vim.log.levels.ERROR)
      elseif result and not result.applied then
        vim.notify('editspec: not applied (' .. (result.reason or '?') .. ')', vim.log.levels.WARN)
      end
    end, bufnr)
end

function M.cancel(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  local state = M.running[bufnr]
  if not (client and state) then
    vim.notify('editspec: no rewrite is running in this buffer', vim.log.levels.INFO)
    return
  end
  call(client, 'notify', 'window/workDoneProgress/cancel', { token = state.token })
end

function M.trace(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then
    return vim.notify('editspec: the language server is not running for this buffer', vim.log.levels.ERROR)
  end
  call(client, 'request', 'workspace/executeCommand',
    { command = 'editspec.trace', arguments = { vim.uri_from_bufnr(bufnr) } }, function(err, result)
      if err then
        return vim.notify('editspec: ' .. err.message, vim.log.levels.ERROR)
      end
      local path = vim.fn.tempname() .. '-editspec-trace.html'
      vim.fn.writefile(vim.split(result.html, '\n'), path)
      M.last_trace = path
      vim.notify('editspec: trace written to ' .. path)
    end, bufnr)
end

-- Change settings while the server runs (the keys of setup's `settings`; vim.NIL puts a setting's default back).
-- They go to every running editspec server; it loads the model again only for model, draftModel, threads or
-- gpuLayers. Servers started later get them as initializationOptions.
function M.configure(settings)
  M.config.settings = vim.tbl_extend('force', M.config.settings, settings or {})
  for _, client in ipairs(vim.lsp.get_clients({ name = 'editspec' })) do
    call(client, 'notify', 'workspace/didChangeConfiguration', { settings = { editspec = settings or {} } })
  end
end

function M.setup(opts)
  if vim.fn.has('nvim-0.11') ~= 1 then
    vim.notify('editspec needs Neovim 0.11 or newer', vim.log.levels.ERROR)
    return
  end
  local rest = vim.deepcopy(opts or {})
  rest.settings = nil -- settings are replaced key by key (a list such as presets whole), not merged deeply
  M.config = vim.tbl_deep_extend('force', M.config, rest)
  M.configure((opts or {}).settings) -- setup() again (a reloaded config) changes the running servers' settings too
  local group = vim.api.nvim_create_augroup('editspec', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.config.filetypes,
    callback = function(ev) start(ev.buf) end,
  })
  if vim.tbl_contains(M.config.filetypes, vim.bo.filetype) then
    start(vim.api.nvim_get_current_buf())
  end
  vim.api.nvim_create_user_command('EditSpec', function(c) M.rewrite(c.args) end,
    { nargs = '*', desc = 'Rewrite the function under the cursor by an instruction' })
  vim.api.nvim_create_user_command('EditSpecCancel', function() M.cancel() end,
    { desc = 'Stop the running rewrite and put the function back' })
  vim.api.nvim_create_user_command('EditSpecTrace', function() M.trace() end,
    { desc = "Write the last rewrite's speculation trace as HTML" })
end

return M
