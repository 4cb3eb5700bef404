-- The user's recent edits, recorded for next edits (python/local_copilot/next_edit/history.py
-- keeps and renders them) and for ghost text's context (recent_edits.lua). Each change costs
-- one on_lines callback that widens the buffer's pending range (a few comparisons, no text
-- read); the text of that range is read only when the range is flushed: a change far from it,
-- a next edit asked for, the buffer left (`take`, `detach`) or Insert mode started away from
-- it (`flush_away`). For next edits the text before comes from a copy of the buffer taken when
-- it was attached and kept up to date at each flush; ghost text's context needs only the new
-- text, so while next edits are off no copy is kept and the rows are read from the buffer.
-- Only buffers the plugin may read (trigger.buf_enabled: privacy, size, filetype) are
-- attached, and only while they are shown: a buffer hidden or unloaded is let go (its pending
-- change recorded, its copy dropped), and at most MAX_BUFFERS are attached at once.
local api = vim.api
local sessions = require('local_copilot.sessions')

local M = {}

-- a change this many rows away from the pending range is flushed apart (one record each)
local GAP = 20
-- records kept until the host takes them
local MAX_RECORDS = 32
-- unchanged rows recorded above and below a change (a unified diff's usual context)
local CONTEXT = 3
-- buffers attached at once (each holds a copy of its text): the least recently entered
-- beyond this is let go
M.MAX_BUFFERS = 8
-- new rows read for a record without a copy (ghost text's context sends no more)
M.MAX_NEW = 40
-- called with (buf, record) for each record while ghost text's context wants them (recent_edits.lua)
M.on_record = nil

-- who wants records: next edits (the text before too: a copy of each buffer; `take`) and
-- ghost text's context (the new text alone; `on_record`). A recorder used alone (its tests,
-- the bench) records for next edits; setup() says who wants them (`want`).
local wants = { next_edit = true, context = false }

-- An attached buffer's record is its session's `recorder` (sessions.lua): { lines = copy of
-- the buffer as of the last flush, path, lo, old_hi, new_hi, used } (lo .. old_hi: 0-based
-- rows of the copy changed since; lo .. new_hi: those rows now; used: when it was last
-- entered, for MAX_BUFFERS)
local function rec_of(buf)
  local s = sessions.peek(buf)
  return s and s.recorder
end

-- The attached buffers and their records.
local function attached()
  local out = {}
  for buf, s in sessions.all() do
    if s.recorder then out[buf] = s.recorder end
  end
  return out
end

local records = {}
local clock = 0

function M.attached(buf) return rec_of(buf) ~= nil end

local function push(rec)
  records[#records + 1] = rec
  if #records > MAX_RECORDS then table.remove(records, 1) end
end

-- Without a copy (next edits off): the new rows of the range and those around it, read from
-- the buffer, for ghost text's context.
local function flush_new(buf, b, lo, new_hi)
  if not M.on_record or require('local_copilot.privacy').reason(buf, b.path) then return end
  local hi = math.min(new_hi, lo + M.MAX_NEW)
  local from = math.max(0, lo - CONTEXT)
  local ok, rows = pcall(api.nvim_buf_get_lines, buf, from, hi + CONTEXT, false)
  if not ok then return end
  local above, n = lo - from, hi - lo
  M.on_record(buf, {
    path = b.path, row = lo, old = {}, before = vim.list_slice(rows, 1, above),
    new = vim.list_slice(rows, above + 1, above + n), after = vim.list_slice(rows, above + n + 1),
  })
end

-- The pending range of `buf` as one record; the copy brought up to date.
local function flush(buf, b)
  local lo = b.lo
  if lo == nil then return end
  b.lo = nil
  local old_hi, new_hi = b.old_hi, b.new_hi
  local copy = b.lines
  if copy == nil then return flush_new(buf, b, lo, new_hi) end
  local ok, new = pcall(api.nvim_buf_get_lines, buf, lo, new_hi, false)
  if not ok then return end
  local old, before, after = {}, {}, {}
  for i = lo + 1, old_hi do old[#old + 1] = copy[i] end
  -- the unchanged rows around it: the diff's context
  for i = math.max(1, lo - CONTEXT + 1), lo do before[#before + 1] = copy[i] end
  for i = old_hi + 1, math.min(#copy, old_hi + CONTEXT) do after[#after + 1] = copy[i] end
  -- splice the copy: rows lo+1..old_hi become `new`
  local shift = #new - #old
  if shift ~= 0 then
    local n = #copy
    table.move(copy, old_hi + 1, n, old_hi + 1 + shift)
    if shift < 0 then for i = n + shift + 1, n do copy[i] = nil end end
  end
  for i, line in ipairs(new) do copy[lo + i] = line end
  -- the host refused the buffer's text since it was attached (e.g. a key pasted into it)
  if require('local_copilot.privacy').reason(buf, b.path) then return end
  if not vim.deep_equal(old, new) then
    local rec = { path = b.path, row = lo, old = old, new = new, before = before, after = after }
    if wants.next_edit then push(rec) end
    if M.on_record then M.on_record(buf, rec) end
  end
end

-- One change: rows first..last of the buffer are now first..new_last.
local function widen(buf, b, first, last, new_last)
  local lo = b.lo
  if lo == nil then
    b.lo, b.old_hi, b.new_hi = first, last, new_last
    return
  end
  if first > b.new_hi + GAP or last < lo - GAP then
    flush(buf, b) -- far from the pending range: a record of its own
    b.lo, b.old_hi, b.new_hi = first, last, new_last
    return
  end
  local hi = b.new_hi > last and b.new_hi or last
  b.old_hi = hi + (b.old_hi - b.new_hi)
  b.new_hi = hi + (new_last - last)
  if first < lo then b.lo = first end
end

-- The attached buffers, the least recently entered first.
local function by_use()
  local bufs = attached()
  local list = vim.tbl_keys(bufs)
  table.sort(list, function(x, y) return bufs[x].used < bufs[y].used end)
  return list
end

function M.attach(buf)
  clock = clock + 1
  local known = rec_of(buf)
  if known then
    known.used = clock
    return
  end
  if not api.nvim_buf_is_loaded(buf) then return end
  local b = { path = api.nvim_buf_get_name(buf), used = clock,
    lines = wants.next_edit and api.nvim_buf_get_lines(buf, 0, -1, false) or nil }
  sessions.get(buf).recorder = b
  local list = by_use()
  for i = 1, #list - M.MAX_BUFFERS do M.detach(list[i]) end
  -- each callback detaches once its own record is gone (detach(), reset(), or a newer attach)
  api.nvim_buf_attach(buf, false, {
    on_lines = function(_, _, _, first, last, new_last)
      if rec_of(buf) ~= b then return true end
      widen(buf, b, first, last, new_last)
    end,
    on_reload = function()
      if rec_of(buf) ~= b then return true end
      b.lo = nil
      if b.lines then b.lines = api.nvim_buf_get_lines(buf, 0, -1, false) end
    end,
    on_detach = function()
      local s = sessions.peek(buf)
      if s and s.recorder == b then s.recorder = nil end
    end,
  })
end

-- Let `buf` go: its pending change becomes a record, its copy is dropped (on_lines returns
-- true next time: Neovim detaches it).
function M.detach(buf)
  local b = rec_of(buf)
  if not b then return end
  flush(buf, b)
  sessions.peek(buf).recorder = nil
  b.lines = nil
end

-- A wiped buffer's pending change is recorded before its session goes (as when it is hidden).
sessions.on_forget('edit_recorder', function(buf) M.detach(buf) end)

function M.attached_count() return vim.tbl_count(attached()) end

-- The attached buffers whose copy is kept (only next edits want them).
function M.copies_count()
  local n = 0
  for _, b in pairs(attached()) do
    if b.lines then n = n + 1 end
  end
  return n
end

-- The buffer was renamed: its records name the new path from now on.
function M.renamed(buf)
  local b = rec_of(buf)
  if b then b.path = api.nvim_buf_get_name(buf) end
end

-- The records since the last call (every attached buffer's pending range flushed), oldest first.
function M.take()
  for buf, b in pairs(attached()) do
    if b.lo ~= nil then flush(buf, b) end
  end
  local out = records
  records = {}
  return out
end

-- Every attached buffer's pending range flushed, but the one of `buf` that row `row` lies in
-- or near (Insert mode starts there: the change may go on).
function M.flush_away(buf, row)
  for other, b in pairs(attached()) do
    if b.lo ~= nil and (other ~= buf or row < b.lo - GAP or row > b.new_hi + GAP) then flush(other, b) end
  end
end

-- `name` ('next_edit' or 'context') wants records, or no longer. Attached buffers are let go
-- when nobody wants them, or when next edits come or go (a copy of each is kept only for them):
-- the consumers attach the shown ones again.
function M.want(name, on)
  local copies = wants.next_edit
  wants[name] = on == true
  if not (wants.next_edit or wants.context) or copies ~= wants.next_edit then M.reset() end
end

-- Forget everything (next edits turned off).
function M.reset()
  for _, s in sessions.all() do
    if s.recorder then
      s.recorder.lines = nil -- the callbacks hold it until they detach
      s.recorder = nil
    end
  end
  records = {}
end

return M
