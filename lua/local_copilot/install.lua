-- The plugin manager's build step: a private venv inside the plugin folder with the Python
-- dependencies, used as the python3 host unless the user chose one, then :UpdateRemotePlugins.
--   lazy.nvim: build = function() require('local_copilot.install').build() end
local M = {}

function M.root()
  -- lua/local_copilot/install.lua -> the plugin folder
  return vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
end

function M.venv_python(root)
  -- a venv keeps its python in Scripts\ on Windows, bin/ elsewhere
  local exe = vim.fn.has('win32') == 1 and '/.venv/Scripts/python.exe' or '/.venv/bin/python'
  return (root or M.root()) .. exe
end

-- Use the private venv as the python3 host when the user has not set one and it exists.
function M.use_private_host()
  if vim.g.python3_host_prog == nil and vim.uv.fs_stat(M.venv_python()) then
    vim.g.python3_host_prog = M.venv_python()
  end
end

local function run(cmd)
  local res = vim.system(cmd, { text = true }):wait()
  if res.code ~= 0 then
    error(('local-copilot build: `%s` failed (%d):\n%s'):format(table.concat(cmd, ' '), res.code, res.stderr or ''), 0)
  end
end

function M.build(opts)
  opts = opts or {}
  local root = M.root()
  local python = opts.python or vim.g.local_copilot_build_python or 'python3'
  if not vim.uv.fs_stat(M.venv_python(root)) then
    run({ python, '-m', 'venv', root .. '/.venv' })
  end
  run({ M.venv_python(root), '-m', 'pip', 'install', '--quiet', root })
  M.use_private_host()
  vim.cmd('UpdateRemotePlugins')
  return M.venv_python(root)
end

return M
