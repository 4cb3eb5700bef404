-- The plugin manager's build step: a private venv inside the plugin folder with the Python
-- dependencies (the plugin's own python, python.lua), then :UpdateRemotePlugins.
--   lazy.nvim: build = function() require('local_copilot.install').build() end
-- It never sets g:python3_host_prog: the plugin's host runs apart from Neovim's python3 host.
local python = require('local_copilot.python')

local M = {}

M.MIN_PYTHON = { 3, 11 }

M.root = python.root
M.venv_python = python.venv_python

local function run(cmd)
  local res = vim.system(cmd, { text = true }):wait()
  if res.code ~= 0 then
    error(('local-copilot build: `%s` failed (%d):\n%s'):format(table.concat(cmd, ' '), res.code, res.stderr or ''), 0)
  end
end

-- The version of the python at `exe` ('3.12.4'), or nil when it does not run.
local function version_of(exe)
  local ok, res = pcall(function()
    return vim.system({ exe, '-c', 'import sys; print("%d.%d.%d" % sys.version_info[:3])' }, { text = true }):wait(20000)
  end)
  if not ok or res.code ~= 0 then return nil end
  return vim.trim(res.stdout or '')
end

local function new_enough(version)
  local major, minor = version:match('^(%d+)%.(%d+)')
  major, minor = tonumber(major), tonumber(minor)
  return major ~= nil and (major > M.MIN_PYTHON[1] or (major == M.MIN_PYTHON[1] and minor >= M.MIN_PYTHON[2]))
end

local NEED = ('Python %d.%d or newer'):format(M.MIN_PYTHON[1], M.MIN_PYTHON[2])
local HOW = 'get one with `uv python install 3.12`, then build with it: '
  .. "vim.g.local_copilot_build_python = vim.fn.trim(vim.fn.system('uv python find 3.12')); "
  .. 'or install your system\'s python3.12 package, or one from https://www.python.org/downloads/'

-- The python the venv is made with: opts.python, else g:local_copilot_build_python, else the
-- first new enough of python3.13, python3.12, python3.11, python3, python on PATH. None new
-- enough: an error saying what was found, which version is needed and how to get one.
function M.base_python(opts)
  opts = opts or {}
  local chosen = opts.python or vim.g.local_copilot_build_python
  local names = chosen and { chosen } or { 'python3.13', 'python3.12', 'python3.11', 'python3', 'python' }
  local found = {}
  for _, name in ipairs(names) do
    local exe = vim.fn.exepath(vim.fn.expand(name))
    local version = exe ~= '' and version_of(exe) or nil
    if version and new_enough(version) then return exe end
    if version then
      found[#found + 1] = ('%s %s (%s)'):format(name, version, exe)
    elseif chosen then
      found[#found + 1] = name .. (exe == '' and ' (not found)' or ' (does not run)')
    end
  end
  error(('local-copilot build: needs %s; found %s. To fix: %s; then run the build again'):format(
    NEED, #found > 0 and table.concat(found, ', ') or 'no python on PATH', HOW), 0)
end

function M.build(opts)
  opts = opts or {}
  local root = M.root()
  local venv = M.venv_python(root)
  if vim.uv.fs_stat(venv) then
    local version = version_of(venv)
    if version and not new_enough(version) then
      error(('local-copilot build: %s/.venv has Python %s; the plugin needs %s. Delete %s/.venv and run the build '
        .. 'again with a newer python (%s)'):format(root, version, NEED, root, HOW), 0)
    end
  else
    run({ M.base_python(opts), '-m', 'venv', root .. '/.venv' })
  end
  run({ venv, '-m', 'pip', 'install', '--quiet', root })
  -- :UpdateRemotePlugins registers the host types it knows: this one may not be yet (a
  -- plugin manager runs the build before the plugin's plugin/ files)
  python.register()
  vim.cmd('UpdateRemotePlugins')
  return venv
end

return M
