-- The suggestion on screen: extmarks in namespace `local_copilot`, and what accepting inserts.
-- Lua owns this state so accepting never waits on Python; Python decides what is shown and
-- precomputes where accept-word stops (byte offsets into the text).
local api = vim.api
local sessions = require('local_copilot.sessions')
local M = {}

M.ns = api.nvim_create_namespace('local_copilot')
local MARK_ID, INFO_ID = 1, 2

-- The suggestion currently known for the cursor, or nil:
--   { buf, row, col, tick, seq, items = { { text, words } }, index, final, line_suffix, hidden }
-- One for the whole editor, not one per buffer: there is one cursor, and a suggestion in
-- another buffer is cleared before this one is drawn. Its buffer's forget clears it too.
-- What ghost text keeps per buffer is in the buffer's session (sessions.lua: seq, info_drawn).
M.current = nil
-- +1/-1 while alternatives are being fetched for next()/prev() (see expect_cycle)
M.pending_cycle = nil
-- called with the buffer once the answer to its latest request is complete, whether or not it
-- had anything to show (the trigger keeps its 'waiting' status with it); see setup()
local on_answered = function(_) end

---@param opts { on_answered: fun(buf: integer) }
function M.setup(opts)
  on_answered = opts.on_answered
end

-- A request for `buf` went out with `seq` (nil: none is wanted any more); only its plans draw.
function M.expect(buf, seq)
  if seq == nil then
    local s = sessions.peek(buf)
    if s then s.seq = nil end
  else
    sessions.get(buf).seq = seq
  end
end

-- The buffer was wiped: its suggestion goes (its marks went with it).
sessions.on_forget('ghost', function(buf)
  if M.current and M.current.buf == buf then
    M.current = nil
    M.pending_cycle = nil
  end
end)

-- Alternatives are being fetched: step by `step` from the candidate on screen once they come.
function M.expect_cycle(step)
  M.pending_cycle = step
end

local function in_insert()
  return api.nvim_get_mode().mode:sub(1, 1) == 'i'
end

-- virt_text does not expand tabs like buffer text does; expand them for display only.
local expand_tabs = require('local_copilot.syntax').expand_tabs

-- (the session's `info_drawn`: the (i/n) annotation mark may exist; most draws have none to delete)
local function undraw(buf)
  local s = sessions.peek(buf)
  if api.nvim_buf_is_valid(buf) then
    pcall(api.nvim_buf_del_extmark, buf, M.ns, MARK_ID)
    if s and s.info_drawn then pcall(api.nvim_buf_del_extmark, buf, M.ns, INFO_ID) end
  end
  if s then s.info_drawn = nil end
end

function M.clear(buf)
  local cur = M.current
  if cur and (buf == nil or cur.buf == buf) then
    undraw(cur.buf)
    M.current = nil
    M.pending_cycle = nil
  end
end

function M.text(cur)
  cur = cur or M.current
  local item = cur and cur.items[cur.index]
  return item and item.text or ''
end

-- True when `p` still describes the editor: same buffer, text, cursor and mode.
local function still_valid(p)
  if p.buf ~= api.nvim_get_current_buf() or not in_insert() then return false end
  if api.nvim_buf_get_changedtick(p.buf) ~= p.tick then return false end
  local cursor = api.nvim_win_get_cursor(0)
  return cursor[1] - 1 == p.row and cursor[2] == p.col
end

local function draw(cur)
  local text = M.text(cur)
  if text == '' then return undraw(cur.buf) end
  if cur.hidden then return undraw(cur.buf) end
  -- most suggestions drawn while typing are one line: vim.split's argument checks and
  -- iterator cost measurably more per draw from cold caches
  local lines = text:find('\n', 1, true) and vim.split(text, '\n', { plain = true }) or { text }
  -- tabs only: the tabstop and the cursor's screen column (each read costs a few us per draw)
  local ts = text:find('\t', 1, true) and vim.bo[cur.buf].tabstop
  local first = lines[1]
  if ts and first:find('\t', 1, true) then
    local line = api.nvim_buf_get_lines(cur.buf, cur.row, cur.row + 1, true)[1]
    first = expand_tabs(first, vim.fn.strdisplaywidth(line:sub(1, cur.col)), ts)
  end
  local hl = 'LocalCopilotSuggestion'
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { ts and expand_tabs(lines[i], 0, ts) or lines[i], hl } }
  end
  local info = #cur.items > 1 and (' (%d/%d)'):format(cur.index, #cur.items) or nil
  if info and #virt_lines > 0 then
    table.insert(virt_lines[#virt_lines], { info, 'LocalCopilotAnnotation' })
  end
  api.nvim_buf_set_extmark(cur.buf, M.ns, cur.row, cur.col, {
    id = MARK_ID,
    virt_text = { { first, hl } },
    virt_text_pos = 'inline',
    hl_mode = 'replace', -- MatchParen or a cursorline must not restyle the ghost text
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    right_gravity = false,
  })
  local s = sessions.get(cur.buf)
  if info and #virt_lines == 0 then
    api.nvim_buf_set_extmark(cur.buf, M.ns, cur.row, 0, { id = INFO_ID, virt_text = { { info, 'LocalCopilotAnnotation' } }, virt_text_pos = 'eol' })
    s.info_drawn = true
  elseif s.info_drawn then
    pcall(api.nvim_buf_del_extmark, cur.buf, M.ns, INFO_ID)
    s.info_drawn = nil
  end
end

local function pum_hides()
  return vim.fn.pumvisible() == 1 and require('local_copilot.config').get('hide_during_completion')
end

-- Draw a render plan from Python. Returns false when the plan is stale and was dropped.
---@param plan local_copilot.RenderPlan
---@return boolean drawn
function M.show(plan)
  local s = sessions.peek(plan.buf)
  if not s or plan.seq ~= s.seq then return false end
  if plan.final then on_answered(plan.buf) end
  if not still_valid(plan) then return false end
  local items = plan.items
  if #items == 0 or (#items == 1 and items[1].text == '') then
    M.clear(plan.buf)
    return true
  end
  local index = plan.index + 1 -- Python counts from 0
  if M.pending_cycle and #items > 1 then
    -- step away from what is on screen now, wherever it sits among the new candidates
    local shown = M.current and M.text(M.current)
    for i, item in ipairs(items) do
      if item.text == shown then index = i end
    end
    index = ((index - 1 + M.pending_cycle) % #items) + 1
    M.pending_cycle = nil
  end
  if M.current and M.current.buf ~= plan.buf then M.clear() end
  local line = api.nvim_buf_get_lines(plan.buf, plan.row, plan.row + 1, true)[1]
  local cur = {
    buf = plan.buf, row = plan.row, col = plan.col, tick = plan.tick, seq = plan.seq,
    items = items, index = index, final = plan.final, line_suffix = line:sub(plan.col + 1),
    hidden = pum_hides(),
  }
  M.current = cur
  draw(cur)
  if plan.final then
    api.nvim_exec_autocmds('User', { pattern = 'LocalCopilotSuggestion', modeline = false, data = { text = M.text(cur), cached = plan.cached } })
  end
  return true
end

function M.is_visible()
  local cur = M.current
  return cur ~= nil and not cur.hidden and M.text(cur) ~= '' and still_valid(cur)
end

-- The completion menu opened or closed: hide the suggestion under it, show it again after.
function M.set_hidden(hidden)
  local cur = M.current
  if not cur or cur.hidden == hidden then return end
  cur.hidden = hidden
  if still_valid(cur) then draw(cur) end
end

-- True when the editor still matches the drawn suggestion (nothing to do after an event).
function M.unchanged()
  local cur = M.current
  return cur ~= nil and still_valid(cur)
end

-- After an edit: if the user typed (or partly accepted) exactly what the suggestion starts
-- with, keep showing the rest at the new cursor and return true: no request is needed.
-- `accepted`: the edit was a partial accept of this suggestion, not typed by the user.
function M.typed_through(accepted)
  local cur = M.current
  if not cur or cur.buf ~= api.nvim_get_current_buf() or not in_insert() then return false end
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1] - 1, cursor[2]
  local tick = api.nvim_buf_get_changedtick(cur.buf)
  if row == cur.row and col == cur.col and tick == cur.tick then return true end
  if row < cur.row or (row == cur.row and col <= cur.col) then return false end
  local lines = api.nvim_buf_get_lines(cur.buf, cur.row, row + 1, false)
  if #lines ~= row - cur.row + 1 then return false end
  local typed, rest
  if row == cur.row then
    typed, rest = lines[1]:sub(cur.col + 1, col), lines[1]:sub(col + 1)
  else
    local parts = { lines[1]:sub(cur.col + 1) }
    for i = 2, #lines - 1 do parts[#parts + 1] = lines[i] end
    parts[#parts + 1] = lines[#lines]:sub(1, col)
    typed, rest = table.concat(parts, '\n'), lines[#lines]:sub(col + 1)
  end
  local text = M.text(cur)
  if rest ~= cur.line_suffix or #typed >= #text or text:sub(1, #typed) ~= typed then return false end
  -- The host cut the suggestion against the text after the cursor (closers and tails it
  -- already has); a typed bracket or quote changes the balance that cut was made for, so
  -- with text after the cursor the rest is asked for again at the new spot instead of kept
  -- unchecked (`append|)` showing `(x)`, `(` typed: `x)` kept would give `append(x))`). At
  -- the end of the line there is nothing to cut against: the rest stays.
  if not accepted and cur.line_suffix ~= '' and typed:find('[%(%)%[%]{}"\'`]') then return false end
  -- keep the alternatives that agree with what was typed, trimmed the same way
  local items, index = {}, 1
  for i, item in ipairs(cur.items) do
    if item.text:sub(1, #typed) == typed and #item.text > #typed then
      local words = {}
      for _, w in ipairs(item.words) do
        if w > #typed then words[#words + 1] = w - #typed end
      end
      items[#items + 1] = { text = item.text:sub(#typed + 1), words = words }
      if i == cur.index then index = #items end
    end
  end
  cur.items, cur.index = items, index
  cur.row, cur.col, cur.tick = row, col, tick
  draw(cur)
  return true
end

-- Insert `n` bytes of the shown suggestion (all when nil) as one undo step, cursor at the end.
-- The text is typed as the next input (literal.lua): right where the accept key was read,
-- repeated by `.` with what was typed before it, and allowed inside an <expr> mapping (which
-- may not change the buffer itself). The suggestion is cleared, or trimmed to the rest after
-- a partial accept, once the text is in.
local function insert(n)
  local cur = M.current
  if not cur or not still_valid(cur) or cur.hidden then return false end
  local text = M.text(cur)
  if text == '' then return false end
  local piece = n and text:sub(1, n) or text
  return require('local_copilot.literal').type(piece, function()
    if M.current == cur then
      if #piece == #text then
        M.clear(cur.buf)
      else
        M.typed_through(true) -- a partial accept keeps the rest shown, trimmed, at the new cursor
      end
    end
    api.nvim_exec_autocmds('User', { pattern = 'LocalCopilotAccept', modeline = false, data = { text = piece } })
  end)
end

function M.accept() return insert(nil) end

function M.accept_word()
  local cur = M.current
  local item = cur and cur.items[cur.index]
  if not item then return false end
  return insert(item.words[1] or #item.text)
end

-- The first line of the suggestion and its newline, so the next accept_line takes the next
-- line; a suggestion that starts with a newline gets that one plus the following line.
function M.accept_line()
  local text = M.text()
  if text == '' then return false end
  local nl = text:find('\n', 2, true)
  return insert(nl)
end

-- Cycle through alternatives; false when there is nothing to cycle.
function M.cycle(step)
  local cur = M.current
  if not cur or not still_valid(cur) or #cur.items < 2 then return false end
  cur.index = ((cur.index - 1 + step) % #cur.items) + 1
  draw(cur)
  return true
end

return M
