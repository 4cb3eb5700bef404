-- Loaded at startup: user commands, <Plug> maps and one InsertEnter hook. Every require()
-- is deferred so startup stays cheap; the Python host starts on first use.
if vim.g.loaded_local_copilot then return end
vim.g.loaded_local_copilot = true

local function lc() return require('local_copilot') end

vim.keymap.set('i', '<Plug>(local-copilot-accept)', function() lc().accept() end, { desc = 'local-copilot: accept the suggestion' })
vim.keymap.set('i', '<Plug>(local-copilot-dismiss)', function() lc().dismiss() end, { desc = 'local-copilot: dismiss the suggestion' })
vim.keymap.set('i', '<Plug>(local-copilot-trigger)', function() lc().trigger() end, { desc = 'local-copilot: request a suggestion now' })

vim.api.nvim_create_user_command('LocalCopilot', function(o) require('local_copilot.commands').run(o.fargs) end, {
  nargs = '?',
  complete = function() return require('local_copilot.commands').names() end,
  desc = 'local-copilot: enable|disable|toggle|status|log',
})

vim.api.nvim_create_autocmd('InsertEnter', {
  group = vim.api.nvim_create_augroup('LocalCopilotBoot', { clear = true }),
  once = true,
  callback = function() lc().attach() end,
  desc = 'local-copilot: attach on first insert',
})
