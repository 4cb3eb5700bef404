-- When to ask for a suggestion, and what goes with the request: keystrokes become snapshots
-- (protocol.lua's local_copilot.Snapshot) sent to the host through host.lua. Owns whether
-- completion is on, which buffers it reads, the typing-interval estimate (the one the host
-- uses too: it rides with each snapshot), and whether a buffer waits for an answer. What it
-- keeps per buffer is in the buffer's session (sessions.lua: facts, base, watched, waiting).
local api = vim.api
local config = require('local_copilot.config')
local ghost = require('local_copilot.ghost')
local host = require('local_copilot.host')
local privacy = require('local_copilot.privacy')
local sessions = require('local_copilot.sessions')

local M = {}

local state = {
  enabled = true,
  seq = 0,
  timer = nil,
  scheduled = 0, -- generation of the latest scheduled request (see schedule_request)
  queued = nil, -- the generation whose vim.schedule callback has not run yet
  last_key = nil, -- uv.now() of the previous keystroke
  interval = nil, -- smoothed time between keystrokes (ms)
  -- suggestions shown since the host last heard (it counts them): they ride along with the next
  -- request, or the host asks (take_shown) for its stats; a message of their own would wake
  -- the host once per suggestion only to count it
  shown = 0,
  rest_timer = nil, -- fires once the cursor rests in Normal mode (see on_rest)
  warmed = nil, -- 'buf:row' of the last place warmed
  -- rests of the cursor in Normal mode: whether one is being waited for, how many were decided
  -- (warmed or not) and how many warm-ups went out; tests wait on these (M.rest_state)
  rest = { pending = false, decided = 0, warms = 0 },
}

-- how long the cursor must rest at a place in Normal mode before its prompt is warmed
local WARM_REST_MS = 150

-- whether the host would answer a request (not while it rejects the options); see setup()
local answering = function() return true end

---@param opts { answering: fun(): boolean }
function M.setup(opts)
  answering = opts.answering
end

function M.enabled() return state.enabled end

function M.set_enabled(on)
  state.enabled = on
  if not on then M.on_leave() end
end

-- Whether completion may run in `buf` (global toggle, filetype, buffer flag, privacy, size).
function M.buf_enabled(buf)
  buf = buf or api.nvim_get_current_buf()
  if not state.enabled or vim.b[buf].local_copilot_enabled == false then return false end
  if vim.bo[buf].buftype ~= '' or vim.bo[buf].binary then return false end
  local path = api.nvim_buf_get_name(buf)
  -- private files stay off even when a buffer flag or filetype says on (privacy.lua)
  if path ~= '' and privacy.path_reason(buf, path) then return false end
  if vim.b[buf].local_copilot_enabled == true then return true end
  local ft = vim.bo[buf].filetype
  local fts = config.get('filetypes')
  local on = fts[ft]
  if on == nil then on = config.filetype_defaults[ft] end
  if on == nil then on = fts['*'] end
  if on == false then return false end
  if api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf)) > config.max_file_bytes then return false end
  return true
end

-- What the keystroke path reads of a buffer besides its text: whether completion is on
-- there and the options a snapshot carries. Each vim.bo/vim.b read costs microseconds, so
-- they are read once per Insert-mode session and again when an option is set, the buffer is
-- renamed, the options change or the line count does (the size limit). status() and
-- commands still ask buf_enabled() each time.
local function buf_facts(buf)
  local n = api.nvim_buf_line_count(buf)
  local s = sessions.get(buf)
  local f = s.facts
  if f and f.n == n and f.version == config.version and f.enabled == state.enabled then return f end
  local bo = vim.bo[buf]
  f = {
    n = n, version = config.version, enabled = state.enabled,
    on = M.buf_enabled(buf),
    ft = bo.filetype, path = api.nvim_buf_get_name(buf), et = bo.expandtab, sw = bo.shiftwidth, ts = bo.tabstop,
  }
  s.facts = f
  return f
end

-- The host's privacy rules or a verdict changed: read `buf`'s facts (all, without one) anew.
function M.forget_facts_of(buf)
  if buf then
    local s = sessions.peek(buf)
    if s then s.facts = nil end
  else
    for _, s in sessions.all() do s.facts = nil end
  end
end

function M.forget_facts(ev)
  -- a global option may be the one that changed
  M.forget_facts_of(ev.event ~= 'OptionSet' and ev.buf or nil)
end

-- A host that is not the one snapshots went to before has none of their windows.
function M.forget_windows()
  for _, s in sessions.all() do s.base = nil end
end

-- A wiped buffer's session goes with everything trigger.lua keeps in it; the last place
-- warmed, if it was there, goes too (its number is never a buffer's again, but nothing of a
-- wiped buffer stays).
sessions.on_forget('trigger', function(buf)
  if state.warmed and state.warmed:match('^%d+') == tostring(buf) then state.warmed = nil end
end)

-- Buffers whose edits are watched: an edit outside the row of the last whole window sent
-- makes the next snapshot whole again (see snapshot()).
local function watch(buf, s)
  if s.watched then return end
  s.watched = true
  api.nvim_buf_attach(buf, false, {
    on_lines = function(_, b, _, first, last_old, last_new)
      local bs = sessions.peek(b)
      local base = bs and bs.base
      if base and not (first == base.row and last_old == base.row + 1 and last_new == base.row + 1) then
        bs.base = nil
      end
    end,
    on_reload = function(_, b)
      local bs = sessions.peek(b)
      if bs then bs.base = nil end
    end,
    on_detach = function(_, b)
      local bs = sessions.peek(b)
      if bs then bs.watched, bs.base = nil, nil end
    end,
  })
end

-- A long line crosses the channel cut: the host cuts every line of a prompt to a bounded size
-- (python/local_copilot/prompt/long_lines.py: 512 bytes for a line, 2048 before the cursor
-- and 512 after it on the cursor's line), so a minified bundle's megabyte line would cross
-- per key only to be cut there. Here a line keeps twice the host's limits, so the host still
-- sees that it was cut (and marks it so), and the kept start of the cursor's line moves in
-- steps (the prompt's start stays put while the user types on).
local LINE_BYTES = 1024
local BEFORE_BYTES = 4096
local AFTER_BYTES = 1024
local BEFORE_STEP = 1024

-- The part of the cursor's `line` sent for byte column `col`, and the bytes left out before it.
function M.line_part(line, col)
  if #line <= AFTER_BYTES then return line, 0 end
  local from = 0
  if col > BEFORE_BYTES then from = math.floor((col - BEFORE_BYTES) / BEFORE_STEP) * BEFORE_STEP end
  if from == 0 and #line <= col + AFTER_BYTES then return line, 0 end
  return line:sub(from + 1, col + AFTER_BYTES), from
end

-- `lines` with the long ones cut (in place: other buffers' chunks and yanks go so too).
function M.cut_lines(lines)
  for i = 1, #lines do
    if #lines[i] > LINE_BYTES then lines[i] = lines[i]:sub(1, LINE_BYTES) end
  end
  return lines
end

-- `lines` (rows from `first`) with the long ones cut; the cursor's at `row` as line_part cuts it.
local function cut_window(lines, first, row, col)
  local from = 0
  for i = 1, #lines do
    local l = lines[i]
    if #l > LINE_BYTES then
      if first + i - 1 == row then
        lines[i], from = M.line_part(l, col)
      else
        lines[i] = l:sub(1, LINE_BYTES)
      end
    end
  end
  return lines, from
end

-- What the host needs for a request. This module owns the window: it reads the buffer, picks
-- the rows and decides when the window goes whole. While the user types on one line the host
-- already has the rest of it: only that line is sent, with `base` naming the whole window it
-- belongs to (python/local_copilot/nvim/plugin.py keeps each whole window as sent and puts
-- the line into it; it decides nothing about the window).
---@return local_copilot.Snapshot
local function snapshot(buf, facts)
  local row, col = unpack(api.nvim_win_get_cursor(0))
  row = row - 1
  local ctx = config.get('context')
  local n = facts.n
  local first = math.max(0, row - ctx.lines_before)
  local last = math.min(n, row + 1 + ctx.lines_after)
  state.seq = state.seq + 1
  local snap = {
    buf = buf,
    tick = api.nvim_buf_get_changedtick(buf),
    row = row,
    col = col,
    first = first,
    nlines = n,
    ft = facts.ft,
    path = facts.path,
    et = facts.et,
    sw = facts.sw,
    ts = facts.ts,
    seq = state.seq,
    interval = state.interval, -- how fast the user types: the host continues a first part once they pause
  }
  local s = sessions.get(buf)
  local base = s.base
  if base and host.connected() and base.row == row and base.first == first and base.last == last and base.n == n then
    snap.base = base.seq
    local from
    snap.line, from = M.line_part(api.nvim_buf_get_lines(buf, row, row + 1, false)[1], col)
    if from > 0 then snap.line_from = from end
  else
    local from
    snap.lines, from = cut_window(api.nvim_buf_get_lines(buf, first, last, false), first, row, col)
    if from > 0 then snap.line_from = from end
    watch(buf, s)
    s.base = { seq = state.seq, row = row, first = first, last = last, n = n }
  end
  return snap
end

-- The suggestions shown since the host last counted them (it adds them to its stats).
function M.take_shown()
  local n = state.shown
  state.shown = 0
  return n
end

function M.count_shown()
  state.shown = state.shown + 1
end

-- The host lacks the window a snapshot was relative to (a message of ours it never got):
-- send it whole.
function M.resync(buf)
  local s = sessions.peek(buf)
  if s then s.base = nil end
  if buf == api.nvim_get_current_buf() and api.nvim_get_mode().mode:sub(1, 1) == 'i' then M.trigger() end
end

-- Ask the host: 'snapshot' (a suggestion) or 'alternatives' (more candidates here).
function M.request(kind)
  local buf = api.nvim_get_current_buf()
  local facts = buf_facts(buf)
  -- with options rejected, or a host given up, nothing answers (status() says which); the
  -- host would answer with the options before the rejected ones, so nothing is sent
  if not facts.on or not answering() or not host.ready() then return false end
  local snap = snapshot(buf, facts)
  ghost.expect(buf, snap.seq)
  if state.shown > 0 then snap.shown, state.shown = state.shown, 0 end
  sessions.get(buf).waiting = true
  host.send(kind, snap)
  return true
end

-- Request a suggestion for the cursor now (manual trigger; also what the timer calls).
function M.trigger() return M.request('snapshot') end

-- Whether a request for `buf` waits for its answer.
function M.waiting(buf)
  local s = sessions.peek(buf)
  return s ~= nil and s.waiting == true
end

-- The answer to `buf`'s latest request is in, shown or not (ghost.lua calls this).
function M.answered(buf)
  local s = sessions.peek(buf)
  if s then s.waiting = nil end
end

-- The host says nothing is in flight (the backend failed, or it rejects the options).
function M.nothing_waiting()
  for _, s in sessions.all() do s.waiting = nil end
end

-- Wait after a keystroke: short when the user pauses, longer while they type fast, so a
-- burst sends one request at its end instead of one per key. This is also the one estimate
-- of the typing interval: it rides with each snapshot.
local function debounce()
  local now = vim.uv.now()
  local base = config.get('debounce_ms')
  if state.last_key then
    local gap = now - state.last_key
    -- one keystroke runs on_change twice (CursorMovedI, then TextChangedI, in the same loop
    -- turn): a gap under 5 ms is that second event, not a keystroke
    if gap >= 5 and gap < 1000 then
      state.interval = state.interval and (0.7 * state.interval + 0.3 * gap) or gap
    end
  end
  state.last_key = now
  if not config.get('adaptive_debounce') or not state.interval then return base end
  return math.max(base, math.min(math.floor(state.interval * 0.5), 150))
end

local function scheduled_request(gen)
  if state.queued == gen then state.queued = nil end
  if gen ~= state.scheduled then return end
  if api.nvim_get_mode().mode:sub(1, 1) ~= 'i' then return end
  if vim.fn.pumvisible() == 1 and not config.get('request_during_completion') then return end
  M.trigger()
end

local function schedule_request()
  local delay = debounce()
  -- one keystroke runs on_change twice (CursorMovedI, then TextChangedI): the callback queued
  -- for the first reads the editor when it runs, so the second queues nothing (a callback
  -- and a loop turn less per key)
  if delay <= 0 and state.queued == state.scheduled then return end
  -- A callback already queued on the main loop is not taken back by stopping its timer: with
  -- a 0 ms delay the two events of one keystroke could each send the same snapshot. Only the
  -- latest schedule's callback runs.
  state.scheduled = state.scheduled + 1
  local gen = state.scheduled
  if state.timer then state.timer:stop() end
  if delay <= 0 then
    -- after this keystroke's events and its redraw, without a timer's extra loop turn
    state.queued = gen
    vim.schedule(function() scheduled_request(gen) end)
    return
  end
  state.timer = state.timer or vim.uv.new_timer()
  state.timer:start(delay, 0, vim.schedule_wrap(function() scheduled_request(gen) end))
end

-- TextChangedI, CursorMovedI, InsertEnter: keep a suggestion the user typed into, else ask anew.
function M.on_change()
  if not state.enabled then return end -- :LocalCopilot disable: not even a scheduled callback
  if ghost.current then
    if ghost.unchanged() then return end -- e.g. the CursorMovedI after a partial accept
    if config.get('reuse') and ghost.typed_through() then
      if not ghost.current.final then
        -- only the first part was fetched (or it is still streaming): the rest is asked for
        -- at the new spot; the trimmed text stays on screen until the answer replaces it
        if config.get('auto_trigger') then schedule_request() end
        return
      end
      -- the host caches the trimmed suggestion for this spot: backspace and retype reuse it
      if host.running() then
        local buf = api.nvim_get_current_buf()
        local snap = snapshot(buf, buf_facts(buf))
        snap.text = ghost.text()
        ghost.expect(buf, snap.seq) -- the host answers with the rest checked again when it differs
        host.tell('typed_through', snap)
      end
      return
    end
    ghost.clear()
  end
  if not config.get('auto_trigger') then return end
  schedule_request()
end

-- A typed character that does not continue the suggestion takes it off the screen before the
-- character is inserted: Neovim redraws the line for the character before CursorMovedI and
-- TextChangedI run, so clearing there (on_change) would cost a second redraw of the line per
-- key. Characters that continue it are left to on_change (typed_through). A suggestion that
-- no longer matches the cursor here would be cleared there too.
function M.on_char_pre()
  local cur = ghost.current
  if not cur then return end
  local char = vim.v.char
  if config.get('reuse') and char ~= '' and ghost.text(cur):sub(1, #char) == char then return end
  ghost.clear()
end

-- The cursor rests at a new place in Normal mode: the host has the server evaluate that
-- place's prompt with nothing to generate (a 'warm' snapshot), so the first key typed there
-- finds it cached. Entering Insert mode needs none: it asks for a suggestion at once. Only
-- while the host runs (a warm-up never starts it) and once per place.
local function warm_now()
  if api.nvim_get_mode().mode ~= 'n' or not host.running() then return end
  local buf = api.nvim_get_current_buf()
  local place = buf .. ':' .. api.nvim_win_get_cursor(0)[1]
  if place == state.warmed then return end
  local facts = buf_facts(buf)
  if not facts.on then return end
  state.warmed = place
  local edits = package.loaded['local_copilot.recent_edits'] -- (loaded while the option is on)
  if edits then edits.before_warm(buf, api.nvim_win_get_cursor(0)[1] - 1) end
  local snap = snapshot(buf, facts)
  host.send('warm', snap)
  state.rest.warms = state.rest.warms + 1
end

local function rest_decided()
  -- a move while this rest's callback was queued restarted the timer: that rest is pending
  state.rest.pending = state.rest_timer ~= nil and state.rest_timer:is_active()
  state.rest.decided = state.rest.decided + 1
end

-- CursorMoved (Normal mode): wait for the cursor to rest, then warm its place.
function M.on_rest()
  if not state.enabled or not config.get('warm_up') then return rest_decided() end
  state.rest.pending = true
  state.rest_timer = state.rest_timer or vim.uv.new_timer()
  state.rest_timer:start(WARM_REST_MS, 0, vim.schedule_wrap(function()
    warm_now()
    rest_decided()
  end))
end

-- Where the cursor's rests stand: { pending, decided, warms } (a copy). A test waits for
-- `pending` to clear, or `decided` to grow, instead of waiting a fixed time for the timer.
function M.rest_state() return vim.deepcopy(state.rest) end

-- InsertLeave, BufLeave, WinLeave, dismiss(): nothing is wanted here any more.
function M.on_leave()
  if state.timer then state.timer:stop() end
  state.scheduled = state.scheduled + 1 -- and a callback already queued does nothing
  local buf = api.nvim_get_current_buf()
  ghost.clear()
  ghost.expect(buf, nil)
  local s = sessions.peek(buf)
  if s and s.waiting then
    s.waiting = nil
    host.tell('cancel', { buf = buf })
  end
end

return M
