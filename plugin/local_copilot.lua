-- Loaded at startup: user commands, <Plug> maps and one InsertEnter hook. Every require()
-- is deferred so startup stays cheap; the Python host starts on first use.
if vim.g.loaded_local_copilot then return end
vim.g.loaded_local_copilot = true

-- the plugin's own remote-plugin host type (python.lua): the rplugin manifest's functions and
-- :UpdateRemotePlugins need it known
require('local_copilot.python').register()

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

-- instruction edits: the selection in Visual mode; accept/cancel/retry the preview in Normal mode
vim.keymap.set('x', '<Plug>(local-copilot-edit)', function()
  local a, b = vim.fn.line('v'), vim.fn.line('.')
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<Esc>', true, false, true), 'nx', false)
  lc().edit({ line1 = math.min(a, b), line2 = math.max(a, b) })
end, { desc = 'local-copilot: edit the selection from an instruction' })
for _, a in ipairs({
  { 'edit-accept', 'edit_accept', 'accept the edit' },
  { 'edit-cancel', 'edit_cancel', 'cancel the edit' },
  { 'edit-retry', 'edit_retry', 'ask for the edit again' },
}) do
  vim.keymap.set('n', '<Plug>(local-copilot-' .. a[1] .. ')', function() lc()[a[2]]() end, { desc = 'local-copilot: ' .. a[3] })
end

vim.api.nvim_create_user_command('LocalCopilotEdit', function(o)
  local instruction = o.args ~= '' and o.args or nil
  -- no range, and a finished edit's preview at the cursor: a follow-up on its answer
  if o.range == 0 and require('local_copilot').edit_visible() then
    local edit = require('local_copilot.edit')
    if edit.follow_up_possible() then return edit.follow_up(instruction) end
  end
  lc().edit({ line1 = o.line1, line2 = o.line2, instruction = instruction })
end, {
  nargs = '*',
  range = true,
  desc = 'local-copilot: edit the range from an instruction (asked for when not given)',
})

vim.api.nvim_create_user_command('LocalCopilot', function(o) require('local_copilot.commands').run(o.fargs) end, {
  nargs = '?',
  complete = function() return require('local_copilot.commands').names() end,
  desc = 'local-copilot: enable|disable|toggle|status|stats|log|doctor',
})

vim.api.nvim_create_user_command('LocalCopilotBackend', function(o)
  require('local_copilot').attach()
  require('local_copilot.commands').backend(o.fargs)
end, {
  nargs = '*',
  complete = function(lead, cmdline) return require('local_copilot.commands').backend_names(lead, cmdline) end,
  desc = 'local-copilot: switch backend (starting its server), auto, start, stop, restart, model NAME; no argument shows it',
})

vim.api.nvim_create_autocmd('InsertEnter', {
  group = vim.api.nvim_create_augroup('LocalCopilotBoot', { clear = true }),
  once = true,
  callback = function() lc().attach(true) end,
  desc = 'local-copilot: attach on first insert',
})
