-- The plugin's own Python: which interpreter runs its host, and the remote-plugin host type
-- Neovim knows that host by. The host is a process of its own (host type 'local_copilot', its
-- entry in rplugin/local_copilot/), not Neovim's python3 host: g:python3_host_prog stays what
-- the user set, and other Python remote plugins keep their own interpreter and packages.
--
-- The interpreter is the first of: g:local_copilot_python, the build's venv (.venv in the
-- plugin folder), g:python3_host_prog, python3 (then python) on PATH.
local M = {}

M.HOST = 'local_copilot'

-- pynvim's host, without the current folder on sys.path (a file there could shadow a package)
M.HOST_SCRIPT = 'import sys; sys.path = [p for p in sys.path if p != ""]; import neovim; neovim.start_host()'

function M.root()
  -- lua/local_copilot/python.lua -> the plugin folder
  return vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
end

function M.venv_python(root)
  -- a venv keeps its python in Scripts\ on Windows, bin/ elsewhere
  local exe = vim.fn.has('win32') == 1 and '/.venv/Scripts/python.exe' or '/.venv/bin/python'
  return (root or M.root()) .. exe
end

-- The interpreter and where it came from (said in messages and :checkhealth), or nil and why
-- none can run.
---@return string? path, string who_or_why
function M.find()
  local own = vim.g.local_copilot_python
  if type(own) == 'string' and own ~= '' then
    local path = vim.fn.exepath(vim.fn.expand(own))
    if path == '' then return nil, 'g:local_copilot_python = ' .. own .. ' cannot run' end
    return path, 'g:local_copilot_python = ' .. own
  end
  local venv = M.venv_python()
  if vim.uv.fs_stat(venv) then return venv, "the build's venv (" .. venv .. ')' end
  local host = vim.g.python3_host_prog
  if type(host) == 'string' and host ~= '' then
    local path = vim.fn.exepath(vim.fn.expand(host))
    if path == '' then return nil, 'g:python3_host_prog = ' .. host .. ' cannot run' end
    return path, 'g:python3_host_prog = ' .. host
  end
  for _, name in ipairs({ 'python3', 'python' }) do
    local path = vim.fn.exepath(name)
    if path ~= '' then return path, name .. ' on PATH (' .. path .. ')' end
  end
  return nil, "no python: run the build (require('local_copilot.install').build()) or set g:local_copilot_python"
end

-- How Neovim's remote#host starts the host type: for the plugin's functions called before the
-- host runs (the rplugin manifest defines them to start it), the plugin's own host; for
-- :UpdateRemotePlugins (a clone of the type, named '<type>-registration-clone'), a fresh host
-- with the plugins to register, asked for their specs and then stopped.
local function factory(info)
  if info.name == M.HOST then
    return require('local_copilot.host').start() or 0
  end
  local prog, why = M.find()
  if not prog then error('local-copilot: ' .. why, 0) end
  local args = { prog, '-c', M.HOST_SCRIPT }
  for _, plugin in ipairs(vim.fn['remote#host#PluginsForHost'](info.name)) do
    args[#args + 1] = plugin.path
  end
  local ok, id = pcall(vim.fn.jobstart, args, { rpc = true })
  if not ok or type(id) ~= 'number' or id <= 0 then error('local-copilot: ' .. why .. ' cannot run', 0) end
  return id
end

-- The host type, registered at startup (plugin/local_copilot.lua) and by the build before
-- :UpdateRemotePlugins, which registers only the types it knows. Registering again forgets the
-- channel Neovim's remote#host keeps for it, so its next start asks the factory (host.lua does
-- so whenever its host starts or exits).
function M.register()
  vim.fn['remote#host#Register'](M.HOST, '*.py', factory)
end

return M
