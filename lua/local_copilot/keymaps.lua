-- Optional keys from setup({ keymaps = ... }). A key falls back to what it did before
-- (the user's earlier mapping, or the key itself) when no suggestion is shown.
--
-- Each key is an <expr> mapping: what it falls back to is its result, which Neovim puts
-- where the key was in the typeahead, so the key behaves as it would without the plugin in a
-- macro, in `:normal` and with keys typed ahead (a key fed from a callback went behind the
-- keys already pending: `Am<Tab><Esc>` typed at once ran <Tab> in Normal mode).
local api = vim.api
local M = {}

local function api_call(name)
  return function() return require('local_copilot')[name]() end
end

-- Insert-mode actions: each returns true when it did something; otherwise the key does what
-- it did before. They run inside the <expr> mapping (no buffer change there: an accept
-- queues its text as the next input, see literal.lua).
M.actions = {
  accept = api_call('accept'),
  accept_word = api_call('accept_word'),
  accept_line = api_call('accept_line'),
  next = api_call('next'),
  prev = api_call('prev'),
  dismiss = api_call('dismiss'),
  trigger = api_call('trigger'),
}

-- Normal-mode actions (next edits): their keys are mapped in Normal mode. They change the
-- buffer and move the cursor, which an <expr> mapping may not: the mapping checks that a
-- next edit is shown and runs the action right after it (<Cmd>), in the key's place.
M.normal_actions = {
  next_edit_accept = api_call('next_edit_accept'),
  next_edit_dismiss = api_call('next_edit_dismiss'),
}

local function termcodes(s) return api.nvim_replace_termcodes(s, true, true, true) end

-- lhs -> { id, name = action, prev = what the key did before we mapped it, mode, lhs }
-- (Insert mode); Normal-mode keys are stored as 'n:' .. lhs
M.installed = {}

local function mode_of(name) return M.normal_actions[name] and 'n' or 'i' end

-- The global mapping of `lhs` in `mode`, or nil (maparg() prefers the current buffer's own,
-- which the global mapping made here never shadows).
local function global_map(lhs, mode)
  local m = vim.fn.maparg(lhs, mode, false, true)
  if vim.tbl_isempty(m) then return nil end
  if m.buffer ~= 1 then return m end
  local raw = termcodes(lhs)
  for _, g in ipairs(api.nvim_get_keymap(mode)) do
    if g.lhsraw == raw then return vim.fn.maparg(g.lhs, mode, false, true) end
  end
  return nil
end

-- The key's earlier mapping, copied under a <Plug> name of its own: it keeps its own flags
-- (expr or not, callback or rhs, remap or not, script), and the <expr> mapping below can
-- return that name as its fallback.
local function plug_name(name) return '<Plug>(local-copilot-fallback-' .. name .. ')' end

local function keep_prev(prev, mode, name)
  local copy = vim.deepcopy(prev)
  copy.lhs = plug_name(name)
  copy.lhsraw = termcodes(copy.lhs)
  copy.lhsrawalt = nil
  copy.buffer = 0
  vim.fn.mapset(mode, false, copy)
end

-- Give `lhs` back what it did before we mapped it.
local function restore(km)
  pcall(vim.keymap.del, km.mode, km.lhs)
  if km.prev then
    pcall(vim.keymap.del, km.mode, plug_name(km.name))
    vim.fn.mapset(km.mode, false, km.prev)
  end
end

-- In Normal mode the action runs here, right after the mapping; should it find nothing to do
-- after all (the buffer changed under the next edit), the key's fallback goes in front of
-- the typeahead, where the key was.
function M._run_normal(id)
  local km
  for _, k in pairs(M.installed) do
    if k.id == id then km = k end
  end
  if not km or M.normal_actions[km.name]() then return end
  local fallback = km.prev and plug_name(km.name) or km.lhs
  -- the bare key must not come back to this mapping; the <Plug> copy keeps its own flags
  api.nvim_feedkeys(termcodes(fallback), km.prev and 'im' or 'in', false)
end

local function fallback_of(km)
  -- With no earlier mapping the key itself: a result that starts with the mapping's own key
  -- is not mapped again (:help recursive_mapping), and stays open to abbreviations as the
  -- typed key is.
  return km.prev and plug_name(km.name) or km.lhs
end

local last_id = 0

local function install(name, lhs, mode, key)
  local prev = global_map(lhs, mode)
  last_id = last_id + 1
  local km = { id = last_id, name = name, prev = prev, mode = mode, lhs = lhs }
  M.installed[key] = km
  if prev then keep_prev(prev, mode, name) end
  local rhs
  if mode == 'n' then
    local visible = require('local_copilot').next_edit_visible
    local run = ('<Cmd>lua require("local_copilot.keymaps")._run_normal(%d)<CR>'):format(km.id)
    rhs = function()
      if visible() then return run end
      return fallback_of(km)
    end
  else
    local action = M.actions[name]
    rhs = function()
      if action() then return '' end
      return fallback_of(km)
    end
  end
  -- remap: the fallback may be a <Plug> name, which must be mapped (to the earlier mapping)
  vim.keymap.set(mode, lhs, rhs, { expr = true, remap = true, desc = 'local-copilot: ' .. name .. ' (falls back to the key)' })
end

-- Map the keys of `keymaps` (setup() again replaces the previous set: a key whose action
-- changed is re-bound, a key no longer named does what it did before).
function M.apply(keymaps)
  local wanted = {}
  for name, lhs in pairs(keymaps or {}) do
    if (M.actions[name] or M.normal_actions[name]) and type(lhs) == 'string' and lhs ~= '' then
      wanted[(mode_of(name) == 'n' and 'n:' or '') .. lhs] = name
    end
  end
  for key, km in pairs(M.installed) do
    if wanted[key] ~= km.name then
      restore(km)
      M.installed[key] = nil
    end
  end
  for key, name in pairs(wanted) do
    if not M.installed[key] then
      local mode = mode_of(name)
      install(name, mode == 'n' and key:sub(3) or key, mode, key)
    end
  end
end

return M
