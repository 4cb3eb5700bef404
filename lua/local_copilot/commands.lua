-- :LocalCopilot {enable|disable|toggle|status|stats|log}
local M = {}

local subs = {
  enable = function() require('local_copilot').enable() end,
  disable = function() require('local_copilot').disable() end,
  toggle = function() require('local_copilot').toggle() end,
  status = function()
    local lines = { 'local-copilot: ' .. require('local_copilot').status() }
    if require('local_copilot').registered('LocalCopilotCall') then
      local ok, st = pcall(vim.fn.LocalCopilotCall, 'status')
      if ok and type(st) == 'table' then
        lines[#lines + 1] = string.format('backend %s at %s', tostring(st.backend), tostring(st.url))
        if st.config_error ~= vim.NIL and st.config_error then lines[#lines + 1] = 'config error: ' .. st.config_error end
        local c = st.stats.counters or {}
        lines[#lines + 1] = string.format("requests %d, cancels %d, errors %d, cache hits %d", c.requests or 0, c.cancels or 0, c.errors or 0, c.cache_hits or 0)
        lines[#lines + 1] = 'log: ' .. st.log
      end
    end
    vim.notify(table.concat(lines, '\n'), vim.log.levels.INFO)
  end,
  stats = function() require('local_copilot.stats_view').open() end,
  log = function()
    if not require('local_copilot').registered('LocalCopilotCall') then return vim.notify('local-copilot: the remote plugin is not registered', vim.log.levels.WARN) end
    local st = vim.fn.LocalCopilotCall('status')
    vim.cmd.split(vim.fn.fnameescape(st.log))
  end,
}

function M.names() return vim.tbl_keys(subs) end

function M.run(args)
  local name = args[1] or 'status'
  local fn = subs[name]
  if not fn then
    return vim.notify('local-copilot: unknown subcommand ' .. name .. '; choose one of: ' .. table.concat(vim.fn.sort(M.names()), ', '), vim.log.levels.ERROR)
  end
  fn()
end

return M
