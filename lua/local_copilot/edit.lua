-- Instruction edits on screen: the selection, what to change, and the answer streamed in as
-- a diff against the selection (removed lines marked, added lines as virtual lines in the
-- buffer's highlighting) with progress, until accept, retry, a follow-up or cancel. Nothing
-- in the buffer changes before accept, which replaces the range in one undo step.
-- The Python host asks the model (python/local_copilot/instruct/) and sends updates
-- (`_update`, through updates.lua's 'edit' update); this module owns every preview's state.
local api = vim.api
local config = require('local_copilot.config')
local host = require('local_copilot.host')
local sessions = require('local_copilot.sessions')
local syntax = require('local_copilot.syntax')

local M = {}

M.ns = api.nvim_create_namespace('local_copilot_edit')

-- id -> edit: { id, buf, mark (extmark at the range's first line), original (lines),
--   before, after, path, ft, instruction, history = { {instruction, answer}, ... },
--   attempt, state ('waiting'|'streaming'|'done'), lines, tokens, elapsed_ms, truncated,
--   message, started (hrtime), first_line_ms, marks = { extmark ids } }
M.edits = {}
-- (per buffer, in its session (sessions.lua): `edit_failed`, the last edit that failed there,
-- which edit_retry() asks again; `edit_keys`, lhs -> the buffer-local mapping it had while a
-- preview maps keys there)
local next_id = 0

local function opts() return config.get('edit') end

local function notify(msg, level)
  vim.schedule(function()
    require('local_copilot.message').show('local-copilot: ' .. msg, level or vim.log.levels.ERROR, false)
  end)
end

local function now_ms(e) return (vim.uv.hrtime() - e.started) / 1e6 end

-- The range's first row (0-based) as it is now: lines added or removed above it move it.
local function start_row(e)
  local pos = api.nvim_buf_get_extmark_by_id(e.buf, M.ns, e.mark, {})
  return pos[1]
end

local function edits_in(buf)
  local out = {}
  for _, e in pairs(M.edits) do
    if e.buf == buf then out[#out + 1] = e end
  end
  table.sort(out, function(a, b) return a.id < b.id end)
  return out
end

-- The edit the user means in the current buffer: the one whose range holds the cursor, else
-- the newest.
local function current(buf)
  buf = buf or api.nvim_get_current_buf()
  local list = edits_in(buf)
  if #list == 0 then return nil end
  local row = api.nvim_win_get_cursor(0)[1] - 1
  for _, e in ipairs(list) do
    local s = start_row(e)
    if row >= s and row < s + math.max(#e.original, 1) then return e end
  end
  return list[#list]
end

-- -- highlighting ---------------------------------------------------------------------

-- One added line as virt_lines chunks: its code's highlight over the added-line background.
local function chunks(line, groups, ts)
  local added = 'LocalCopilotEditAdded'
  if line == '' then return { { ' ', added } } end
  if not groups or line:find('\t', 1, true) then return { { syntax.expand_tabs(line, 0, ts), added } } end
  return syntax.chunks(line, groups, added)
end

-- -- drawing ----------------------------------------------------------------------------

local function undraw(e)
  if api.nvim_buf_is_valid(e.buf) then
    for _, id in ipairs(e.marks or {}) do pcall(api.nvim_buf_del_extmark, e.buf, M.ns, id) end
  end
  e.marks = {}
end

local function progress(e)
  local secs = ('%.1f s'):format((e.state == 'done' and e.elapsed_ms or now_ms(e)) / 1000)
  local o = opts()
  local keys = {}
  if e.state == 'done' then
    if type(o.accept_key) == 'string' then keys[#keys + 1] = o.accept_key .. ' accept' end
    keys[#keys + 1] = ':LocalCopilotEdit follow up'
  end
  if type(o.cancel_key) == 'string' then keys[#keys + 1] = o.cancel_key .. ' cancel' end
  local what
  if e.state == 'waiting' then
    -- (a message: what it waits for, e.g. the server loading the entry's model)
    what = 'edit: ' .. (e.message or 'waiting for the model')
  elseif e.state == 'streaming' then
    what = ('edit: generating, %d tokens'):format(e.tokens or 0)
  else
    what = ('edit ready: %d tokens'):format(e.tokens or 0)
    if e.truncated then what = what .. ' (' .. (e.message or 'cut at the token limit') .. ')' end
  end
  return ('[local-copilot] %s, %s; %s'):format(what, secs, table.concat(keys, ', '))
end

local function draw(e)
  undraw(e)
  local buf = e.buf
  if not api.nvim_buf_is_valid(buf) then return end
  local s = start_row(e)
  local nlines = api.nvim_buf_line_count(buf)
  local orig, new = e.original, e.lines or {}
  local ts = vim.bo[buf].tabstop
  local marks = e.marks
  local function mark(row, o)
    row = math.max(0, math.min(row, nlines - 1))
    local ok, id = pcall(api.nvim_buf_set_extmark, buf, M.ns, row, 0, o)
    if ok then marks[#marks + 1] = id end
  end
  if #new > 0 then
    local groups = syntax.groups(new, e.ft) or {}
    local a = table.concat(orig, '\n') .. '\n'
    local b = table.concat(new, '\n') .. '\n'
    local hunks = vim.diff(a, b, { result_type = 'indices', algorithm = 'histogram' }) --[[@as integer[][] ]]
    for i, h in ipairs(hunks) do
      local a_start, a_count, b_start, b_count = h[1], h[2], h[3], h[4]
      -- while the answer streams, the selection's tail it has not reached yet is not removed
      -- (a hunk that adds nothing sits after line b_start of the answer)
      local b_end = b_count > 0 and b_start + b_count - 1 or b_start
      local pending = e.state ~= 'done' and i == #hunks and b_end >= #new and a_start + a_count - 1 >= #orig
      if not pending then
        for r = a_start, a_start + a_count - 1 do
          mark(s + r - 1, { line_hl_group = 'LocalCopilotEditRemoved', priority = 200 })
        end
      end
      if b_count > 0 then
        local vl = {}
        for r = b_start, b_start + b_count - 1 do vl[#vl + 1] = chunks(new[r], groups[r], ts) end
        if a_count > 0 and not pending then -- below the lines they replace
          mark(s + a_start + a_count - 2, { virt_lines = vl })
        elseif a_count == 0 and a_start == 0 then -- before the first line
          mark(s, { virt_lines = vl, virt_lines_above = true })
        elseif a_count == 0 then -- after line a_start
          mark(s + a_start - 1, { virt_lines = vl })
        else -- streaming: before the part of the selection the answer has not reached yet
          mark(s + a_start - 1, { virt_lines = vl, virt_lines_above = true })
        end
      end
    end
  end
  local last = s + math.max(#orig, 1) - 1
  mark(last, { virt_lines = { { { progress(e), 'LocalCopilotEditInfo' } } } })
  e.info = marks[#marks]
end

-- The seconds on the progress lines of edits in flight go on while the server is silent.
local ticker
local function tick()
  local busy = false
  for _, e in pairs(M.edits) do
    if e.state ~= 'done' and e.info and api.nvim_buf_is_valid(e.buf) then
      busy = true
      local pos = api.nvim_buf_get_extmark_by_id(e.buf, M.ns, e.info, {})
      if pos[1] then
        pcall(api.nvim_buf_set_extmark, e.buf, M.ns, pos[1], 0,
          { id = e.info, virt_lines = { { { progress(e), 'LocalCopilotEditInfo' } } } })
      end
    end
  end
  if not busy and ticker then
    ticker:stop()
    ticker:close()
    ticker = nil
  end
end

local function start_ticker()
  if ticker then return end
  ticker = vim.uv.new_timer()
  ticker:start(250, 250, vim.schedule_wrap(tick))
end

-- -- keys while a preview is shown ------------------------------------------------------

local function map_keys(buf)
  local s = sessions.get(buf)
  if s.edit_keys then return end
  local o = opts()
  local saved = {}
  local function map(lhs, fn, desc)
    if type(lhs) ~= 'string' or lhs == '' then return end
    local prev = vim.fn.maparg(lhs, 'n', false, true)
    saved[lhs] = (prev.buffer == 1) and prev or false
    vim.keymap.set('n', lhs, fn, { buffer = buf, desc = 'local-copilot: ' .. desc, nowait = true })
  end
  map(o.accept_key, function() M.accept() end, 'accept the edit')
  map(o.cancel_key, function() M.cancel() end, 'cancel the edit')
  s.edit_keys = saved
end

local function unmap_keys(buf)
  local s = sessions.peek(buf)
  local saved = s and s.edit_keys
  if not saved then return end
  s.edit_keys = nil
  if not api.nvim_buf_is_valid(buf) then return end
  for lhs, prev in pairs(saved) do
    pcall(vim.keymap.del, 'n', lhs, { buffer = buf })
    -- mapset() restores a buffer-local mapping in the current buffer
    if prev then api.nvim_buf_call(buf, function() vim.fn.mapset('n', false, prev) end) end
  end
end

local function drop(e)
  undraw(e)
  M.edits[e.id] = nil
  if api.nvim_buf_is_valid(e.buf) then pcall(api.nvim_buf_del_extmark, e.buf, M.ns, e.mark) end
  if #edits_in(e.buf) == 0 then unmap_keys(e.buf) end
end

-- -- requests ---------------------------------------------------------------------------

local function spec(e, instruction)
  return {
    path = e.path, ft = e.ft, lines = e.original, before = e.before, after = e.after,
    instruction = instruction or e.instruction, history = e.history, et = e.et, sw = e.sw, ts = e.ts,
  }
end

-- A wiped buffer's edits go (the host stops their requests on the same wipe); its failed
-- edit and saved mappings go with its session.
sessions.on_forget('edit', function(buf)
  for _, e in ipairs(edits_in(buf)) do
    M.edits[e.id] = nil
  end
end)

local function send(e)
  e.state, e.lines, e.tokens, e.elapsed_ms, e.truncated, e.message = 'waiting', {}, 0, nil, false, nil
  e.started, e.first_line_ms = vim.uv.hrtime(), nil
  start_ticker()
  host.send('edit_request', { id = e.id, buf = e.buf, attempt = e.attempt, spec = spec(e) })
  map_keys(e.buf)
  draw(e)
end

-- What an edit of lines line1..line2 (1-based, inclusive) of `buf` sends, less the instruction.
local function new_edit(buf, line1, line2)
  local n = opts().context_lines
  local s, e = line1 - 1, line2
  return {
    buf = buf,
    original = api.nvim_buf_get_lines(buf, s, e, false),
    before = api.nvim_buf_get_lines(buf, math.max(0, s - n), s, false),
    after = api.nvim_buf_get_lines(buf, e, math.min(api.nvim_buf_line_count(buf), e + n), false),
    path = api.nvim_buf_get_name(buf),
    ft = vim.bo[buf].filetype,
    -- the answer's indentation is written the buffer's way (python/local_copilot/indentation.py)
    et = vim.bo[buf].expandtab, sw = vim.bo[buf].shiftwidth, ts = vim.bo[buf].tabstop,
    history = {},
    attempt = 0,
    marks = {},
  }
end

-- Ask the user for an instruction (with the input history), warming the server's cache with
-- the prompt meanwhile. nil when they gave none.
local function ask(e, prompt)
  if opts().warm then host.send('edit_warm', { buf = e.buf, spec = spec(e, '') }) end
  local ok, got = pcall(vim.fn.input, { prompt = prompt, cancelreturn = '' })
  if not ok or not got or vim.trim(got) == '' then return nil end
  return got
end

local function refused(buf)
  local why = require('local_copilot.privacy').reason(buf, api.nvim_buf_get_name(buf))
  if why then notify('not sent: this buffer is never sent (' .. why .. ')') end
  return why ~= nil
end

---@class local_copilot.EditArgs what edit() takes
---@field line1? integer first line of the selection (1-based; the cursor's when absent)
---@field line2? integer last line (line1 when absent)
---@field instruction? string asked for when absent or blank
---@field buf? integer the current buffer when absent or 0

local EDIT_ARGS = { line1 = 'number', line2 = 'number', instruction = 'string', buf = 'number' }

-- One line naming what is wrong with edit()'s argument, or nil.
local function wrong_args(o)
  if type(o) ~= 'table' then
    return ("edit() takes a table such as { line1 = 1, line2 = 3, instruction = 'add types' }; not %s")
      :format(vim.inspect(o))
  end
  local wrong = config.wrong_field(o, EDIT_ARGS)
  return wrong and ('edit: ' .. wrong)
end

---@param o local_copilot.EditArgs
---@return integer|false id the edit's id, or false (a message says why)
function M.edit(o)
  local wrong = wrong_args(o)
  if wrong then
    notify(wrong)
    return false
  end
  local buf = o.buf or api.nvim_get_current_buf()
  if buf == 0 then buf = api.nvim_get_current_buf() end
  if not api.nvim_buf_is_valid(buf) then
    notify(('edit: buf %s is not a buffer'):format(vim.inspect(o.buf)))
    return false
  end
  local count = api.nvim_buf_line_count(buf)
  local line1, line2 = o.line1 or api.nvim_win_get_cursor(0)[1], o.line2 or o.line1 or api.nvim_win_get_cursor(0)[1]
  if line1 > line2 then line1, line2 = line2, line1 end
  if line1 < 1 or line2 > count then
    notify(('no such lines: %d-%d (the buffer has %d)'):format(line1, line2, count))
    return false
  end
  if refused(buf) or not host.ready() then return false end
  local e = new_edit(buf, line1, line2)
  local instruction = o.instruction
  if instruction == nil or vim.trim(instruction) == '' then
    instruction = ask(e, 'Edit lines ' .. line1 .. '-' .. line2 .. ': ')
    if not instruction then return false end
  end
  next_id = next_id + 1
  e.id, e.instruction = next_id, instruction
  e.mark = api.nvim_buf_set_extmark(buf, M.ns, line1 - 1, 0, { right_gravity = false })
  M.edits[e.id] = e
  send(e)
  return e.id
end

-- A follow-up instruction on the answer shown: the model sees its answer and the new
-- instruction; the preview still diffs against the selection, which accept replaces.
---@param instruction? string asked for when absent or blank
---@return boolean
function M.follow_up(instruction)
  if instruction ~= nil and type(instruction) ~= 'string' then
    local got = type(instruction) == 'table' and 'a table' or vim.inspect(instruction)
    notify('edit_follow_up: the instruction must be a string, not ' .. got)
    return false
  end
  local e = current()
  if not e or e.state ~= 'done' then
    notify('no finished edit here to follow up on', vim.log.levels.WARN)
    return false
  end
  -- the round shown goes into the history first: the warm-up's prompt is then the start of
  -- the follow-up's
  e.history[#e.history + 1] = { e.instruction, table.concat(e.lines, '\n') }
  if instruction == nil or vim.trim(instruction) == '' then
    instruction = ask(e, 'Follow up: ')
    if not instruction then
      e.history[#e.history] = nil
      return false
    end
  end
  e.instruction = instruction
  send(e)
  return true
end

-- Whether a finished edit's preview holds the cursor (a follow-up would act on it).
function M.follow_up_possible()
  local e = current()
  if not e or e.state ~= 'done' then return false end
  local s, row = start_row(e), api.nvim_win_get_cursor(0)[1] - 1
  return row >= s and row < s + math.max(#e.original, 1)
end

function M.accept()
  local e = current()
  if not e or e.state ~= 'done' then return false end
  local s = start_row(e)
  local now = api.nvim_buf_get_lines(e.buf, s, s + #e.original, false)
  if not vim.deep_equal(now, e.original) then
    notify('the selected lines changed since the edit was asked; nothing was replaced (retry it)')
    return false
  end
  local ok, err = pcall(api.nvim_buf_set_lines, e.buf, s, s + #e.original, false, e.lines)
  if not ok then -- e.g. 'nomodifiable'
    notify('cannot change this buffer: ' .. tostring(err):gsub('^.-:%d+: ', ''))
    return false
  end
  drop(e)
  return true
end

function M.cancel()
  local e = current()
  if not e then return false end
  if e.state ~= 'done' then host.tell('edit_cancel', { buf = e.buf, id = e.id }) end
  drop(e)
  return true
end

-- Ask again: the edit shown (or the last one that failed in this buffer).
function M.retry()
  local buf = api.nvim_get_current_buf()
  local e = current(buf)
  if not e then
    local s = sessions.peek(buf)
    e = s and s.edit_failed
    if not e or not api.nvim_buf_is_valid(buf) then return false end
    s.edit_failed = nil
    local ok, pos = pcall(api.nvim_buf_get_extmark_by_id, buf, M.ns, e.mark, {})
    if not ok or not pos[1] then return false end
    M.edits[e.id] = e
  end
  e.attempt = (e.attempt or 0) + 1
  send(e)
  return true
end

function M.visible(buf)
  return #edits_in(buf or api.nvim_get_current_buf()) > 0
end

-- Milliseconds from the request to the first previewed line of edit `id` (nil until then).
function M.first_line_ms(id)
  local e = M.edits[id]
  return e and e.first_line_ms
end

-- Called by updates.lua with the host's instruct.runner.EditUpdate.
---@param u local_copilot.EditUpdate
function M._update(u)
  local e = M.edits[u.id]
  if not e or e.buf ~= u.buf then return end
  if u.state == 'error' then
    local valid = api.nvim_buf_is_valid(e.buf)
    local row = valid and start_row(e) or 0
    drop(e)
    if valid then
      -- kept (with a mark of its own for the range) so edit_retry() can ask again
      local s = sessions.get(e.buf)
      local before = s.edit_failed
      if before then pcall(api.nvim_buf_del_extmark, e.buf, M.ns, before.mark) end
      e.mark = api.nvim_buf_set_extmark(e.buf, M.ns, row, 0, { right_gravity = false })
      s.edit_failed = e
    end
    notify(u.message ~= '' and u.message or 'the edit failed')
    return
  end
  e.state, e.tokens, e.elapsed_ms, e.truncated = u.state, u.tokens, u.elapsed_ms, u.truncated
  e.message = u.message ~= '' and u.message or nil
  if u.lines and #u.lines > 0 then
    e.lines = u.lines
    if not e.first_line_ms then e.first_line_ms = now_ms(e) end
  end
  draw(e)
end

return M
