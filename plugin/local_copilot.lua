-- Loaded at startup: user commands, <Plug> maps and one InsertEnter hook. Every require()
-- is deferred so startup stays cheap; the Python host starts on first use.
if vim.g.loaded_local_copilot then return end
vim.g.loaded_local_copilot = true

local function lc() return require('local_copilot') end

for _, a in ipairs({
  { 'accept', 'accept', 'accept the suggestion' },
  { 'accept-word', 'accept_word', 'accept the next word' },
  { 'accept-line', 'accept_line', 'accept the next line' },
  { 'next', 'next', 'next alternative' },
  { 'prev', 'prev', 'previous alternative' },
  { 'dismiss', 'dismiss', 'dismiss the suggestion' },
  { 'trigger', 'trigger', 'request a suggestion now' },
}) do
  vim.keymap.set('i', '<Plug>(local-copilot-' .. a[1] .. ')', function() lc()[a[2]]() end, { desc = 'local-copilot: ' .. a[3] })
end

for _, a in ipairs({
  { 'next-edit-accept', 'next_edit_accept', 'jump to the next edit, or apply it' },
  { 'next-edit-dismiss', 'next_edit_dismiss', 'dismiss the next edit' },
  { 'next-edit-request', 'next_edit_request', 'ask for the next edit now' },
}) do
  vim.keymap.set('n', '<Plug>(local-copilot-' .. a[1] .. ')', function() lc()[a[2]]() end, { desc = 'local-copilot: ' .. a[3] })
end

vim.api.nvim_create_user_command('LocalCopilot', function(o) require('local_copilot.commands').run(o.fargs) end, {
  nargs = '?',
  complete = function() return require('local_copilot.commands').names() end,
  desc = 'local-copilot: enable|disable|toggle|status|stats|log',
})

vim.api.nvim_create_user_command('LocalCopilotBackend', function(o)
  require('local_copilot').attach()
  require('local_copilot.commands').backend(o.fargs)
end, {
  nargs = '*',
  complete = function() return require('local_copilot.commands').backend_names() end,
  desc = 'local-copilot: switch backend (starting its server), auto, start, stop, restart; no argument shows it',
})

vim.api.nvim_create_autocmd('InsertEnter', {
  group = vim.api.nvim_create_augroup('LocalCopilotBoot', { clear = true }),
  once = true,
  callback = function() lc().attach(true) end,
  desc = 'local-copilot: attach on first insert',
})
