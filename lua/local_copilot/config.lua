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

-- The types of the options Lua reads (a wrong one would fail on the keystroke path, a stack
-- trace per key) and of those it passes on whole; Python checks every option, ranges too.
local KEY = { 'string', 'boolean' } -- a key, or false for none
local types = {
  auto_trigger = 'boolean', debounce_ms = 'number', adaptive_debounce = 'boolean', hide_during_completion = 'boolean',
  request_during_completion = 'boolean', reuse = 'boolean', warm_up = 'boolean', backend = 'string',
  backends = { each = 'table' }, exclude = 'table', filetypes = { each = 'boolean' }, keymaps = { each = KEY },
  context = { fields = { lines_before = 'number', lines_after = 'number', prefix_share = 'number', extra_tokens = 'number' } },
  next_edit = { fields = { enabled = 'boolean', debounce_ms = 'number', backend = 'string' } },
  edit = { fields = { context_lines = 'number', warm = 'boolean', accept_key = KEY, cancel_key = KEY, backend = 'string' } },
}

local WORDS = { boolean = 'true or false', number = 'a number', string = 'a string', table = 'a table' }

local function fits(value, want)
  if type(want) == 'string' then return type(value) == want end
  if want == KEY then return type(value) == 'string' or value == false end
  return type(value) == 'table'
end

local function bad(path, value, want)
  local words = want == KEY and "a key such as '<Tab>', or false" or WORDS[type(want) == 'string' and want or 'table']
  local got = type(value) == 'table' and 'a table' or vim.inspect(value)
  return ('%s must be %s, not %s'):format(path, words, got)
end

-- nil when `opts` can be given to setup(); else one line naming the option and what it takes.
function M.check(opts)
  if opts == nil then return nil end
  if type(opts) ~= 'table' then
    return ("setup() takes a table of options, e.g. setup({ backend = 'llama.cpp' }); not %s"):format(vim.inspect(opts))
  end
  for name, want in pairs(types) do
    local value = opts[name]
    if value ~= nil then
      if not fits(value, want) then return bad(name, value, want) end
      if type(want) == 'table' and want ~= KEY then
        for key, each in pairs(want.fields or {}) do
          if value[key] ~= nil and not fits(value[key], each) then return bad(name .. '.' .. key, value[key], each) end
        end
        if want.each then
          for key, each in pairs(value) do
            if not fits(each, want.each) then return bad(name .. '.' .. tostring(key), each, want.each) end
          end
        end
      end
    end
  end
  return nil
end

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
