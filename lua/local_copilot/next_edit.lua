-- Next edits on screen: when to ask (a change in Normal mode, leaving Insert mode, an accepted
-- next edit, or next_edit_request()), the edit drawn where it applies, and accepting it.
-- The host answers with a plan (python/local_copilot/next_edit/request.py): the span
-- (row, col)..(end_row, end_col) of the buffer as it was at `tick` is replaced by `text`.
local api = vim.api
local config = require('local_copilot.config')
local recorder = require('local_copilot.edit_recorder')
local host = require('local_copilot.host')
local sessions = require('local_copilot.sessions')
local syntax = require('local_copilot.syntax')

local M = {}

M.ns = api.nvim_create_namespace('local_copilot_next_edit')

-- rows of the buffer sent around the cursor (the formats take their regions from them)
local WINDOW = 150

-- (each buffer's latest request is its session's `next_edit_seq`, sessions.lua)
local state = {
  seq = 0,
  timer = nil,
  current = nil, -- the plan on screen, with `jumped` once the cursor went to it
}

function M.enabled()
  local opts = config.get('next_edit')
  return type(opts) == 'table' and opts.enabled == true
end

local function tell(what) host.tell('next_edit_note', { what = what }) end

function M.visible()
  local cur = state.current
  return cur ~= nil and api.nvim_buf_is_valid(cur.buf)
end

function M.clear()
  local cur = state.current
  state.current = nil
  if cur and api.nvim_buf_is_valid(cur.buf) then api.nvim_buf_clear_namespace(cur.buf, M.ns, 0, -1) end
end

local function split(text) return vim.split(text, '\n', { plain = true }) end

-- The inserted lines as virtual-text chunks in the buffer's syntax highlighting over
-- LocalCopilotNextEditAdd (syntax.lua); plain LocalCopilotNextEditAdd where Tree-sitter has none.
local ADD = 'LocalCopilotNextEditAdd'
local function highlighted(parts, buf)
  local groups = syntax.groups(parts, vim.bo[buf].filetype) or {}
  local out = {}
  for i, line in ipairs(parts) do out[i] = syntax.chunks(line, groups[i], ADD) end
  return out
end

-- An edit across lines as whole lines: the rows it changes as they are, and as they will be
-- (rows equal at both ends left out). Returns the first changed row, the old rows, the new rows.
local function line_view(buf, plan, parts)
  local old = api.nvim_buf_get_lines(buf, plan.row, plan.end_row + 1, false)
  local new = {}
  for i, p in ipairs(parts) do new[i] = p end
  new[1] = old[1]:sub(1, plan.col) .. new[1]
  new[#new] = new[#new] .. old[#old]:sub(plan.end_col + 1)
  local top = 0
  while top < #old and top < #new and old[top + 1] == new[top + 1] do top = top + 1 end
  local bottom = 0
  while bottom < #old - top and bottom < #new - top and old[#old - bottom] == new[#new - bottom] do
    bottom = bottom + 1
  end
  return plan.row + top, { unpack(old, top + 1, #old - bottom) }, { unpack(new, top + 1, #new - bottom) }
end

local function draw(plan)
  local buf = plan.buf
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  if plan.row ~= plan.end_row or plan.col ~= plan.end_col then
    api.nvim_buf_set_extmark(buf, M.ns, plan.row, plan.col, {
      end_row = plan.end_row, end_col = plan.end_col, hl_group = 'LocalCopilotNextEditDelete', hl_eol = true,
      priority = 200,
    })
  end
  local parts = split(plan.text)
  if #parts == 1 and plan.row == plan.end_row then
    -- within a line: the new text inline, right after what it replaces
    if plan.text ~= '' then
      api.nvim_buf_set_extmark(buf, M.ns, plan.end_row, plan.end_col, {
        virt_text = highlighted(parts, buf)[1], virt_text_pos = 'inline', priority = 200,
      })
    end
  else
    -- across lines: the rows as they will be, as virtual lines below the rows they replace
    -- (above the row they go before, for rows only inserted)
    local first, old, new = line_view(buf, plan, parts)
    if #new > 0 then
      local opts = { virt_lines = highlighted(new, buf), priority = 200 }
      local at = first + #old - 1
      if #old == 0 then
        at = first
        opts.virt_lines_above = true
        if at >= api.nvim_buf_line_count(buf) then at, opts.virt_lines_above = at - 1, nil end
      end
      api.nvim_buf_set_extmark(buf, M.ns, at, 0, opts)
    end
  end
  local row = api.nvim_win_get_cursor(0)[1] - 1
  if row < plan.row or row > plan.end_row then
    api.nvim_buf_set_extmark(buf, M.ns, row, 0, {
      virt_text = { { (' next edit: line %d '):format(plan.row + 1), 'LocalCopilotNextEditMarker' } },
      virt_text_pos = 'eol', priority = 200,
    })
  end
end

-- Called by the host: draw the plan if it answers the buffer's latest request, the text is
-- still what it was asked for, Normal mode holds and no ghost text is on screen. The cursor
-- may have moved meanwhile: the plan then counts from where it is now.
---@param plan local_copilot.update.NextEdit
function M.show(plan)
  local buf = plan.buf
  local s = sessions.peek(buf)
  if buf ~= api.nvim_get_current_buf() or not s or s.next_edit_seq ~= plan.seq then return end
  if api.nvim_buf_get_changedtick(buf) ~= plan.tick or api.nvim_get_mode().mode ~= 'n' then return end
  if require('local_copilot.ghost').is_visible() then return end
  local cur = api.nvim_win_get_cursor(0)
  plan.cursor = { cur[1] - 1, cur[2] }
  state.current = plan
  -- a plan that does not fit the buffer (a host of another version) shows nothing, never an error
  if not pcall(draw, plan) then return M.clear() end
  tell('shown')
end

-- Tests draw a plan of their own: make `seq` the buffer's latest request.
function M._seq_for_test(buf, seq) sessions.get(buf).next_edit_seq = seq end

-- Ask for the next edit at the cursor now.
function M.request()
  if not M.enabled() then return false end
  local buf = api.nvim_get_current_buf()
  if not require('local_copilot.trigger').buf_enabled(buf) then return false end
  recorder.attach(buf)
  local cur = api.nvim_win_get_cursor(0)
  local row = cur[1] - 1
  local n = api.nvim_buf_line_count(buf)
  local first = math.max(0, row - WINDOW)
  state.seq = state.seq + 1
  sessions.get(buf).next_edit_seq = state.seq
  host.send('next_edit', {
    buf = buf, tick = api.nvim_buf_get_changedtick(buf), row = row, col = cur[2], first = first,
    -- (long lines cut: the host cuts them in the prompt, and rewrites no region holding one)
    lines = require('local_copilot.trigger').cut_lines(
      api.nvim_buf_get_lines(buf, first, math.min(n, row + WINDOW + 1), false)),
    nlines = n,
    path = api.nvim_buf_get_name(buf), ft = vim.bo[buf].filetype, seq = state.seq,
    cwd = vim.fn.getcwd(), edits = recorder.take(),
    -- the edit's indentation is written the buffer's way (python/local_copilot/indentation.py)
    et = vim.bo[buf].expandtab, sw = vim.bo[buf].shiftwidth, ts = vim.bo[buf].tabstop,
  })
  return true
end

local function cancel_timer()
  if state.timer then
    state.timer:stop()
    state.timer:close()
    state.timer = nil
  end
end

-- Ask once the user has paused for next_edit.debounce_ms (a newer change restarts the wait).
function M.schedule()
  if not M.enabled() then return end
  cancel_timer()
  local wait = config.get('next_edit').debounce_ms
  state.timer = vim.uv.new_timer()
  state.timer:start(wait, 0, vim.schedule_wrap(function()
    cancel_timer()
    local mode = api.nvim_get_mode().mode
    if mode == 'n' then M.request() end
  end))
end

-- Go to the edit; true when there is one.
function M.jump()
  local cur = state.current
  if not M.visible() or cur.buf ~= api.nvim_get_current_buf() then return false end
  cur.jumped = true
  vim.cmd("normal! m'") -- <C-o> goes back to where the cursor was
  api.nvim_win_set_cursor(0, { cur.row + 1, cur.col })
  draw(cur)
  return true
end

-- Jump to the edit when the cursor is not at it, else apply it (one undo step, the cursor
-- at its end) and ask for the next one. False when no next edit is shown.
function M.accept()
  local cur = state.current
  if not M.visible() or cur.buf ~= api.nvim_get_current_buf() then return false end
  if api.nvim_buf_get_changedtick(cur.buf) ~= cur.tick then
    M.clear()
    return false
  end
  local row = api.nvim_win_get_cursor(0)[1] - 1
  if row < cur.row or row > cur.end_row then return M.jump() end
  M.clear()
  local parts = split(cur.text)
  api.nvim_buf_set_text(cur.buf, cur.row, cur.col, cur.end_row, cur.end_col, parts)
  local end_row = cur.row + #parts - 1
  local end_col = (#parts == 1 and cur.col or 0) + #parts[#parts]
  api.nvim_win_set_cursor(0, { end_row + 1, math.max(0, end_col - 1) })
  tell('accepted')
  M.schedule() -- the chain: the next edit after this one
  return true
end

function M.dismiss()
  if not M.visible() then return false end
  M.clear()
  tell('dismissed')
  return true
end

-- The buffer changed under a shown edit: it no longer applies.
function M.on_text_changed(ev)
  local cur = state.current
  if cur and (cur.buf ~= ev.buf or api.nvim_buf_get_changedtick(ev.buf) ~= cur.tick) then M.clear() end
  M.schedule()
end

-- The cursor wandered off: neither where the edit was asked for nor at the edit.
function M.on_cursor_moved()
  local cur = state.current
  if not cur then return end
  if cur.buf ~= api.nvim_get_current_buf() then return M.clear() end
  local row = api.nvim_win_get_cursor(0)[1] - 1
  if row ~= cur.cursor[1] and (row < cur.row - 1 or row > cur.end_row + 1) then M.clear() end
end

function M.on_insert_enter()
  cancel_timer()
  M.clear()
end

-- A buffer being left keeps its recorded changes: the next request, in whichever buffer,
-- takes those of every buffer (the history is across buffers).
function M.on_buf_leave()
  cancel_timer()
  M.clear()
end

function M.on_buf_enter(ev)
  if M.enabled() and require('local_copilot.trigger').buf_enabled(ev.buf) then recorder.attach(ev.buf) end
end

-- The buffer was wiped: its edit on screen goes (its marks went with it).
sessions.on_forget('next_edit', function(buf)
  if state.current and state.current.buf == buf then state.current = nil end
end)

-- Autocmds of their own group, while next edits are on (setup() calls this again).
function M.attach()
  if not M.enabled() then
    pcall(api.nvim_del_augroup_by_name, 'LocalCopilotNextEdit')
    cancel_timer()
    M.clear()
    recorder.want('next_edit', false) -- (ghost text's context may still want the records)
    return
  end
  recorder.want('next_edit', true)
  local group = api.nvim_create_augroup('LocalCopilotNextEdit', { clear = true })
  local au = function(ev, fn, desc)
    api.nvim_create_autocmd(ev, { group = group, callback = fn, desc = 'local-copilot: next edit: ' .. desc })
  end
  au('BufEnter', M.on_buf_enter, 'record edits')
  au('TextChanged', M.on_text_changed, 'ask after a change in Normal mode')
  au('InsertLeave', function() M.schedule() end, 'ask on leaving Insert mode')
  au('InsertEnter', M.on_insert_enter, 'clear')
  au('CursorMoved', M.on_cursor_moved, 'clear when the cursor wanders off')
  au('BufLeave', M.on_buf_leave, 'clear')
  au('BufFilePost', function(ev) recorder.renamed(ev.buf) end, 'record under the new name')
  au({ 'BufHidden', 'BufUnload' }, function(ev) recorder.detach(ev.buf) end, 'stop recording a buffer not shown')
  M.on_buf_enter({ buf = api.nvim_get_current_buf() })
end

return M
