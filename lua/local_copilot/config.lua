-- The options Lua itself needs on the keystroke path. Python validates the whole table; their
-- defaults, the types checked here and the `---@class` annotations of setup()'s table are
-- generated from Python's schema (schema.lua, written by `python -m local_copilot.lua_schema`
-- from python/local_copilot/config.py; a test fails when it differs).
local schema = require('local_copilot.schema')
local M = {}

---@class local_copilot.Keymaps keys the plugin maps (:help local-copilot-keymaps); false = none
---@field accept? string|false
---@field accept_word? string|false
---@field accept_line? string|false
---@field next? string|false
---@field prev? string|false
---@field dismiss? string|false
---@field trigger? string|false
---@field next_edit_accept? string|false Normal mode
---@field next_edit_dismiss? string|false Normal mode

M.defaults = schema.defaults

-- Filetypes off unless the user turns them on (commit messages, help).
M.filetype_defaults = { gitcommit = false, gitrebase = false, help = false, hgcommit = false, svn = false, cvs = false }

M.max_file_bytes = 1024 * 1024

---@type local_copilot.Options
M.user = {}
M.version = 0

-- The types of the options Lua reads (a wrong one would fail on the keystroke path, a stack
-- trace per key) and of those it passes on whole; Python checks every option, ranges too.
local types = schema.types
local KEY = 'key' -- a key, or false for none

local WORDS = { boolean = 'true or false', number = 'a number', string = 'a string', table = 'a table' }

local function is_key(value) return type(value) == 'string' or value == false end

-- Whether `value` has the type `want` names. vim.validate judges it; it raises an error, and
-- the plugin says one line naming the option instead (bad() below), so it runs under pcall.
local function fits(value, want)
  local validator = want == KEY and is_key or (type(want) == 'string' and want or 'table')
  return (pcall(vim.validate, 'value', value, validator))
end

local function bad(path, value, want)
  local words = want == KEY and "a key such as '<Tab>', or false" or WORDS[type(want) == 'string' and want or 'table']
  local got = type(value) == 'table' and 'a table' or vim.inspect(value)
  return ('%s must be %s, not %s'):format(path, words, got)
end

-- nil when every field of `value` named in `shape` has its type; else one line naming the
-- first that does not (`prefix` goes before its name). setup() and edit() check their
-- arguments with it.
---@param value table
---@param shape table<string, string|table>
---@param prefix? string
---@return string?
function M.wrong_field(value, shape, prefix)
  prefix = prefix or ''
  for name, want in pairs(shape) do
    local v = value[name]
    if v ~= nil then
      if not fits(v, want) then return bad(prefix .. name, v, want) end
      if type(want) == 'table' and want ~= KEY then
        local inner = want.fields and M.wrong_field(v, want.fields, prefix .. name .. '.')
        if inner then return inner end
        if want.each then
          for key, each in pairs(v) do
            if not fits(each, want.each) then return bad(prefix .. name .. '.' .. tostring(key), each, want.each) end
          end
        end
      end
    end
  end
  return nil
end

-- The choice `name` most likely misspells (an edit distance of a third of its length at most,
-- or a choice it begins), or nil.
---@param name string
---@param choices string[]
---@return string?
function M.nearest(name, choices)
  local function distance(a, b)
    local prev = {}
    for j = 0, #b do prev[j] = j end
    for i = 1, #a do
      local cur = { [0] = i }
      for j = 1, #b do
        cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:sub(i, i) == b:sub(j, j) and 0 or 1))
      end
      prev = cur
    end
    return prev[#b]
  end
  local best, best_d = nil, math.max(1, math.floor(#name / 3))
  for _, choice in ipairs(choices) do
    local d = distance(name:lower(), choice)
    if d <= best_d and (best == nil or d < best_d) then best, best_d = choice, d end
  end
  if best then return best end
  for _, choice in ipairs(choices) do
    if #name >= 3 and vim.startswith(choice, name) then return choice end
  end
  return nil
end

-- nil when every name in `keymaps` is an action; else one line naming the first that is not,
-- with the action it most likely means (an unknown name would map nothing without a word).
---@param keymaps any
---@return string?
function M.unknown_keymap(keymaps)
  if type(keymaps) ~= 'table' then return nil end
  local km = require('local_copilot.keymaps')
  local names = vim.list_extend(vim.tbl_keys(km.actions), vim.tbl_keys(km.normal_actions))
  table.sort(names)
  local unknown = {}
  for name in pairs(keymaps) do
    if not (km.actions[name] or km.normal_actions[name]) then unknown[#unknown + 1] = tostring(name) end
  end
  if #unknown == 0 then return nil end
  table.sort(unknown)
  local near = M.nearest(unknown[1], names)
  return ('keymaps.%s is no action%s; the actions are %s'):format(unknown[1],
    near and ('; did you mean %s?'):format(near) or '', table.concat(names, ', '))
end

-- nil when `opts` can be given to setup(); else one line naming the option and what it takes.
---@param opts any
---@return string?
function M.check(opts)
  if opts == nil then return nil end
  if type(opts) ~= 'table' then
    return ("setup() takes a table of options, e.g. setup({ backend = 'llama.cpp' }); not %s"):format(vim.inspect(opts))
  end
  return M.wrong_field(opts, types) or M.unknown_keymap(opts.keymaps)
end

local merged = {} -- key -> value with the defaults filled in; rebuilt by set()
-- M.version the host last received; -1 while it has none (not started, or started anew)
local sent_version = -1

-- The options, when the host has not had this version of them (host.lua sends them before
-- its next event); they count as sent from now on.
---@return local_copilot.Options?
function M.unsent()
  if sent_version == M.version then return nil end
  sent_version = M.version
  return M.user
end

-- Whether the host has had some version of the options.
function M.host_has_options() return sent_version >= 0 end

-- A host started anew has no options: the next event takes them along.
function M.host_lacks_options() sent_version = -1 end

-- The options that narrow what is sent: setup() again without one keeps it (the rest of the
-- table replaces the earlier one), so a later call that leaves it out, e.g. to change
-- n_predict, never sends what an earlier one kept back; given again, it replaces the earlier
-- value (`exclude = {}` sends those files again). `privacy` keeps the fields left out.
M.kept = { 'exclude', 'privacy' }

function M.set(opts)
  local user = {}
  for key, value in pairs(opts or {}) do user[key] = value end
  for _, key in ipairs(M.kept) do
    local old, new = M.user[key], user[key]
    if new == nil then
      user[key] = old
    elseif type(new) == 'table' and type(old) == 'table' and not vim.islist(old) then
      user[key] = vim.tbl_extend('keep', new, old)
    end
  end
  M.user = user
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
