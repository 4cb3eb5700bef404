-- Optional keys from setup({ keymaps = ... }). A key falls back to what it did before
-- (the user's earlier mapping, or the key itself) when no suggestion is shown.
local M = {}

local actions = {
  accept = function() return require('local_copilot').accept() end,
  dismiss = function() return require('local_copilot').dismiss() end,
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
    local action = actions[name]
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
