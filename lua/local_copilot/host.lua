-- Starting the Python host without blocking Neovim when it cannot start.
--
-- Neovim's python3 provider, asked to start a host whose python lacks pynvim, writes its
-- error lines with :echomsg and throws: the hit-enter prompt blocks the editor (mode 'rm'),
-- and the next call tries again, once per key. Here the start runs under :silent!, and a
-- failure gives one message naming the fix (why is asked of that python without waiting);
-- nothing is sent until :LocalCopilot enable or a restart.
local M = {}

local failed = nil -- why the host did not start, once it did not

local function tell(why)
  vim.notify('local-copilot: the Python host did not start (' .. why .. '); completion is off until'
    .. ' :LocalCopilot enable or a restart. Run :checkhealth local_copilot', vim.log.levels.ERROR,
    { title = 'local-copilot' })
end

local function fail(why)
  failed = why
  require('local_copilot')._host_failed()
  local prog = vim.g.python3_host_prog
  if why ~= '' or not prog or prog == '' then return vim.schedule(function() tell(why) end) end
  -- the usual cause, asked of that python without waiting for it
  local cmd = { vim.fn.expand(prog), '-c', 'import pynvim' }
  local ok = pcall(vim.system, cmd, { text = true }, vim.schedule_wrap(function(done)
    failed = done.code ~= 0 and ('g:python3_host_prog = ' .. prog .. ' has no pynvim') or 'the python3 provider could not load it'
    tell(failed)
  end))
  if not ok then vim.schedule(function() tell('g:python3_host_prog = ' .. prog .. ' cannot run') end) end
end

-- Why the host could not start, or nil.
function M.failure() return failed end

function M.retry() failed = nil end

-- Start the host with the first event (`LocalCopilotEvent` starts it); false when it failed.
function M.start(name, payload)
  if failed then return false end
  if vim.fn.has('python3') == 0 then
    fail('no python3 with pynvim found')
    return false
  end
  vim.g.local_copilot_start_args = { name, payload }
  local ok = pcall(vim.cmd, 'silent! call call("LocalCopilotEvent", g:local_copilot_start_args)')
  vim.g.local_copilot_start_args = nil
  if not ok or vim.fn.exists('*LocalCopilotEvent') == 0 then
    fail('')
    return false
  end
  return true
end

-- A sync call to the host (commands, health): its answer, or nil and why not. A host not
-- started yet is started as start() does it, so a broken one blocks nothing here either.
function M.call(...)
  if failed then return nil, 'the Python host did not start (' .. failed .. ')' end
  if vim.fn.exists('*LocalCopilotCall') == 1 then
    local ok, res = pcall(vim.fn.LocalCopilotCall, ...)
    if ok then return res end
    return nil, 'the Python host did not answer (' .. tostring(res):gsub('^.-Vim[^:]*:', ''):match('[^\n]*') .. ')'
  end
  vim.g.local_copilot_call = { ... }
  pcall(vim.cmd, 'silent! let g:local_copilot_call = call("LocalCopilotCall", g:local_copilot_call)')
  local res = vim.g.local_copilot_call
  vim.g.local_copilot_call = nil
  if vim.fn.exists('*LocalCopilotCall') == 0 then
    fail('')
    return nil, 'the Python host did not start'
  end
  return res
end

return M
