-- Benchmark instrumentation, loaded into the Neovim under test (bench/harness.py).
-- Everything is timed inside Neovim with vim.uv.hrtime, so the bench client's RPC latency
-- does not pollute the numbers:
--   * keys are typed by a uv timer in this process (nvim_input), their times recorded;
--   * ghost.show is wrapped: the time a plan for the current text is drawn (extmark placed);
--   * the plugin's main-thread work is timed: every autocmd callback of the LocalCopilot
--     group, trigger() (snapshot + notification, run by the debounce timer) and ghost.show
--     (render plans from the host); nested calls are counted once.
--   * the same callbacks' CPU time: on a 2-core machine shared with the host and the server,
--     the wall time also holds the moments Neovim was preempted mid-callback. The main
--     thread's own, from CLOCK_THREAD_CPUTIME_ID (LuaJIT's FFI, Linux): the process's
--     getrusage also counted Neovim's other threads and over-read, and getrusage_thread
--     moves in steps of the scheduler tick (most ~50 us callbacks read 0).
local api, hr = vim.api, vim.uv.hrtime
local cpu_ns
local has_ffi, ffi = pcall(require, 'ffi')
if has_ffi and jit and jit.os == 'Linux' then
  pcall(ffi.cdef, 'typedef struct { long tv_sec; long tv_nsec; } lcb_timespec;'
    .. ' int clock_gettime(int clk, lcb_timespec *ts);')
  local ts = ffi.new('lcb_timespec')
  local CLOCK_THREAD_CPUTIME_ID = 3
  cpu_ns = function()
    ffi.C.clock_gettime(CLOCK_THREAD_CPUTIME_ID, ts)
    return tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
  end
else
  cpu_ns = function()
    local r = vim.uv.getrusage()
    return ((r.utime.sec + r.stime.sec) * 1e6 + r.utime.usec + r.stime.usec) * 1000
  end
end
local lc = require('local_copilot')
local ghost = require('local_copilot.ghost')

local B = {
  recording = false,
  keys = {}, -- hrtime when each key of the burst was fed
  key_index = 0,
  busy = {}, -- key index -> ns of plugin main-thread work since that key
  cpu = {}, -- key index -> ns of Neovim CPU time in that work
  calls = {}, -- key index -> number of plugin callbacks since that key
  draws = {}, -- { t, tick, final } for each drawn plan during the burst
  snap_ns = {}, -- trigger() durations (snapshot + notification)
  last_snap = nil,
  depth = 0,
}
_G.LCB = B

B.by_name = {} -- name -> { n, ns }
local function timed(fn, on_done, name)
  return function(...)
    if B.depth > 0 then return fn(...) end
    B.depth = 1
    local c0, t0 = cpu_ns(), hr()
    local res = { pcall(fn, ...) }
    local dt = hr() - t0
    local dc = cpu_ns() - c0
    B.depth = 0
    if B.recording then
      local k = B.key_index
      B.busy[k] = (B.busy[k] or 0) + dt
      B.cpu[k] = (B.cpu[k] or 0) + dc
      B.calls[k] = (B.calls[k] or 0) + 1
      local e = B.by_name[name or '?'] or { n = 0, ns = 0 }
      e.n, e.ns = e.n + 1, e.ns + dt
      B.by_name[name or '?'] = e
    end
    if on_done then on_done(dt, res, ...) end
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, table.maxn(res))
  end
end

-- ghost.show: render plans from the Python host
local show = ghost.show
ghost.show = timed(show, function(_, res, plan)
  if not B.recording or not res[2] then return end
  if ghost.current and ghost.text() ~= '' and #api.nvim_buf_get_extmarks(plan.buf, ghost.ns, 0, -1, { limit = 1 }) > 0 then
    -- what the user sees: the characters shown, and whether the cursor's line is whole yet
    -- (the suggestion goes on below it, or nothing more is coming)
    local text = ghost.text()
    B.draws[#B.draws + 1] = { t = hr(), tick = plan.tick, final = plan.final, chars = vim.fn.strchars(text),
      whole_line = plan.final == true or text:find('\n', 1, true) ~= nil }
  end
end, 'ghost.show')

-- trigger(): what the debounce timer runs (buf_enabled, snapshot, rpcnotify)
local trigger = require('local_copilot.trigger')
trigger.trigger = timed(trigger.trigger, function(dt) B.snap_ns[#B.snap_ns + 1] = dt end, 'trigger')

-- capture the last whole snapshot sent (the Python half of the snapshot+prompt cost is timed on it)
local host = require('local_copilot.host')
local emit = host.emit
host.emit = function(name, payload)
  if name == 'snapshot' and B.capture and payload.lines then B.last_snap = payload end
  return emit(name, payload)
end

-- every autocmd of the plugin's group, re-created with a timed callback
local seen = {}
for _, au in ipairs(api.nvim_get_autocmds({ group = 'LocalCopilot' })) do
  if type(au.callback) == 'function' then
    if not seen[au.id] then
      seen[au.id] = true
      pcall(api.nvim_del_autocmd, au.id)
    end
    api.nvim_create_autocmd(au.event, {
      group = 'LocalCopilot', pattern = au.pattern, once = au.once, callback = timed(au.callback, nil, au.event),
      desc = au.desc,
    })
  end
end

-- Type `keys` (a list of nvim_input strings) one every `interval_ms`, from a uv timer here.
function B.burst(keys, interval_ms)
  B.keys, B.busy, B.cpu, B.calls, B.draws, B.key_index, B.by_name, B.snap_ns = {}, {}, {}, {}, {}, 0, {}, {}
  B.recording = true
  B.done = false
  local i = 0
  local timer = vim.uv.new_timer()
  timer:start(0, interval_ms, function()
    i = i + 1
    if i > #keys then
      timer:stop()
      timer:close()
      B.done = true
      return
    end
    B.key_index = i
    B.keys[i] = hr()
    api.nvim_input(keys[i])
  end)
end

-- The burst's record, once typing is done; `tick` is the buffer's changedtick now.
function B.result()
  return {
    keys = B.keys, busy = B.busy, cpu = B.cpu, by_name = B.by_name, trigger_ns = B.snap_ns, calls = B.calls, draws = B.draws, done = B.done,
    tick = api.nvim_buf_get_changedtick(0), status = lc.status(), mode = api.nvim_get_mode().mode,
  }
end

function B.stop() B.recording = false end

-- Time trigger() (snapshot + notification) `n` times at the cursor; returns ns per call.
-- Nothing changes between them, so after the first whole window each sends the cursor line.
function B.time_trigger(n)
  local out = {}
  B.capture = true
  -- one whole window first (captured); the timed triggers then send what typing sends
  trigger.resync(api.nvim_get_current_buf())
  for i = 1, n do
    local t0 = hr()
    trigger.trigger()
    out[i] = hr() - t0
  end
  B.capture = false
  return out
end

return true
