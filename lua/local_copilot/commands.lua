-- :LocalCopilot {enable|disable|toggle|status|stats|log|doctor}
local M = {}

-- A failure, as one line that fits (message.lua); the listings below are asked for, and show whole.
local function show(msg) require('local_copilot.message').show(msg, vim.log.levels.ERROR, false) end

-- A sync call to the host for a command: its answer, or nil and one concise line saying why
-- not (never a Lua stack trace, never a try at a host that would not start).
local function host_call(...)
  local lc = require('local_copilot')
  if not lc.registered('LocalCopilotCall') then
    return nil, 'the remote plugin is not registered; run :UpdateRemotePlugins and restart'
  end
  local res, why = require('local_copilot.host').call(...)
  if why then return nil, why .. '; see :checkhealth local_copilot' end
  if res == nil or res == vim.NIL then return nil, 'the Python host had no answer; see :LocalCopilot log' end
  return res
end
M._host_call = host_call

local subs = {
  enable = function() require('local_copilot').enable() end,
  disable = function() require('local_copilot').disable() end,
  toggle = function() require('local_copilot').toggle() end,
  status = function()
    local lines = { 'local-copilot: ' .. require('local_copilot').status() }
    do
      local st, why = host_call('status')
      if not st then
        lines[#lines + 1] = why
      elseif type(st) == 'table' then
        if st.backend ~= vim.NIL and st.backend then
          lines[#lines + 1] = string.format('backend %s at %s', tostring(st.backend), tostring(st.url))
        else -- no options accepted yet (or rejected ones): there is no backend to name
          lines[#lines + 1] = 'backend: none'
        end
        if st.config_error ~= vim.NIL and st.config_error then lines[#lines + 1] = 'config error: ' .. st.config_error end
        local c = st.stats.counters or {}
        lines[#lines + 1] = string.format("requests %d, cancels %d, errors %d, cache hits %d", c.requests or 0, c.cancels or 0, c.errors or 0, c.cache_hits or 0)
        lines[#lines + 1] = 'log: ' .. st.log
      end
    end
    -- messages shown cut to one line whose whole text the log does not hold
    for _, msg in ipairs(require('local_copilot.message').kept()) do lines[#lines + 1] = 'message: ' .. msg end
    vim.notify(table.concat(lines, '\n'), vim.log.levels.INFO)
  end,
  stats = function() require('local_copilot.stats_view').open() end,
  -- the health report on the options in force (setup()'s), as :checkhealth local_copilot
  doctor = function() vim.cmd('checkhealth local_copilot') end,
  log = function()
    local st, why = host_call('status')
    if not st then return show('local-copilot: ' .. why) end
    vim.cmd.split(vim.fn.fnameescape(st.log))
  end,
}

function M.names() return vim.tbl_keys(subs) end

-- The models the active entry's server lists (router-mode llama-server, llama-swap, any
-- OpenAI-compatible server), for completing :LocalCopilotBackend model; {} when it lists none.
local function served_models()
  local res = host_call('models', require('local_copilot.config').user)
  if type(res) ~= 'table' or type(res.models) ~= 'table' then return {} end
  local ids = {}
  for _, m in ipairs(res.models) do ids[#ids + 1] = m.id end
  return ids
end

local function matching(items, lead)
  return vim.tbl_filter(function(s) return vim.startswith(s, lead) end, items)
end

-- :LocalCopilotBackend [name|auto|start|stop|restart|model NAME]
function M.backend_names(lead, cmdline)
  lead = lead or ''
  local args = vim.split(vim.trim((cmdline or ''):gsub('^%s*%S+', '', 1)), '%s+', { trimempty = true })
  local at = lead == '' and #args + 1 or #args -- the argument being completed
  if args[1] == 'model' and at == 2 then
    return matching(served_models(), lead)
  end
  local config = require('local_copilot.config')
  local names = { 'auto', 'start', 'stop', 'restart', 'model' }
  vim.list_extend(names, require('local_copilot.schema').builtin_backends) -- the registry's, generated
  for name in pairs(config.user.backends or {}) do
    if not vim.tbl_contains(names, name) then names[#names + 1] = name end
  end
  return matching(names, lead)
end

local function show_backend()
  local st, why = host_call('backend_status')
  if not st then return show('local-copilot: ' .. why) end
  if st.error then return show('local-copilot: ' .. st.error) end
  local lat = st.latency or {}
  local function pct(t) return type(t) == 'table' and ('%s/%s/%s ms'):format(t.p50, t.p95, t.p99) or '-' end
  local lines = {
    ('backend   %s (%s) at %s'):format(st.backend, st.kind, st.url),
    ('model     %s'):format(st.model),
    ('template  %s'):format(st.template),
    ('server    %s'):format(st.server.state .. (st.server.pid ~= vim.NIL and st.server.pid and (' pid ' .. st.server.pid) or '')),
    ('latency   first token p50/p95/p99 %s; total %s (%s requests)'):format(pct(lat.ttft_ms), pct(lat.total_ms), tostring(lat.n ~= vim.NIL and lat.n or 0)),
  }
  if st.pending ~= vim.NIL and st.pending then lines[#lines + 1] = 'loading   ' .. st.pending end
  local ne = st.next_edit
  if type(ne) == 'table' then
    lines[#lines + 1] = ('next edit %s (%s), format %s, server %s'):format(ne.backend, ne.url, ne.format, ne.server)
  end
  vim.notify(table.concat(lines, '\n'), vim.log.levels.INFO)
end

function M.backend(args)
  local what = args[1]
  if not what then return show_backend() end
  local payload = { action = 'switch', name = what }
  if what == 'stop' or what == 'restart' or what == 'start' or what == 'model' then
    payload = { action = what, name = args[2] }
  end
  require('local_copilot.host').send('backend', payload)
end

function M.run(args)
  local name = args[1] or 'status'
  local fn = subs[name]
  if not fn then
    return show('local-copilot: unknown subcommand ' .. name .. '; choose one of: ' .. table.concat(vim.fn.sort(M.names()), ', '))
  end
  fn()
end

return M
