-- Accepting types the text as Insert-mode input, queued at the front of the typeahead: it lands
-- where the accept key was read (in a macro, or with keys typed ahead too), Neovim records it
-- for `.` and undo like typed text, and it lands exactly as shown.
--
-- How each piece is typed, so that the insert and its repeat by `.` give the text as shown:
-- - CTRL-V before every character but the six letters CTRL-V reads as a number's start
--   (x X o O u U), digits as CTRL-V and three decimal digits: literal, so no abbreviation,
--   indent key or 'expandtab' acts on it, neither now nor when `.` replays it;
-- - a line break as <CR> and then `x<C-u>0<C-d>`: whatever <CR> added (autoindent, a comment
--   leader) is removed, so the next line starts with exactly its own text (with the options
--   below that is nothing now, but `.` replays it with the buffer's options);
-- - <C-g>u before and after: one undo step per accept.
-- While the keys run, the buffer's indent and format options are off (auto-wrap, indent
-- expressions and comment leaders would change the text) and 'eventignore' holds every event
-- (InsertCharPre would see typed characters: completion plugins open menus, our own
-- on_char_pre would clear the suggestion); both come back at the end.
local api = vim.api
local M = {}

local function termcodes(s) return api.nvim_replace_termcodes(s, true, false, true) end

local CTRL_V = termcodes('<C-v>')
local NUL = termcodes('<C-v><Nul>')
local NEWLINE = termcodes('<CR>x<C-u>0<C-d>')
local UNDO_BREAK = termcodes('<C-g>u')
-- K_SPECIAL (0x80) in text must be escaped as K_SPECIAL KS_SPECIAL KE_FILLER in typeahead
local K_SPECIAL_ESC = '\128\254X'

-- Buffer-local options saved and cleared while the text is typed.
local BUF_OPTS = {
  autoindent = false, smartindent = false, cindent = false, indentexpr = '', lisp = false,
  textwidth = 0, wrapmargin = 0, formatoptions = '',
}

local function char_keys(ch)
  if ch:find('^[xXoOuU]$') then return ch end
  if ch:find('^%d$') then return CTRL_V .. ('%03d'):format(ch:byte()) end
  if ch == '\0' then return NUL end
  return CTRL_V .. (ch:gsub('\128', K_SPECIAL_ESC))
end

-- The keys that type `text` literally (no undo breaks, no option handling).
function M.keys(text)
  local out = {}
  local i, n = 1, #text
  while i <= n do
    local b = text:byte(i)
    local j = i
    -- a whole UTF-8 sequence; a stray continuation byte is a character of its own
    if b >= 0xC0 then
      while j < n and text:byte(j + 1) >= 0x80 and text:byte(j + 1) < 0xC0 do j = j + 1 end
    end
    out[#out + 1] = b == 10 and NEWLINE or char_keys(text:sub(i, j))
    i = j + 1
  end
  return table.concat(out)
end

-- The accept queued or being typed: { id, buf, tick, done, saved, ei, rl }, or nil.
local pending = nil
local next_id = 0

local function restore(p)
  if not p.saved then return end
  if api.nvim_buf_is_valid(p.buf) then
    for name, value in pairs(p.saved) do
      pcall(api.nvim_set_option_value, name, value, { buf = p.buf })
    end
  end
  p.saved = nil
  if p.rl then vim.o.revins = true end
  -- last, so that setting the options above fires no OptionSet
  vim.o.eventignore = p.ei
end

-- Called by the keys themselves, right before the text.
function M._begin(id)
  local p = pending
  if not p or p.id ~= id then return end
  p.ei, p.rl = vim.o.eventignore, vim.o.revins
  vim.o.eventignore = 'all'
  p.saved = {}
  for name, value in pairs(BUF_OPTS) do
    p.saved[name] = vim.bo[p.buf][name]
    vim.bo[p.buf][name] = value
  end
  if p.rl then vim.o.revins = false end
  -- The rest of the keys can be thrown away (an error or CTRL-C flushes the typeahead).
  -- Scheduled callbacks run only once the typeahead is empty, so by then this accept is
  -- finished or lost: the options come back either way.
  vim.schedule(function()
    if pending ~= p then return end
    pending = nil
    restore(p)
  end)
end

-- Called by the keys themselves, right after the text.
function M._finish(id)
  local p = pending
  if not p or p.id ~= id then return end
  pending = nil
  restore(p)
  p.done()
end

-- Type `text` at the cursor as the next input; `done()` runs once it is in the buffer.
-- False while another accept waits to be typed (the buffer has not changed since it was
-- queued: its keys were not thrown away).
function M.type(text, done)
  local buf = api.nvim_get_current_buf()
  if pending and pending.buf == buf and pending.tick == api.nvim_buf_get_changedtick(buf) then
    return false
  end
  next_id = next_id + 1
  local id = next_id
  pending = { id = id, buf = buf, tick = api.nvim_buf_get_changedtick(buf), done = done }
  local call = '<Cmd>lua require("local_copilot.literal")._%s(%d)<CR>'
  local keys = UNDO_BREAK .. termcodes(call:format('begin', id)) .. M.keys(text)
    .. UNDO_BREAK .. termcodes(call:format('finish', id))
  -- 'i': in front of the keys already typed ahead, i.e. right where the accept key was read
  -- (from an <expr> mapping, a callback mapping or <Cmd>); 'n': the text is not remapped
  api.nvim_feedkeys(keys, 'ni', false)
  return true
end

return M
