-- The channel to the Python host: the only code that talks to it. Events go out as
-- notifications (the keystroke path never waits on Python; protocol.lua lists them). The
-- host starts on first use; one that exited is started anew, a few times at most.
--
-- The host is the plugin's own process (host type 'local_copilot', python.lua), run by the
-- plugin's own python, never Neovim's python3 host: other Python remote plugins keep theirs.
-- A python without pynvim cannot run it: a failure gives one message naming the fix (why is
-- read from that python's stderr, without waiting); nothing is sent until :LocalCopilot enable
-- or a restart.
local api = vim.api
local config = require('local_copilot.config')
local python = require('local_copilot.python')

local M = {}

local state = {
  chan = nil, -- the host's channel, once it runs
  direct = nil, -- the host worker's own channel, once it connected (see use_channel)
  registered = false, -- the rplugin was found registered (it stays so)
  warned_unregistered = false,
  revived = 0, -- hosts started anew after one exited (see revive)
  gone = false, -- it kept exiting, or would not start: nothing is sent until retry()
  failed = nil, -- why the host did not start, once it did not
  generation = 0, -- hosts this module started (an older one's exit is not the current one's)
  up = false, -- the host started last described itself (pynvim runs there), see spawn
  lost = false, -- the host started last ran and exited: the next start is a revival
}

local notify = function(_, _) end
local on_new_host = function() end

---@param opts { notify: fun(msg: string, level: string), on_new_host: fun() }
--- on_new_host: a host that is not the one events went to before (it knows no earlier window)
function M.setup(opts)
  notify, on_new_host = opts.notify, opts.on_new_host
end

-- The manifest defines the rplugin's functions lazily: a FuncUndefined autocmd starts the
-- host on first call. Either form means :UpdateRemotePlugins registered us.
function M.registered(name)
  name = name or 'LocalCopilotEvent'
  return vim.fn.exists('*' .. name) == 1 or vim.fn.exists('#FuncUndefined#' .. name) == 1
end

-- Whether events can go to a host (said once, with the fix, when the plugin is not registered).
function M.ready()
  if state.registered then return true end
  if M.registered() then
    state.registered = true
    return true
  end
  if not state.warned_unregistered then
    state.warned_unregistered = true
    notify('local-copilot: the remote plugin is not registered; run :UpdateRemotePlugins and restart (:checkhealth local_copilot)', 'error')
  end
  return false
end

-- Whether a host runs: events reach it on a known channel, or its event function is defined.
-- (A host a sync call started, e.g. `:LocalCopilot stats` before the first key, defines only
-- LocalCopilotCall; events then go on the worker's own channel and never call
-- LocalCopilotEvent, so the function alone would say no for the whole session.)
function M.running()
  return state.chan ~= nil or state.direct ~= nil or vim.fn.exists('*LocalCopilotEvent') == 1
end

-- The host did not start (`why` names the python and the cause, from its stderr): said once,
-- nothing is sent until :LocalCopilot enable.
local function fail(why)
  state.failed, state.gone = why, true
  notify('local-copilot: the Python host did not start (' .. why .. '); completion is off until'
    .. ' :LocalCopilot enable or a restart. Run :checkhealth local_copilot', 'error')
end

-- Why the host could not start, or nil.
function M.failure() return state.failed end

-- Whether the host was given up (it kept exiting, or would not start): nothing is sent, and
-- no call is made, until :LocalCopilot enable (retry()).
function M.stopped() return state.gone end

-- :LocalCopilot enable: a host that would not start, or kept exiting, is tried again.
function M.retry()
  state.failed, state.gone, state.revived, state.lost = nil, false, 0, false
  -- the host started next has no options yet (one still running gets them again: harmless)
  config.host_lacks_options()
end

-- The host process is started with jobstart, which returns at once: Neovim's own provider
-- (remote#host#Require -> provider#Poll) would wait in the main loop until a new host answers
-- 'poll' (~250-300 ms at the first Insert, 0.2-1 s at each revival), and detecting a python
-- first (provider#pythonx#Detect) runs it synchronously (~0.9 s for one that cannot run the
-- host). Events sent meanwhile wait in the channel's pipe: pynvim loads the plugin before it
-- reads them. The rplugin's functions (LocalCopilotCall) are bound to this channel.

-- Why a host that exited before it connected did not start, from its last stderr lines (`who`:
-- the python and where it came from, python.find()).
local function start_failure(who, stderr)
  local text = table.concat(stderr, '\n')
  if text:find("No module named '?neovim") or text:find("No module named '?pynvim") then
    return who .. ' has no pynvim'
  end
  local last = ''
  for _, line in ipairs(stderr) do
    if line:match('%S') then last = vim.trim(line) end
  end
  return who .. ' exited' .. (last ~= '' and (': ' .. last) or '')
end

-- Start the host without waiting for it; its channel, or nil (the failure is told).
local function spawn()
  local prog, who = python.find()
  if not prog then
    fail(who)
    return nil
  end
  local args = { prog, '-c', python.HOST_SCRIPT }
  for _, plugin in ipairs(vim.fn['remote#host#PluginsForHost'](python.HOST)) do
    args[#args + 1] = plugin.path
  end
  state.generation = state.generation + 1
  local generation = state.generation
  local stderr = {}
  local ok, id = pcall(vim.fn.jobstart, args, {
    rpc = true,
    on_stderr = function(_, data)
      for _, line in ipairs(data) do
        if line ~= '' then stderr[#stderr + 1] = line end
      end
      while #stderr > 20 do table.remove(stderr, 1) end
    end,
    on_exit = function(chan)
      if generation ~= state.generation then return end
      if state.chan == chan then state.chan = nil end
      -- Neovim's remote#host would hand out the dead channel: registered anew, it asks again
      pcall(python.register)
      -- a host that never described itself did not start; one that did exited (the next
      -- event revives it)
      if state.up then
        state.lost = true
      else
        fail(start_failure(who, stderr))
      end
    end,
  })
  if not ok or type(id) ~= 'number' or id <= 0 then
    fail(who .. ' cannot run')
    return nil
  end
  state.up = false
  -- pynvim describes itself (nvim_set_client_info, type 'host') once it runs: from then on
  -- an exit is a host that died, not one that could not start
  api.nvim_create_autocmd('ChanInfo', {
    group = api.nvim_create_augroup('local_copilot_host', { clear = true }),
    callback = function()
      local info = vim.v.event.info
      if generation == state.generation and info.id == id and info.client and info.client.type == 'host' then
        state.up = true
        return true
      end
    end,
  })
  -- remote#host forgets the channel it had for the type: remote#host#Require asks for this one
  python.register()
  -- rplugin functions already defined hold an earlier host's channel in them
  pcall(api.nvim_exec2, ([[
    for plugin in remote#host#PluginsForHost('local_copilot')
      for spec in plugin.specs
        if spec.type ==# 'function' && exists('*' . spec.name)
          call remote#define#FunctionOnChannel(%d, plugin.path.':function:'.spec.name, spec.sync, spec.name, spec.opts)
        endif
      endfor
    endfor]]):format(id), {})
  return id
end

local channel -- the host's channel, found or started (below)

-- A sync call to the host (commands, health): its answer, or nil and why not. A host not
-- started yet is started as an event starts it (without waiting), then the call waits for
-- its answer as any sync call does.
function M.call(...)
  if state.failed then return nil, 'the Python host did not start (' .. state.failed .. ')' end
  -- given up (it kept exiting): no call starts another until :LocalCopilot enable
  if state.gone then return nil, 'host stopped: it kept exiting; :LocalCopilot enable starts it again' end
  if not channel() then
    return nil, 'the Python host did not start' .. (state.failed and (' (' .. state.failed .. ')') or '')
  end
  -- the function is defined on first call (FuncUndefined), onto the channel registered above
  vim.g.local_copilot_call = { ... }
  local ok, err = pcall(vim.cmd, 'let g:local_copilot_call = call("LocalCopilotCall", g:local_copilot_call)')
  local res = vim.g.local_copilot_call
  vim.g.local_copilot_call = nil
  if ok then return res end
  return nil, 'the Python host did not answer (' .. tostring(err):gsub('^.-Vim[^:]*:', ''):match('[^\n]*') .. ')'
end

local MAX_REVIVALS = 3

-- The host exited (a crash, the OOM killer): a fresh one is started in its place. Returns
-- its channel, or nil once the host has exited too often.
local function revive()
  if state.revived >= MAX_REVIVALS then
    state.gone = true
    notify('local-copilot: the Python host keeps exiting; completion is off until :LocalCopilot enable'
      .. ' (:LocalCopilot log, :checkhealth local_copilot)', 'error')
    return nil
  end
  state.revived, state.lost = state.revived + 1, false
  notify('local-copilot: the Python host exited; starting a new one (:LocalCopilot log)', 'warn')
  state.direct = nil
  config.host_lacks_options() -- the new host has no options yet
  return spawn()
end

-- The host's channel: the one known, or a new one (started without waiting; a dead one is
-- revived). Events go to it with vim.rpcnotify; the rplugin function LocalCopilotEvent would
-- convert its arguments to Vim values first, which costs a snapshot about as much again.
function channel()
  local chan = state.chan
  if chan and api.nvim_get_chan_info(chan).id == chan then return chan end
  state.chan = nil
  if state.gone or state.failed then return nil end
  local id
  if state.lost then
    id = revive()
  else
    id = spawn()
  end
  if type(id) == 'number' and id > 0 then
    state.chan = id
    on_new_host()
  end
  return state.chan
end

-- The host's channel, started when none runs (python.lua's factory: a function of the plugin
-- called before the host ran); nil when it cannot start.
function M.start()
  return channel()
end

-- Whether the host's channel is known (a snapshot may then be sent relative to the
-- window it has).
function M.connected()
  return state.chan ~= nil
end

-- The host's worker connects to Neovim's server address on a channel of its own
-- (python/local_copilot/nvim/channel.py): events sent there skip two thread hops in the host.
-- The host holds what comes on the new channel until the `switched` marker, sent after every
-- earlier event on the channel they went on, reaches it: it hears them all in the order sent.
function M.use_channel(chan)
  local marker = { channel = chan }
  local told = state.chan ~= nil and pcall(vim.rpcnotify, state.chan, 'local_copilot_event', 'switched', marker)
  if not told then pcall(vim.rpcnotify, chan, 'local_copilot_event', 'switched', marker) end
  state.direct, state.up = chan, true
  on_new_host() -- the next snapshot sends its window whole, on the new channel
end

-- One event on the channels known, else on the host's channel found or started (dropped
-- when no host is there to take it).
local function deliver(name, payload)
  -- the known channels are used as they are (asking Neovim whether one is still open cost
  -- more than the notification); a failed send means the host went away: find or start it
  local direct = state.direct
  if direct then
    if pcall(vim.rpcnotify, direct, 'local_copilot_event', name, payload) then return end
    state.direct = nil
  end
  if state.chan and pcall(vim.rpcnotify, state.chan, 'local_copilot_event', name, payload) then return end
  local chan = channel()
  if not chan then return end
  -- a host started anew after the last one exited needs the options first
  local opts = name ~= 'config' and config.unsent()
  if opts then pcall(vim.rpcnotify, chan, 'local_copilot_event', 'config', opts) end
  pcall(vim.rpcnotify, chan, 'local_copilot_event', name, payload)
end

-- One event to the host (bench/instrument.lua and tests wrap this to see what is sent). This
-- is where the options go: before any event, when the host has not had their version.
function M.emit(name, payload)
  if name ~= 'config' then
    local opts = config.unsent()
    if opts then deliver('config', opts) end
  end
  deliver(name, payload)
end

-- A request of the in-process language server (lsp.lua), on the host's own channel (the
-- worker's channel takes keystroke events only). False when no host takes it.
function M.lsp(payload)
  if not M.ready() then return false end
  local opts = config.unsent()
  if opts then deliver('config', opts) end
  local chan = state.chan or channel()
  return chan ~= nil and pcall(vim.rpcnotify, chan, 'local_copilot_lsp', payload)
end

-- An event, when the plugin is registered (starting the host if needed).
function M.send(name, payload)
  if not M.ready() then return end
  M.emit(name, payload)
end

-- Events the host only counts; never worth starting it for.
function M.tell(name, payload)
  if M.running() then M.emit(name, payload) end
end

-- New options: a host already running that has had options hears about them now, not with
-- the next event.
function M.options_changed()
  if M.running() and config.host_has_options() then
    local opts = config.unsent()
    if opts then deliver('config', opts) end
  end
end

return M
