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

M.installed = {}

function M.apply(keymaps)
  for name, lhs in pairs(keymaps or {}) do
    local action = M.actions[name]
    if action and type(lhs) == 'string' and lhs ~= '' and not M.installed[lhs] then
      local prev = vim.fn.maparg(lhs, 'i', false, true)
      M.installed[lhs] = true
      vim.keymap.set('i', lhs, function()
        if not action() then fallback(prev, lhs) end
      end, { desc = 'local-copilot: ' .. name .. ' (falls back to the key)' })
    end
  end
end

return M
