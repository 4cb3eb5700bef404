-- Public API of local-copilot.nvim. Keystrokes become snapshots sent to the Python host as
-- async notifications; the host answers with render plans drawn by ghost.lua.
local api = vim.api
local config = require('local_copilot.config')
local ghost = require('local_copilot.ghost')
local privacy = require('local_copilot.privacy')

local M = {}

local state = {
  enabled = true,
  seq = 0,
  sent_config_version = -1,
  timer = nil,
  scheduled = 0, -- generation of the latest scheduled request (see schedule_request)
  queued = nil, -- the generation whose vim.schedule callback has not run yet
  attached = false,
  warned_unregistered = false,
  waiting = {}, -- buf -> true while a request is in flight (for status())
  backend = 'unknown', -- 'ok' | 'down' | 'unknown', as the host last reported
  backend_message = '',
  last_key = nil, -- uv.now() of the previous keystroke
  interval = nil, -- smoothed time between keystrokes (ms)
  chan = nil, -- the python3 host's channel, once it runs
  direct = nil, -- the host worker's own channel, once it connected (see M._use_channel)
  base = {}, -- buf -> the last whole window sent: { seq, row, first, last, n }
  watched = {}, -- buf -> true once nvim_buf_attach watches its edits
  registered = false, -- the rplugin was found registered (it stays so)
  facts = {}, -- buf -> what the keystroke path reads of a buffer (see buf_facts)
  revived = 0, -- python3 hosts started anew after one exited (see revive_host)
  host_gone = false, -- it kept exiting: nothing is sent until Neovim restarts
  -- suggestions shown since the host last heard (it counts them): they ride along with the next
  -- request, or the host asks (_take_shown) for its stats. A message of their own woke the host
  -- once per suggestion only to count it (bench/run.py, host CPU per key)
  shown = 0,
}

-- the answer to a buffer's latest request is in, shown or not: nothing is in flight there
function ghost.on_answered(buf) state.waiting[buf] = nil end

-- The manifest defines the rplugin's functions lazily: a FuncUndefined autocmd starts the
-- host on first call. Either form means :UpdateRemotePlugins registered us.
function M.registered(name)
  name = name or 'LocalCopilotEvent'
  return vim.fn.exists('*' .. name) == 1 or vim.fn.exists('#FuncUndefined#' .. name) == 1
end

local function host_ready()
  if state.registered then return true end
  if M.registered() then
    state.registered = true
    return true
  end
  if not state.warned_unregistered then
    state.warned_unregistered = true
    M.notify('local-copilot: the remote plugin is not registered; run :UpdateRemotePlugins and restart (:checkhealth local_copilot)', 'error')
  end
  return false
end

local function host_running()
  return vim.fn.exists('*LocalCopilotEvent') == 1
end

local MAX_REVIVALS = 3

-- The python3 host exited (a crash, the OOM killer): Neovim's remote#host keeps handing out
-- its dead channel and never starts another, so every event would fail. Registering the host
-- anew makes the next Require start a fresh one, with every registered plugin. Returns its
-- channel, or nil once the host has exited too often.
local function revive_host()
  if state.revived >= MAX_REVIVALS then
    state.host_gone = true
    M.notify('local-copilot: the Python host keeps exiting; completion is off until Neovim restarts'
      .. ' (:LocalCopilot log, :checkhealth local_copilot)', 'error')
    return nil
  end
  state.revived = state.revived + 1
  M.notify('local-copilot: the Python host exited; starting a new one (:LocalCopilot log)', 'warn')
  vim.cmd("call remote#host#Register('python3', '*', function('provider#python3#Require'))")
  local ok, id = pcall(vim.fn['remote#host#Require'], 'python3')
  if not ok or type(id) ~= 'number' or id <= 0 then return nil end
  -- rplugin functions (LocalCopilotCall, ...) were defined with the dead channel in them
  pcall(api.nvim_exec2, ([[
    for plugin in remote#host#PluginsForHost('python3')
      for spec in plugin.specs
        if spec.type ==# 'function'
          call remote#define#FunctionOnChannel(%d, plugin.path.':function:'.spec.name, spec.sync, spec.name, spec.opts)
        endif
      endfor
    endfor]]):format(id), {})
  state.direct = nil
  state.sent_config_version = -1 -- the new host has no options yet
  return id
end

-- The python3 host's channel once it runs: events go to it with vim.rpcnotify. The rplugin
-- function LocalCopilotEvent (which also starts the host) converts its arguments to Vim values
-- first, ~0.1 ms more per keystroke for a snapshot (bench/run.py).
local function host_channel()
  local chan = state.chan
  if chan and api.nvim_get_chan_info(chan).id == chan then return chan end
  state.chan = nil
  if state.host_gone or not host_running() then return nil end
  local ok, id = pcall(vim.fn['remote#host#Require'], 'python3')
  if ok and type(id) == 'number' and id > 0 and api.nvim_get_chan_info(id).id ~= id then
    id = revive_host()
  end
  if ok and type(id) == 'number' and id > 0 then
    state.chan = id
    state.base = {} -- a new host has none of the windows sent before
  end
  return state.chan
end

-- The host's worker connects to Neovim's server address on a channel of its own
-- (python/local_copilot/nvim/channel.py): events sent there skip two thread hops in the host.
-- The Python host could not be started (host.lua): nothing is sent until :LocalCopilot enable.
function M._host_failed() state.host_gone = true end

function M._use_channel(chan)
  state.direct = chan
  state.base = {} -- the next snapshot sends its window whole, on the new channel
end

-- One event to the host (bench/instrument.lua wraps this to see what is sent).
function M._emit(name, payload)
  -- the known channels are used as they are (asking Neovim whether one is still open cost
  -- more than the notification); a failed send means the host went away: find or start it
  local direct = state.direct
  if direct then
    if pcall(vim.rpcnotify, direct, 'local_copilot_event', name, payload) then return end
    state.direct = nil
  end
  if state.chan and pcall(vim.rpcnotify, state.chan, 'local_copilot_event', name, payload) then return end
  local chan = host_channel()
  if state.host_gone then return end
  if chan then
    if state.sent_config_version ~= config.version and name ~= 'config' then
      -- a host started anew after the last one exited: it needs the options first
      state.sent_config_version = config.version
      pcall(vim.rpcnotify, chan, 'local_copilot_event', 'config', config.user)
    end
    pcall(vim.rpcnotify, chan, 'local_copilot_event', name, payload)
  elseif not host_running() then
    if require('local_copilot.host').start(name, payload) then host_channel() end
  end -- else a host that exited could not be started anew now: the next event tries again
end

local function send(name, payload)
  if not host_ready() then return end
  M._emit(name, payload)
end

-- Send an event, starting the host if needed (commands); carries the options the first time.
function M._send_now(name, payload)
  if not host_ready() then return end
  if state.sent_config_version ~= config.version then
    state.sent_config_version = config.version
    send('config', config.user)
  end
  send(name, payload)
end

-- Events the host only counts; never worth starting it for.
local function tell(name, payload)
  if host_running() then M._emit(name, payload) end
end

-- Options: see :help local-copilot-config. Stores them; nothing starts here.
function M.setup(opts)
  vim.validate('opts', opts, 'table', true)
  config.set(opts or {})
  -- the host judges the new options (a host started later too): it says again if they are bad
  if state.backend == 'bad option' then state.backend, state.backend_message = nil, '' end
  require('local_copilot.install').use_private_host()
  M._define_highlights()
  require('local_copilot.keymaps').apply(config.get('keymaps'))
  M.attach()
  -- a host already running must hear about the new options now, not on the next keystroke
  if host_running() and state.sent_config_version >= 0 then
    state.sent_config_version = config.version
    send('config', config.user)
  end
end

function M._define_highlights()
  api.nvim_set_hl(0, 'LocalCopilotSuggestion', { link = 'Comment', default = true })
  api.nvim_set_hl(0, 'LocalCopilotAnnotation', { link = 'LocalCopilotSuggestion', default = true })
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
-- there and the options a snapshot carries. Each vim.bo/vim.b read costs microseconds, ~0.1 ms
-- per keystroke in all (bench/run.py), so they are read once per Insert-mode session and
-- again when an option is set, the buffer is renamed, the options change or the line count
-- does (the size limit). status() and commands still ask buf_enabled() each time.
local function buf_facts(buf)
  local n = api.nvim_buf_line_count(buf)
  local f = state.facts[buf]
  if f and f.n == n and f.version == config.version and f.enabled == state.enabled then return f end
  local bo = vim.bo[buf]
  f = {
    n = n, version = config.version, enabled = state.enabled,
    on = M.buf_enabled(buf),
    ft = bo.filetype, path = api.nvim_buf_get_name(buf), et = bo.expandtab, sw = bo.shiftwidth, ts = bo.tabstop,
  }
  state.facts[buf] = f
  return f
end

-- The host's privacy rules or a verdict changed: read `buf`'s facts (all, without one) anew.
function M._forget_facts(buf)
  if buf then state.facts[buf] = nil else state.facts = {} end
end

local function forget_facts(ev)
  if ev.event == 'OptionSet' then
    state.facts = {} -- a global option may be the one that changed
  else
    state.facts[ev.buf] = nil
  end
end

-- Buffers whose edits are watched: an edit outside the row of the last whole window sent
-- makes the next snapshot whole again (see snapshot()).
local function watch(buf)
  if state.watched[buf] then return end
  state.watched[buf] = true
  api.nvim_buf_attach(buf, false, {
    on_lines = function(_, b, _, first, last_old, last_new)
      local base = state.base[b]
      if base and not (first == base.row and last_old == base.row + 1 and last_new == base.row + 1) then
        state.base[b] = nil
      end
    end,
    on_reload = function(_, b) state.base[b] = nil end,
    on_detach = function(_, b)
      state.watched[b], state.base[b] = nil, nil
    end,
  })
end

-- What the host needs for a request. While the user types on one line the host already has
-- the rest of the window: only that line is sent, with `base` naming the whole window it
-- belongs to (python/local_copilot/nvim/plugin.py rebuilds the snapshot).
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
  }
  local base = state.base[buf]
  if base and state.chan and base.row == row and base.first == first and base.last == last and base.n == n then
    snap.base = base.seq
    snap.line = api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
  else
    snap.lines = api.nvim_buf_get_lines(buf, first, last, false)
    watch(buf)
    state.base[buf] = { seq = state.seq, row = row, first = first, last = last, n = n }
  end
  return snap
end

-- The suggestions shown since the host last counted them (it adds them to its stats).
function M._take_shown()
  local n = state.shown
  state.shown = 0
  return n
end

-- The host lacks the window a snapshot was relative to (it restarted): send it whole.
function M._resync(buf)
  state.base[buf] = nil
  if buf == api.nvim_get_current_buf() and api.nvim_get_mode().mode:sub(1, 1) == 'i' then M.trigger() end
end

local function request(kind)
  local buf = api.nvim_get_current_buf()
  local facts = buf_facts(buf)
  if not facts.on or not host_ready() then return false end
  local snap = snapshot(buf, facts)
  ghost.last_seq[buf] = snap.seq
  if state.sent_config_version ~= config.version then
    state.sent_config_version = config.version
    snap.config = config.user
  end
  if state.shown > 0 then snap.shown, state.shown = state.shown, 0 end
  -- with options the host rejected nothing answers (status() says 'bad option')
  if state.backend ~= 'bad option' then state.waiting[buf] = true end
  send(kind, snap)
  return true
end

-- Request a suggestion for the cursor now (manual trigger; also what the timer calls).
function M.trigger() return request('snapshot') end

-- Wait after a keystroke: short when the user pauses, longer while they type fast, so a
-- burst sends one request at its end instead of one per key.
local function debounce()
  local now = vim.uv.now()
  local base = config.get('debounce_ms')
  if state.last_key then
    local gap = now - state.last_key
    -- one keystroke runs on_change twice (CursorMovedI, then TextChangedI, in the same loop
    -- turn): a gap under 5 ms is that second event, and counting it as a keystroke pulled the
    -- estimate down by 30% per key (bench/run.py: 90 ms/key was estimated as ~37 ms)
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
  -- a 0 ms delay the two events of one keystroke could each send the same snapshot
  -- (tests/integration/test_faults.py saw two requests for one key). Only the latest
  -- schedule's callback runs.
  state.scheduled = state.scheduled + 1
  local gen = state.scheduled
  if state.timer then state.timer:stop() end
  if delay <= 0 then
    -- after this keystroke's events and its redraw, without a timer's extra loop turn
    -- (bench/run.py, Neovim main thread CPU added / key)
    state.queued = gen
    vim.schedule(function() scheduled_request(gen) end)
    return
  end
  state.timer = state.timer or vim.uv.new_timer()
  state.timer:start(delay, 0, vim.schedule_wrap(function() scheduled_request(gen) end))
end

local function on_change()
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
      if host_running() then
        local buf = api.nvim_get_current_buf()
        local snap = snapshot(buf, buf_facts(buf))
        snap.text = ghost.text()
        tell('typed_through', snap)
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
-- TextChangedI run, so clearing there (on_change) cost a second redraw of the line per key,
-- ~0.15 ms of Neovim's main thread with Vim's Python syntax (bench/run.py, split by variant).
-- Characters that continue it are left to on_change (typed_through). A suggestion that no
-- longer matches the cursor here would be cleared there too (disable() clears it as well).
local function on_char_pre()
  local cur = ghost.current
  if not cur then return end
  local char = vim.v.char
  if config.get('reuse') and char ~= '' and ghost.text(cur):sub(1, #char) == char then return end
  ghost.clear()
end

local function on_leave()
  if state.timer then state.timer:stop() end
  state.scheduled = state.scheduled + 1 -- and a callback already queued does nothing
  local buf = api.nvim_get_current_buf()
  ghost.clear()
  ghost.last_seq[buf] = nil
  if state.waiting[buf] then
    state.waiting[buf] = nil
    tell('cancel', buf)
  end
end

-- Cross-file context: text around the cursor of buffers the user visits, writes or jumps
-- in, and what they yank, goes to the host's ring of chunks. Never starts the host, never
-- reads a buffer that is disabled (secrets included).
local RING_SCOPE = 64 -- lines on each side of the cursor; the host picks a 64-line chunk
local JUMP = 32 -- a cursor move of more lines than this is a jump worth remembering

local function send_chunk(buf)
  if not host_running() or not api.nvim_buf_is_valid(buf) or not M.buf_enabled(buf) then return end
  if config.get('context').extra_tokens == 0 then return end
  local win = vim.fn.bufwinid(buf)
  local row = win ~= -1 and api.nvim_win_get_cursor(win)[1] - 1 or 0
  local first = math.max(0, row - RING_SCOPE)
  tell('chunk', {
    path = api.nvim_buf_get_name(buf),
    lines = api.nvim_buf_get_lines(buf, first, row + RING_SCOPE, false),
    around = row - first,
  })
end

local last_row = {}

local function on_cursor_moved(ev)
  local row = api.nvim_win_get_cursor(0)[1]
  local prev = last_row[ev.buf]
  last_row[ev.buf] = row
  if prev and math.abs(row - prev) > JUMP then send_chunk(ev.buf) end
end

local function on_yank(ev)
  if not host_running() or not M.buf_enabled(ev.buf) or config.get('context').extra_tokens == 0 then return end
  local lines = vim.v.event.regcontents
  if type(lines) == 'table' and #lines > 0 then
    tell('yank', { path = api.nvim_buf_get_name(ev.buf), lines = lines })
  end
end

-- Create the autocmds; `from_insert_enter` also handles the InsertEnter that loaded us.
function M.attach(from_insert_enter)
  if from_insert_enter and not state.attached then vim.schedule(on_change) end
  if state.attached then return end
  state.attached = true
  M._define_highlights()
  local group = api.nvim_create_augroup('LocalCopilot', { clear = true })
  local au = function(ev, fn, desc) api.nvim_create_autocmd(ev, { group = group, callback = fn, desc = 'local-copilot: ' .. desc }) end
  au({ 'InsertEnter', 'OptionSet', 'BufFilePost', 'BufWipeout' }, forget_facts, 'read buffer options anew')
  au('BufWipeout', function(ev)
    state.base[ev.buf] = nil
    privacy.forget(ev.buf)
    tell('forget', ev.buf) -- the host drops the window it kept for this buffer
  end, 'forget a wiped buffer')
  au({ 'InsertEnter', 'TextChangedI', 'TextChangedP', 'CursorMovedI' }, on_change, 'request a suggestion')
  au('InsertCharPre', on_char_pre, 'clear a suggestion the typed character does not continue')
  au({ 'InsertLeave', 'BufLeave', 'WinLeave' }, on_leave, 'clear the suggestion')
  au('CompleteChanged', function()
    if config.get('hide_during_completion') then ghost.set_hidden(true) end
  end, 'hide under the completion menu')
  au('CompleteDone', function() vim.schedule(function()
    if vim.fn.pumvisible() == 0 then ghost.set_hidden(false) end
  end) end, 'show again after the completion menu')
  au('ColorScheme', M._define_highlights, 'highlight')
  au('BufEnter', function(ev) vim.defer_fn(function() send_chunk(ev.buf) end, 100) end, 'remember this buffer for context')
  au({ 'BufLeave', 'BufWritePost' }, function(ev) send_chunk(ev.buf) end, 'remember this buffer for context')
  au('CursorMoved', on_cursor_moved, 'remember the region around a jump')
  au('VimLeavePre', function()
    -- release the servers we share; the last Neovim out stops them
    if vim.fn.exists('*LocalCopilotCall') == 1 then pcall(vim.fn.LocalCopilotCall, 'leaving') end
  end, 'release model servers')
  au('TextYankPost', on_yank, 'remember yanked text for context')
  api.nvim_create_autocmd('User', { group = group, pattern = 'LocalCopilotSuggestion', callback = function()
    state.shown = state.shown + 1
  end, desc = 'local-copilot: count a suggestion shown' })
end

local function accepted(kind, ok)
  if ok then tell('accepted', kind) end
  return ok
end

function M.accept() return accepted('full', ghost.accept()) end
function M.accept_word() return accepted('word', ghost.accept_word()) end
function M.accept_line() return accepted('line', ghost.accept_line()) end
function M.is_visible() return ghost.is_visible() end

function M.dismiss()
  if not ghost.is_visible() then return false end
  on_leave()
  return true
end

-- Next/previous alternative. With one candidate known, fetch more (shown as (i/n));
-- with nothing shown, request a suggestion.
local function cycle(step)
  if ghost.cycle(step) then return true end
  if ghost.is_visible() then
    ghost.pending_cycle = step
    return request('alternatives')
  end
  return M.trigger()
end

function M.next() return cycle(1) end
function M.prev() return cycle(-1) end

function M.enable()
  state.enabled = true
  state.host_gone = false -- a host that would not start is tried again (host.lua)
  state.revived = 0
  require('local_copilot.host').retry()
end
function M.disable() state.enabled = false; on_leave() end
function M.toggle() if state.enabled then M.disable() else M.enable() end end

-- For statuslines: 'disabled: <why>' (the privacy policy refuses the buffer), 'disabled',
-- 'bad option', 'backend down', 'showing i/n', 'waiting' or 'idle'.
function M.status()
  local buf = api.nvim_get_current_buf()
  local why = privacy.reason(buf, api.nvim_buf_get_name(buf))
  if why then return 'disabled: ' .. why end
  if not M.buf_enabled(buf) then return 'disabled' end
  if state.backend == 'bad option' then return 'bad option' end
  if state.backend == 'down' then return 'backend down' end
  if ghost.is_visible() then
    local cur = ghost.current
    return ('showing %d/%d'):format(cur.index, #cur.items)
  end
  if state.waiting[buf] then return 'waiting' end
  return 'idle'
end

-- Called by the Python host when a request fails or succeeds after failures ('down', 'ok'),
-- and when it rejects the options ('bad option', until the next setup()).
function M._backend_state(s, message)
  if s ~= 'ok' then state.waiting = {} end -- nothing is in flight now
  state.backend, state.backend_message = s, message or ''
end

-- Called by the Python host; safe from any context.
function M.notify(msg, level)
  vim.schedule(function()
    vim.notify(msg, vim.log.levels[(level or 'warn'):upper()] or vim.log.levels.WARN, { title = 'local-copilot' })
  end)
end

return M
