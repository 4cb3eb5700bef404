-- The options Lua itself needs on the keystroke path. Python validates the whole table
-- (python/local_copilot/config.py holds the same defaults; a test keeps the two equal).
local M = {}

---@class local_copilot.BackendOptions one model server (:help local-copilot-backends)
---@field kind? 'llama.cpp'|'openai'|'ollama'|'sglang'|'lmstudio' the wire dialect (vLLM speaks 'openai')
---@field url? string
---@field model? string
---@field fim_template? string
---@field endpoint? 'auto'|'completion'|'infill'
---@field prompt? ''|'fim'|'continue'|'chat'
---@field api_key_env? string the environment variable holding the token
---@field ca_file? string
---@field tls_verify? boolean
---@field cmd? string[] how to start the server (a managed backend)
---@field timeout_ms? integer
---@field temperature? number
---@field top_p? number
---@field samplers? string[]
---@field server? table the managed server's own options

---@class local_copilot.ContextOptions
---@field lines_before? integer
---@field lines_after? integer
---@field prefix_share? number
---@field extra_tokens? integer

---@class local_copilot.PrivacyOptions
---@field ignore_file? string
---@field git_ignored? boolean

---@class local_copilot.NextEditOptions
---@field enabled? boolean
---@field backend? string
---@field format? ''|'sweep'|'zeta'|'zeta2'
---@field debounce_ms? integer
---@field n_predict? integer
---@field history_events? integer
---@field history_bytes? integer
---@field history_minutes? integer

---@class local_copilot.EditOptions
---@field backend? string
---@field n_predict? integer
---@field temperature? number
---@field context_lines? integer
---@field warm? boolean
---@field timeout_ms? integer
---@field accept_key? string|false
---@field cancel_key? string|false

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

---@class local_copilot.Options what setup() takes (:help local-copilot-config); Python checks ranges
---@field backend? string the active entry of `backends`
---@field backends? table<string, local_copilot.BackendOptions>
---@field fallback? string[] entries tried in order when the active one cannot answer
---@field fallback_after_ms? integer
---@field filetypes? table<string, boolean> `['*']` for the rest
---@field keymaps? local_copilot.Keymaps
---@field lsp? boolean an in-process language server for completion menus
---@field auto_trigger? boolean
---@field adaptive_debounce? boolean
---@field hide_during_completion? boolean
---@field request_during_completion? boolean
---@field warm_up? boolean
---@field n_predict? integer
---@field n_predict_first? integer
---@field t_max_predict_ms? integer
---@field debounce_ms? integer
---@field latency_target_ms? integer
---@field max_lines? integer
---@field reuse? boolean
---@field speculative? boolean
---@field context? local_copilot.ContextOptions
---@field exclude? string[] path patterns never sent
---@field privacy? local_copilot.PrivacyOptions
---@field next_edit? local_copilot.NextEditOptions
---@field edit? local_copilot.EditOptions
---@field log_level? 'debug'|'info'|'warn'|'error'

M.defaults = {
  auto_trigger = true,
  debounce_ms = 0,
  adaptive_debounce = false,
  hide_during_completion = true,
  request_during_completion = false,
  reuse = true,
  warm_up = true,
  -- an in-process language server offering the suggestions to completion menus (lsp.lua)
  lsp = false,
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

---@type local_copilot.Options
M.user = {}
M.version = 0

-- The types of the options Lua reads (a wrong one would fail on the keystroke path, a stack
-- trace per key) and of those it passes on whole; Python checks every option, ranges too.
local KEY = { 'string', 'boolean' } -- a key, or false for none
local types = {
  auto_trigger = 'boolean', debounce_ms = 'number', adaptive_debounce = 'boolean', hide_during_completion = 'boolean',
  request_during_completion = 'boolean', reuse = 'boolean', warm_up = 'boolean', lsp = 'boolean', backend = 'string',
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

-- nil when every field of `value` named in `shape` has its type; else one line naming the
-- first that does not (`prefix` goes before its name).
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
