-- editspec for Neovim: starts editspec-lsp and gives :EditSpec, :EditSpecCancel and :EditSpecTrace.
-- A rewrite streams in as workspace edits; they are joined into one undo step, so one `u` takes it all back.
local M = {}

M.config = {
  cmd = { 'editspec-lsp' },
  filetypes = {
    'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact', 'go', 'rust', 'java', 'c', 'cpp', 'cs',
    'ruby', 'php', 'kotlin', 'lua', 'swift', 'sh', 'bash',
  },
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

-- Where two lists of lines differ, by their common start and end: start, end in a, end in b (0-based, end
-- exclusive).
function M.changed_span(a, b)
  local start, shorter = 0, math.min(#a, #b)
  while start < shorter and a[start + 1] == b[start + 1] do
    start = start + 1
  end
  local tail = 0
  while tail < shorter - start and a[#a - tail] == b[#b - tail] do
    tail = tail + 1
  end
  return start, #a - tail, #b - tail
end

local function slice(lines, from, to) -- lines[from, to), 0-based
  return vim.list_slice(lines, from + 1, to)
end

-- The buffer without a rewrite's edits but with everything else done to it (as the VS Code extension's
-- withoutRewrite, by lines): `base` is that so far, `ours` the lines after the rewrite's latest edit, `now` the lines
-- as they are. What changed from `ours` to `now` was done by the user: it is carried over to `base` when it lies on
-- lines the rewrite did not change, not even next to them; nil otherwise (the two cannot be told apart).
function M.without_rewrite(base, ours, now)
  if vim.deep_equal(base, ours) then
    return now
  end
  local from, _, ours_end = M.changed_span(base, ours)
  local a, b, c = M.changed_span(ours, now)
  local shift = #base - #ours
  if b < from then
    shift = 0
  elseif a <= ours_end then
    return nil
  end
  local result = slice(base, 0, a + shift)
  vim.list_extend(result, slice(now, a, c))
  return vim.list_extend(result, slice(base, b + shift, #base))
end

-- The buffer's lines without the rewrite's edits, given its lines now (nil when that cannot be told).
local function without_edits(state, now)
  if state.tangled then
    return nil
  elseif state.ours == nil then -- none of its edits went in yet
    return now
  elseif vim.deep_equal(now, state.ours) then
    return state.base
  end
  local base = M.without_rewrite(state.base, state.ours, now)
  state.tangled = base == nil
  return base
end

-- Join every edit of a running rewrite to the previous one: the whole rewrite is one undo step. Keep the buffer as it
-- would be without the rewrite's edits (what the user types elsewhere meanwhile included), to put it back should
-- the server stop. A rewrite's edit for a buffer unloaded meanwhile (:bdelete) is refused: applying it would load
-- the file again, hidden, with half a rewrite in it.
function M.apply_edit(err, params, ctx)
  local default = vim.lsp.handlers['workspace/applyEdit']
  local bufnr = params and params.edit and M.buffer_of(params.edit)
  local state = bufnr and M.running[bufnr]
  if not state then
    return default(err, params, ctx)
  elseif not vim.api.nvim_buf_is_loaded(bufnr) then
    return { applied = false, failureReason = 'the buffer was closed' }
  end
  local before = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
  local base = without_edits(state, before)
  local result
  vim.api.nvim_buf_call(bufnr, function()
    if state.edits > 0 then
      pcall(vim.cmd, 'undojoin')
    end
    result = default(err, params, ctx)
  end)
  -- An edit that changed nothing (made for an older version of the buffer, which Neovim leaves as it is) is not one
  -- of the rewrite's: the next still opens the rewrite's undo step, and `base` and `ours` stay the pair they were.
  local after = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
  if not vim.deep_equal(after, before) then
    state.base, state.ours, state.edits = base, after, state.edits + 1
  end
  return result
end

-- The server stopped (it crashed, or was killed) with rewrites running: their answers will never come. Each buffer
-- loses the rewrite's edits and keeps everything else (what the user typed elsewhere meanwhile), in the rewrite's
-- undo step when nothing came after its last edit; when the user changed the lines the rewrite changed, the two
-- cannot be told apart, and the message says that `u` takes the half-written function back.
function M.server_stopped(client_id, code, signal)
  for bufnr, state in pairs(M.running) do
    if state.client_id == client_id then
      M.running[bufnr] = nil
      local message = ('the language server stopped during the rewrite (exit code %d, signal %d)'):format(code, signal)
      if state.edits > 0 and vim.api.nvim_buf_is_loaded(bufnr) then -- (an unloaded buffer kept none of it)
        local now = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
        local base = without_edits(state, now)
        if base then
          local from, to, base_to = M.changed_span(now, base)
          vim.api.nvim_buf_call(bufnr, function()
            if vim.deep_equal(now, state.ours) then
              pcall(vim.cmd, 'undojoin')
            end
            vim.api.nvim_buf_set_lines(bufnr, from, to, true, slice(base, from, base_to))
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
    -- Every change at once, in order: with Neovim's 150 ms wait the server got the user's typing and its own edit
    -- merged into one change, could not tell its edit from the typing, and waited 10 s for it (typing above the
    -- function while it streamed stopped the rewrite, "the editor applied an edit but never sent the changed
    -- document"). The server only keeps the text: a change is cheap for it.
    flags = { debounce_text_changes = 0 },
    handlers = { ['workspace/applyEdit'] = M.apply_edit },
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
