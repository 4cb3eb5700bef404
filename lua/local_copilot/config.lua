-- The options Lua itself needs on the keystroke path. Python validates the whole table
-- (python/local_copilot/config.py holds the same defaults; a test keeps the two equal).
local M = {}

M.defaults = {
  auto_trigger = true,
  debounce_ms = 0,
  adaptive_debounce = false,
  hide_during_completion = true,
  request_during_completion = false,
  reuse = true,
  warm_up = true,
  filetypes = {},
  keymaps = {},
  context = { lines_before = 200, lines_after = 60, prefix_share = 0.75, extra_tokens = 1024 },
  next_edit = { enabled = false, debounce_ms = 100 },
  -- the instruction edits' options Lua reads (config.py's EditConfig holds them all)
  edit = { context_lines = 60, warm = true, accept_key = '<Tab>', cancel_key = '<Esc>' },
}

-- Filetypes off unless the user turns them on (commit messages, help).
M.filetype_defaults = { gitcommit = false, gitrebase = false, help = false, hgcommit = false, svn = false, cvs = false }

M.max_file_bytes = 1024 * 1024

M.user = {}
M.version = 0

local merged = {} -- key -> value with the defaults filled in; rebuilt by set()

function M.set(opts)
  M.user = opts or {}
  M.version = M.version + 1
  merged = {}
end

-- Called on every keystroke: merge once per setup(), not per call.
function M.get(key)
  local v = merged[key]
  if v ~= nil then return v end
  v = M.user[key]
  if v == nil then
    v = M.defaults[key]
  elseif type(v) == 'table' and type(M.defaults[key]) == 'table' and not vim.islist(M.defaults[key]) then
    v = vim.tbl_deep_extend('force', M.defaults[key], v)
  end
  merged[key] = v
  return v
end

return M
