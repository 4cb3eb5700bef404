-- Optional keys from setup({ keymaps = ... }). A key falls back to what it did before
-- (the user's earlier mapping, or the key itself) when no suggestion is shown.
local M = {}

local function api_call(name)
  return function() return require('local_copilot')[name]() end
end

-- Each returns true when it did something; otherwise the key does what it did before.
M.actions = {
  accept = api_call('accept'),
  accept_word = api_call('accept_word'),
  accept_line = api_call('accept_line'),
  next = api_call('next'),
  prev = api_call('prev'),
  dismiss = api_call('dismiss'),
  trigger = api_call('trigger'),
}

-- Normal-mode actions (next edits): their keys are mapped in Normal mode.
M.normal_actions = {
  next_edit_accept = api_call('next_edit_accept'),
  next_edit_dismiss = api_call('next_edit_dismiss'),
}

local function feed(keys, remap)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), remap and 'm' or 'n', false)
end

-- Run what `lhs` did before we mapped it.
local function fallback(prev, lhs)
  if not prev or vim.tbl_isempty(prev) then return feed(lhs, false) end
  if prev.callback then
    local out = prev.callback()
    if prev.expr == 1 and type(out) == 'string' then feed(out, prev.noremap ~= 1) end
    return
  end
  local rhs = prev.rhs or ''
  if prev.expr == 1 then rhs = vim.api.nvim_eval(rhs) end
  feed(rhs, prev.noremap ~= 1)
end

-- lhs -> { name = action, prev = what the key did before we mapped it } (Insert mode);
-- Normal-mode keys are stored as 'n:' .. lhs
M.installed = {}

local function mode_of(name) return M.normal_actions[name] and 'n' or 'i' end

-- Give `lhs` back what it did before we mapped it.
local function restore(lhs, prev, mode)
  pcall(vim.keymap.del, mode, lhs)
  if prev and not vim.tbl_isempty(prev) then vim.fn.mapset(mode, false, prev) end
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
      restore(km.lhs or key, km.prev, km.mode or 'i')
      M.installed[key] = nil
    end
  end
  for key, name in pairs(wanted) do
    if not M.installed[key] then
      local mode = mode_of(name)
      local lhs = mode == 'n' and key:sub(3) or key
      local prev = vim.fn.maparg(lhs, mode, false, true)
      local action = M.actions[name] or M.normal_actions[name]
      M.installed[key] = { name = name, prev = prev, mode = mode, lhs = lhs }
      vim.keymap.set(mode, lhs, function()
        if not action() then fallback(prev, lhs) end
      end, { desc = 'local-copilot: ' .. name .. ' (falls back to the key)' })
    end
  end
end

return M
