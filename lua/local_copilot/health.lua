-- :checkhealth local_copilot
-- Lua checks what only Neovim knows (its version, the plugin's python, whether the
-- remote plugin is registered); everything else comes from the Python host as a report
-- (python/local_copilot/health/report.py, the same one `local-copilot doctor` prints).
local M = {}

local health = vim.health

local function neovim()
  health.start('local-copilot: Neovim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok('Neovim ' .. version .. ' (inline virtual text, vim.health advice)')
  else
    health.error('Neovim ' .. version .. ' is too old: local-copilot needs 0.11 or newer (inline virtual text)',
      { 'upgrade Neovim to 0.11 or newer' })
  end
end

local deps = 'python -m pip install pynvim httpx msgspec platformdirs pygls lsprotocol'

-- Returns whether the Python host can be asked.
local function host()
  health.start('local-copilot: Python host')
  local prog, who = require('local_copilot.python').find()
  if not prog then
    health.error(who, {
      "run the build: require('local_copilot.install').build() makes the plugin's own venv",
      'or set g:local_copilot_python to a python that has the dependencies (' .. deps .. ')',
    })
    return false
  end
  health.ok("the plugin's python: " .. who .. ' (its own host: g:python3_host_prog and other Python plugins are left as they are)')
  -- a python without pynvim cannot run the host at all: say so instead of starting it
  local done = vim.system({ prog, '-c', 'import pynvim' }, { text = true }):wait(10000)
  if done.code ~= 0 then
    health.error(who .. ' cannot import pynvim, so the plugin cannot run', {
      'install the dependencies into that python: ' .. deps,
      "or run require('local_copilot.install').build() to make the plugin's own venv",
      'then run :UpdateRemotePlugins, restart Neovim (or :LocalCopilot enable)',
    })
    return false
  end
  local lc = require('local_copilot')
  if not (lc.registered() and lc.registered('LocalCopilotCall')) then
    health.error('the remote plugin is not registered (no LocalCopilotEvent in the rplugin manifest)', {
      'run :UpdateRemotePlugins, then restart Neovim',
      "the plugin's python needs pynvim for that: " .. deps,
    })
    return false
  end
  health.ok('remote plugin registered (' .. tostring(vim.g.loaded_remote_plugins) .. ')')
  local failed = require('local_copilot.host').failure()
  if failed then
    health.error('the Python host did not start: ' .. failed, { ':LocalCopilot enable tries again' })
    return false
  end
  return true
end

local function render(sections)
  for _, section in ipairs(sections) do
    health.start('local-copilot: ' .. section.name)
    for _, item in ipairs(section.items or {}) do
      local advice = item.advice
      if type(advice) ~= 'table' or #advice == 0 then advice = nil end
      local report = health[item.level] or health.info
      if item.level == 'ok' or item.level == 'info' then
        report(item.message)
      else
        report(item.message, advice)
      end
    end
  end
end

function M.check()
  neovim()
  if not host() then return end
  local opts = require('local_copilot.config').user
  local result, why = require('local_copilot.host').call('health', opts)
  if type(result) ~= 'table' then
    health.error((why or 'the Python host had no answer'):gsub('\n', ' '), {
      "install the dependencies into the plugin's python (the section above names it): " .. deps,
      'then run :UpdateRemotePlugins and restart Neovim',
    })
    return
  end
  render(result)
  M.privacy(vim.fn.bufnr('#'))
end

-- Whether the buffer :checkhealth was run from may be sent, and why not (privacy.lua, the
-- host's policy: python/local_copilot/privacy/policy.py).
function M.privacy(buf)
  health.start('local-copilot: privacy')
  if buf < 1 or not vim.api.nvim_buf_is_valid(buf) then return health.info('no buffer to judge') end
  local path = vim.api.nvim_buf_get_name(buf)
  local name = path ~= '' and vim.fn.fnamemodify(path, ':~:.') or ('buffer ' .. buf)
  local why = require('local_copilot.privacy').reason(buf, path)
  if not why and path ~= '' then
    local host = require('local_copilot.host').call('privacy', path, require('local_copilot.config').user)
    if type(host) == 'string' and host ~= '' then why = host end
  end
  if why then
    health.info(('%s is never sent: %s'):format(name, why))
  else
    health.ok(('%s may be sent (no privacy rule refuses it)'):format(name))
  end
end

return M
