-- The suggestion on screen: extmarks in namespace `local_copilot`, and what accept inserts.
-- Lua owns this state so accepting never waits on Python.
local api = vim.api
local M = {}

M.ns = api.nvim_create_namespace('local_copilot')
local MARK_ID = 1

-- The suggestion currently drawn, or nil: { buf, row, col, tick, seq, lines }
M.current = nil
-- Last snapshot sequence number sent per buffer; plans for older ones are stale.
M.last_seq = {}

local function in_insert()
  local mode = api.nvim_get_mode().mode
  return mode:sub(1, 1) == 'i'
end

-- virt_text does not expand tabs like buffer text does; expand them for display only.
local function expand_tabs(text, start_col, ts)
  if not text:find('\t', 1, true) then return text end
  local out, col = {}, start_col
  for ch in text:gmatch('[^\t]*\t?') do
    if ch == '' then break end
    if ch:sub(-1) == '\t' then
      local head = ch:sub(1, -2)
      col = col + vim.fn.strdisplaywidth(head)
      local pad = ts - (col % ts)
      out[#out + 1] = head .. string.rep(' ', pad)
      col = col + pad
    else
      out[#out + 1] = ch
      col = col + vim.fn.strdisplaywidth(ch)
    end
  end
  return table.concat(out)
end

function M.clear(buf)
  local cur = M.current
  if cur and (buf == nil or cur.buf == buf) then
    if api.nvim_buf_is_valid(cur.buf) then
      pcall(api.nvim_buf_del_extmark, cur.buf, M.ns, MARK_ID)
    end
    M.current = nil
  end
end

-- True when `plan` still describes the editor: same buffer, text, cursor and mode.
local function still_valid(p)
  if p.buf ~= api.nvim_get_current_buf() or not in_insert() then return false end
  if api.nvim_buf_get_changedtick(p.buf) ~= p.tick then return false end
  local cursor = api.nvim_win_get_cursor(0)
  return cursor[1] - 1 == p.row and cursor[2] == p.col
end

-- Draw a render plan from Python. Returns false when the plan is stale and was dropped.
function M.show(plan)
  if plan.seq ~= M.last_seq[plan.buf] or not still_valid(plan) then return false end
  if plan.text == '' then
    M.clear(plan.buf)
    return true
  end
  local lines = vim.split(plan.text, '\n', { plain = true })
  local ts = vim.bo[plan.buf].tabstop
  local line = api.nvim_buf_get_lines(plan.buf, plan.row, plan.row + 1, true)[1]
  local start = vim.fn.strdisplaywidth(line:sub(1, plan.col))
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { expand_tabs(lines[i], 0, ts), 'LocalCopilotSuggestion' } }
  end
  local opts = {
    id = MARK_ID,
    virt_text = { { expand_tabs(lines[1], start, ts), 'LocalCopilotSuggestion' } },
    virt_text_pos = 'inline',
    hl_mode = 'replace', -- MatchParen or a cursorline must not restyle the ghost text
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    right_gravity = false,
  }
  if M.current and M.current.buf ~= plan.buf then M.clear() end
  api.nvim_buf_set_extmark(plan.buf, M.ns, plan.row, plan.col, opts)
  M.current = { buf = plan.buf, row = plan.row, col = plan.col, tick = plan.tick, seq = plan.seq, lines = lines, final = plan.final }
  if plan.final then
    api.nvim_exec_autocmds('User', { pattern = 'LocalCopilotSuggestion', modeline = false, data = { text = plan.text } })
  end
  return true
end

function M.is_visible()
  local cur = M.current
  return cur ~= nil and still_valid(cur)
end

-- Insert the shown suggestion as one undo step, cursor at its end.
function M.accept()
  local cur = M.current
  if not cur or not still_valid(cur) then return false end
  local function apply()
    if M.current ~= cur or not still_valid(cur) then return end
    -- break the undo sequence so undo removes exactly the accepted text
    vim.o.undolevels = vim.o.undolevels
    api.nvim_buf_set_text(cur.buf, cur.row, cur.col, cur.row, cur.col, cur.lines)
    M.clear(cur.buf)
    local last = cur.lines[#cur.lines]
    local row = cur.row + #cur.lines - 1
    local col = (#cur.lines == 1) and (cur.col + #last) or #last
    api.nvim_win_set_cursor(0, { row + 1, col })
    api.nvim_exec_autocmds('User', { pattern = 'LocalCopilotAccept', modeline = false, data = { text = table.concat(cur.lines, '\n') } })
  end
  -- inside an <expr> mapping the buffer is locked (E565): do the edit right after it
  if not pcall(apply) then vim.schedule(apply) end
  return true
end

return M
