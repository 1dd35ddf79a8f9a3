-- Headless end-to-end test: rewrite, one undo, cancel. Exits 0 on success, 1 with a message on failure.
local editspec = require('editspec')

local function fail(msg)
  io.stderr:write('FAIL: ' .. msg .. '\n')
  vim.cmd('cquit 1')
end

local function text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, true), '\n') .. '\n'
end

local function read(path)
  return table.concat(vim.fn.readfile(path), '\n') .. '\n'
end

local original = read(vim.env.EDITSPEC_FILE)
local expected = read(vim.env.EDITSPEC_EXPECTED)
local progress = {}
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev) table.insert(progress, ev.data.params.value.kind) end,
})
vim.cmd('edit ' .. vim.env.EDITSPEC_FILE)
local buf = vim.api.nvim_get_current_buf()
if not vim.wait(20000, function() return #vim.lsp.get_clients({ bufnr = buf, name = 'editspec' }) > 0 end, 50) then
  fail('the editspec client did not attach')
end

if not vim.wait(30000, function() return vim.tbl_contains(progress, 'end') end, 50) then
  fail('the model did not report ready')
end
progress = {}

-- 1. :EditSpec asks for the instruction (the server reads the prompt ahead meanwhile); the rewrite ends
-- with the server's final text.
vim.api.nvim_win_set_cursor(0, { tonumber(vim.env.EDITSPEC_LINE), 4 })
vim.ui.input = function(_, on_confirm)
  vim.defer_fn(function() on_confirm(vim.env.EDITSPEC_INSTRUCTION) end, 300)
end
vim.cmd('EditSpec')
if not vim.wait(60000, function() return editspec.last_result[buf] ~= nil end, 20) then
  fail('the rewrite did not finish')
end
local result = editspec.last_result[buf]
if not result.applied then fail('not applied: ' .. vim.inspect(result)) end
if not (result.stats.reused_prompt_tokens > 0) then fail('nothing was read ahead: ' .. vim.inspect(result.stats)) end
if text(buf) ~= expected then fail('buffer differs from the expected text:\n' .. text(buf)) end
if not (vim.tbl_contains(progress, 'begin') and vim.tbl_contains(progress, 'end')) then
  fail('no LspProgress begin/end: ' .. vim.inspect(progress))
end

-- 2. One undo restores the original exactly.
vim.cmd('normal! u')
if text(buf) ~= original then fail('one undo did not restore the original:\n' .. text(buf)) end

-- 3. :EditSpecTrace writes the trace page.
editspec.last_result[buf] = nil
editspec.trace(buf)
if not vim.wait(10000, function() return editspec.last_trace ~= nil end, 20) then fail('no trace written') end
if not read(editspec.last_trace):find('class="tok ', 1, true) then fail('the trace page has no tokens') end

-- 4. :EditSpecCancel during a rewrite puts the function back.
local started = false
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    if ev.data.params.value.kind == 'report' and editspec.running[buf] and editspec.running[buf].edits > 0
      and not started then
      started = true
      vim.cmd('EditSpecCancel')
    end
  end,
})
vim.cmd('EditSpec ' .. vim.env.EDITSPEC_INSTRUCTION)
if not vim.wait(60000, function() return editspec.last_result[buf] ~= nil end, 20) then
  fail('the cancelled rewrite did not finish')
end
if not started then fail('the rewrite finished before it could be cancelled') end
if editspec.last_result[buf].reason ~= 'cancelled' then fail('not cancelled: ' .. vim.inspect(editspec.last_result[buf])) end
if text(buf) ~= original then fail('cancel did not restore the original:\n' .. text(buf)) end

-- 5. A setting changed while the server runs takes effect at the next rewrite; vim.NIL puts its default back.
local function rewrite_now()
  editspec.last_result[buf] = nil
  vim.api.nvim_win_set_cursor(0, { tonumber(vim.env.EDITSPEC_LINE), 4 })
  vim.cmd('EditSpec ' .. vim.env.EDITSPEC_INSTRUCTION)
  if not vim.wait(60000, function() return editspec.last_result[buf] ~= nil end, 20) then
    fail('the rewrite did not finish')
  end
  return editspec.last_result[buf]
end
editspec.configure({ maxTokens = 2, editIntervalMs = 0 })
local cut = rewrite_now()
if cut.applied or cut.reason ~= 'refused' then fail('maxTokens = 2 did not cut the answer: ' .. vim.inspect(cut)) end
if text(buf) ~= original then fail('a refused rewrite changed the buffer:\n' .. text(buf)) end
if editspec.config.settings.editIntervalMs ~= 0 then fail('configure() lost another setting') end
editspec.configure({ maxTokens = vim.NIL })
if not rewrite_now().applied then fail('with maxTokens back to its default the rewrite was not applied') end
if text(buf) ~= expected then fail('buffer differs from the expected text:\n' .. text(buf)) end

-- 6. The server dies half-way through a rewrite (the scripted model exits on writing CRASH), while the user looks
-- at another buffer (opened after the first streamed edit, and after typing a line at the end of the file): the
-- function is back as it was all the same, the line typed stays, and the rewrite ends with an error.
vim.cmd('normal! u')
if text(buf) ~= original then fail('undo after step 5 did not restore the original:\n' .. text(buf)) end
editspec.last_result[buf] = nil
vim.cmd('EditSpec ' .. vim.env.EDITSPEC_CRASH)
if not vim.wait(60000, function() return text(buf) ~= original or editspec.last_result[buf] ~= nil end, 5) then
  fail('the rewrite whose server dies never changed the buffer')
end
if editspec.last_result[buf] ~= nil then fail('the rewrite ended before its buffer could be hidden') end
vim.api.nvim_buf_set_lines(buf, -1, -1, true, { '# typed while the rewrite ran' })
vim.cmd('enew')
if vim.api.nvim_get_current_buf() == buf or vim.fn.bufwinnr(buf) ~= -1 then fail('the buffer is still shown') end
if not vim.wait(60000, function() return editspec.last_result[buf] ~= nil end, 20) then
  fail('the rewrite whose server died did not end')
end
vim.cmd('buffer ' .. buf)
local crashed = editspec.last_result[buf]
if not (crashed.error and crashed.error:find('back as it was', 1, true)) then
  fail('not put back after the server died: ' .. vim.inspect(crashed))
end
if text(buf) ~= original .. '# typed while the rewrite ran\n' then
  fail('the buffer is not the original and the typed line after the server died:\n' .. text(buf))
end
if editspec.running[buf] then fail('the rewrite is still marked running') end

-- 7. An edit of a rewrite still on its way when its buffer was closed (:bdelete! sends didClose; the server sends
-- nothing after it) is refused, and does not load the file again.
local closed_file = vim.fs.joinpath(vim.fs.dirname(vim.env.EDITSPEC_FILE), 'closed.py')
vim.fn.writefile({ 'def f():', '    return 1' }, closed_file)
vim.cmd('edit ' .. closed_file)
local closed = vim.api.nvim_get_current_buf()
if not vim.wait(20000, function() return #vim.lsp.get_clients({ bufnr = closed, name = 'editspec' }) > 0 end, 50) then
  fail('the editspec client did not attach to ' .. closed_file)
end
local client_id = vim.lsp.get_clients({ bufnr = closed, name = 'editspec' })[1].id
-- First, an edit made for an older version of the buffer (the user typed meanwhile) while the buffer is open: Neovim
-- leaves the buffer as it is, and the edit is not counted as the rewrite's (its next edit opens the undo step).
editspec.running[closed] = { edits = 0, client_id = client_id }
vim.api.nvim_buf_set_lines(closed, 0, 0, true, { '# typed' })
editspec.apply_edit(nil, { edit = { documentChanges = { {
  textDocument = { uri = vim.uri_from_fname(closed_file), version = 1 },
  edits = { { range = { start = { line = 1, character = 4 }, ['end'] = { line = 1, character = 12 } },
    newText = 'return 2' } } } } } }, { client_id = client_id })
if text(closed) ~= '# typed\ndef f():\n    return 1\n' then fail('an out-of-date edit changed the buffer: ' .. text(closed)) end
if editspec.running[closed].edits ~= 0 or editspec.running[closed].ours ~= nil then
  fail('an edit that changed nothing counted as the rewrite\'s: ' .. vim.inspect(editspec.running[closed]))
end
editspec.running[closed] = { edits = 1, client_id = client_id }
vim.cmd('bdelete! ' .. closed)
local ok, reply = pcall(editspec.apply_edit, nil, { edit = { documentChanges = { {
  textDocument = { uri = vim.uri_from_fname(closed_file), version = 3 },
  edits = { { range = { start = { line = 1, character = 4 }, ['end'] = { line = 1, character = 12 } },
    newText = 'return 2' } } } } } }, { client_id = client_id })
editspec.running[closed] = nil
if not (ok and reply and reply.applied == false) then fail('an edit for a closed buffer was not refused: ' .. vim.inspect(reply)) end
if vim.api.nvim_buf_is_loaded(closed) then fail('the closed buffer was loaded again, with the edit') end

-- 8. Typing elsewhere in the file while a rewrite streams (a line every 40 ms at the top of the buffer, above the
-- function, so that every line typed moves it): the rewrite goes on and ends as it would have, with the typed lines
-- kept.
local typing_file = vim.fs.joinpath(vim.fs.dirname(vim.env.EDITSPEC_FILE), 'typing.py')
vim.fn.writefile(vim.fn.readfile(vim.env.EDITSPEC_FILE), typing_file)
vim.cmd('edit ' .. typing_file)
local typing = vim.api.nvim_get_current_buf()
if not vim.wait(20000, function() return #vim.lsp.get_clients({ bufnr = typing, name = 'editspec' }) > 0 end, 50) then
  fail('the editspec client did not attach to ' .. typing_file)
end
local two_lines = 'scripted: [["def describe", "def summarize"], ["count = len", "n = len"]]'
vim.api.nvim_win_set_cursor(0, { tonumber(vim.env.EDITSPEC_LINE), 4 })
local typed = {}
local timer = vim.uv.new_timer()
timer:start(20, 40, vim.schedule_wrap(function()
  if #typed < 12 and editspec.last_result[typing] == nil then
    table.insert(typed, '# note ' .. #typed)
    vim.api.nvim_buf_set_lines(typing, 0, 0, true, { typed[#typed] })
  end
end))
vim.cmd('EditSpec ' .. two_lines)
if not vim.wait(60000, function() return editspec.last_result[typing] ~= nil end, 20) then
  fail('the rewrite with typing did not finish')
end
timer:stop()
local typed_result = editspec.last_result[typing]
local rev = {}
for i = #typed, 1, -1 do table.insert(rev, typed[i]) end
local want = table.concat(rev, '\n') .. '\n' .. original:gsub('def describe', 'def summarize', 1):gsub('count = len', 'n = len', 1)
if not typed_result.applied then fail('typing elsewhere stopped the rewrite: ' .. vim.inspect(typed_result)) end
if text(typing) ~= want then fail('typing elsewhere: the buffer is not the rewrite and the typed lines:\n' .. text(typing)) end
if #typed < 3 then fail('too few lines typed while the rewrite ran: ' .. #typed) end

vim.cmd('qall!')
