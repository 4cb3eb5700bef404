-- Public API of local-copilot.nvim: setup() and the functions users map. The work is done by
-- one module per concern: trigger.lua (when to ask, and the snapshot), host.lua (the channel
-- to the Python host), ghost.lua (the suggestion on screen), chunks.lua (cross-file context).
local api = vim.api
local config = require('local_copilot.config')
local ghost = require('local_copilot.ghost')
local host = require('local_copilot.host')
local message = require('local_copilot.message')
local trigger = require('local_copilot.trigger')

local M = {}

local state = {
  attached = false,
  backend = 'unknown', -- 'ok' | 'down' | 'bad option' | 'unknown', as the host last reported
  backend_message = '',
}

-- Called by the Python host, which logs the whole message (message.lua fits it to the
-- command line); safe from any context.
---@param msg string
---@param level string|integer
function M.notify(msg, level) vim.schedule(function() message.show(msg, level, true) end) end

host.setup({
  notify = function(msg, level) vim.schedule(function() message.show(msg, level, false) end) end,
  on_new_host = trigger.forget_windows,
})
trigger.setup({ answering = function() return state.backend ~= 'bad option' and not host.stopped() end })
ghost.setup({ on_answered = trigger.answered })

---@type fun(name?: string): boolean whether :UpdateRemotePlugins registered the rplugin
M.registered = host.registered
---@type fun(buf?: integer): boolean whether completion may run in the buffer
M.buf_enabled = trigger.buf_enabled

-- Options: see :help local-copilot-config. Stores them; nothing starts here. Options of a
-- type Lua cannot use are one message naming the option (never a stack trace); they are not
-- taken, and nothing is asked for until setup() gets good ones.
---@param opts? local_copilot.Options
function M.setup(opts)
  local wrong = config.check(opts)
  if wrong then
    state.backend, state.backend_message = 'bad option', wrong
    trigger.nothing_waiting()
    message.show('local-copilot: bad option: ' .. wrong, 'error', false)
    return
  end
  config.set(opts or {})
  -- the host judges the new options (a host started later too): it says again if they are bad
  if state.backend == 'bad option' then state.backend, state.backend_message = nil, '' end
  M._define_highlights()
  require('local_copilot.keymaps').apply(config.get('keymaps'))
  M.attach()
  -- recent edits as context: loaded only while they are on (setup() again may turn them off)
  local ctx = config.get('context')
  if (ctx.edits ~= false and ctx.extra_tokens > 0) or package.loaded['local_copilot.recent_edits'] then
    require('local_copilot.recent_edits').setup()
  end
  -- next edits: loaded only once they are turned on (setup() again may turn them off)
  if config.get('next_edit').enabled or package.loaded['local_copilot.next_edit'] then
    require('local_copilot.next_edit').attach()
  end
  host.options_changed()
  -- the in-process language server: loaded only once it is turned on (setup() again may turn it off)
  if config.get('lsp') or package.loaded['local_copilot.lsp'] then require('local_copilot.lsp').setup() end
end

function M._define_highlights()
  api.nvim_set_hl(0, 'LocalCopilotSuggestion', { link = 'Comment', default = true })
  api.nvim_set_hl(0, 'LocalCopilotAnnotation', { link = 'LocalCopilotSuggestion', default = true })
  api.nvim_set_hl(0, 'LocalCopilotNextEditAdd', { link = 'DiffAdd', default = true })
  api.nvim_set_hl(0, 'LocalCopilotNextEditDelete', { link = 'DiffDelete', default = true })
  api.nvim_set_hl(0, 'LocalCopilotNextEditMarker', { link = 'LocalCopilotSuggestion', default = true })
  -- instruction edits' previews (edit.lua)
  api.nvim_set_hl(0, 'LocalCopilotEditRemoved', { link = 'DiffDelete', default = true })
  api.nvim_set_hl(0, 'LocalCopilotEditAdded', { link = 'DiffAdd', default = true })
  api.nvim_set_hl(0, 'LocalCopilotEditInfo', { link = 'Comment', default = true })
end

-- Create the autocmds; `from_insert_enter` also handles the InsertEnter that loaded us.
function M.attach(from_insert_enter)
  if from_insert_enter and not state.attached then vim.schedule(trigger.on_change) end
  if state.attached then return end
  state.attached = true
  M._define_highlights()
  local chunks = require('local_copilot.chunks')
  local group = api.nvim_create_augroup('LocalCopilot', { clear = true })
  local au = function(ev, fn, desc) api.nvim_create_autocmd(ev, { group = group, callback = fn, desc = 'local-copilot: ' .. desc }) end
  -- (a wiped buffer is forgotten by sessions.lua, here and in the host)
  au({ 'InsertEnter', 'OptionSet', 'BufFilePost' }, trigger.forget_facts, 'read buffer options anew')
  au({ 'InsertEnter', 'TextChangedI', 'TextChangedP', 'CursorMovedI' }, trigger.on_change, 'request a suggestion')
  au('InsertCharPre', trigger.on_char_pre, 'clear a suggestion the typed character does not continue')
  au({ 'InsertLeave', 'BufLeave', 'WinLeave' }, trigger.on_leave, 'clear the suggestion')
  au('CompleteChanged', function()
    if config.get('hide_during_completion') then ghost.set_hidden(true) end
  end, 'hide under the completion menu')
  au('CompleteDone', function() vim.schedule(function()
    if vim.fn.pumvisible() == 0 then ghost.set_hidden(false) end
  end) end, 'show again after the completion menu')
  au('ColorScheme', M._define_highlights, 'highlight')
  au('BufEnter', function(ev) vim.defer_fn(function() chunks.send(ev.buf) end, 100) end, 'remember this buffer for context')
  au({ 'BufLeave', 'BufWritePost' }, function(ev) chunks.send(ev.buf) end, 'remember this buffer for context')
  au('CursorMoved', chunks.on_cursor_moved, 'remember the region around a jump')
  au('CursorMoved', trigger.on_rest, 'warm the prompt where the cursor rests')
  au('VimLeavePre', function()
    -- release the servers we share; the last Neovim out stops them
    if vim.fn.exists('*LocalCopilotCall') == 1 then pcall(vim.fn.LocalCopilotCall, 'leaving') end
  end, 'release model servers')
  au('TextYankPost', chunks.on_yank, 'remember yanked text for context')
  local definitions = require('local_copilot.definitions')
  au({ 'InsertEnter', 'TextChangedI' }, definitions.on_change, 'ask the language servers for the definitions near the cursor')
  api.nvim_create_autocmd('User', { group = group, pattern = 'LocalCopilotSuggestion', callback = trigger.count_shown,
    desc = 'local-copilot: count a suggestion shown' })
end

local function accepted(kind, ok)
  if ok then host.tell('accepted', { kind = kind }) end
  return ok
end

---@return boolean accepted (false: nothing shown, a key mapped to it may fall back)
function M.accept() return accepted('full', ghost.accept()) end
---@return boolean
function M.accept_word() return accepted('word', ghost.accept_word()) end
---@return boolean
function M.accept_line() return accepted('line', ghost.accept_line()) end
---@return boolean
function M.is_visible() return ghost.is_visible() end
---@return boolean asked (false: off here, or nothing would answer)
function M.trigger() return trigger.trigger() end

---@return boolean
function M.dismiss()
  if not ghost.is_visible() then return false end
  trigger.on_leave()
  return true
end

-- Next/previous alternative. With one candidate known, fetch more (shown as (i/n));
-- with nothing shown, request a suggestion.
local function cycle(step)
  if ghost.cycle(step) then return true end
  if ghost.is_visible() then
    ghost.expect_cycle(step)
    return trigger.request('alternatives')
  end
  return trigger.trigger()
end

---@return boolean
function M.next() return cycle(1) end
---@return boolean
function M.prev() return cycle(-1) end

-- Next edits (:help local-copilot-next-edit). accept/jump/dismiss return false when no
-- next edit is shown, so a key can fall back.
---@return boolean
function M.next_edit_request() return require('local_copilot.next_edit').request() end
---@return boolean
function M.next_edit_jump() return require('local_copilot.next_edit').jump() end
---@return boolean
function M.next_edit_accept() return require('local_copilot.next_edit').accept() end
---@return boolean
function M.next_edit_dismiss() return require('local_copilot.next_edit').dismiss() end
---@return boolean
function M.next_edit_visible() return require('local_copilot.next_edit').visible() end

function M.enable()
  host.retry() -- a host that would not start is tried again
  trigger.set_enabled(true)
end
function M.disable() trigger.set_enabled(false) end
function M.toggle() trigger.set_enabled(not trigger.enabled()) end

-- Instruction edits (edit.lua): edit({ line1, line2, instruction }) asks for an edit of
-- those lines of the current buffer (the instruction is asked for when absent) and returns
-- its id, or false; the preview shows until edit_accept(), edit_cancel() or edit_retry().
---@param o local_copilot.EditArgs
---@return integer|false
function M.edit(o)
  M._define_highlights()
  return require('local_copilot.edit').edit(o)
end
---@return boolean
function M.edit_accept() return require('local_copilot.edit').accept() end
---@return boolean
function M.edit_cancel() return require('local_copilot.edit').cancel() end
---@return boolean
function M.edit_retry() return require('local_copilot.edit').retry() end
---@param instruction? string
---@return boolean
function M.edit_follow_up(instruction) return require('local_copilot.edit').follow_up(instruction) end
---@return boolean
function M.edit_visible() return require('local_copilot.edit').visible() end

local LOADING_RETRY_MS = 1000

local function now()
  local sec, usec = vim.uv.gettimeofday()
  return sec + usec / 1e6
end

-- The end of a wait the server asked for (its Retry-After), in seconds since the epoch; nil
-- when there is none or it is over.
local function held()
  local untl = state.backend == 'held' and tonumber(state.backend_message)
  if untl and now() < untl then return untl end
  return nil
end

-- For statuslines: 'disabled: <why>' (the privacy policy refuses the buffer), 'disabled',
-- 'host stopped', 'bad option', 'backend down', 'waiting for the server until HH:MM:SS',
-- 'loading <model>' (the server loads the model the entry names), 'showing i/n', 'waiting' or
-- 'idle'.
---@return string
function M.status()
  local buf = api.nvim_get_current_buf()
  local why = require('local_copilot.privacy').reason(buf, api.nvim_buf_get_name(buf))
  if why then return 'disabled: ' .. why end
  if not trigger.buf_enabled(buf) then return 'disabled' end
  if host.stopped() then return 'host stopped' end
  if state.backend == 'bad option' then return 'bad option' end
  if state.backend == 'down' then return 'backend down' end
  if state.backend == 'loading' then return 'loading ' .. state.backend_message end
  local untl = held()
  if untl then return 'waiting for the server until ' .. os.date('%H:%M:%S', math.floor(untl)) end
  if ghost.is_visible() then
    local cur = ghost.current
    return ('showing %d/%d'):format(cur.index, #cur.items)
  end
  if trigger.waiting(buf) then return 'waiting' end
  return 'idle'
end

-- Called by the Python host when a request fails or succeeds after failures ('down', 'ok'),
-- when the server asked it to wait ('held', the time.time() it ends as a string), while it
-- loads the model the entry names ('loading', the model's name), and when it rejects the
-- options ('bad option', until the next setup()).
---@param s 'ok'|'down'|'held'|'loading'|'bad option'
---@param msg string
function M._backend_state(s, msg)
  if s ~= 'ok' then trigger.nothing_waiting() end -- nothing is in flight now
  state.backend, state.backend_message = s, msg or ''
  if s == 'loading' then
    -- nothing was sent; the place the cursor is at is asked for again in a while, until the
    -- model is loaded (each ask costs the server one look at its model list)
    vim.defer_fn(function()
      if state.backend ~= 'loading' or state.backend_message ~= msg then return end
      if api.nvim_get_mode().mode:sub(1, 1) == 'i' and not ghost.is_visible() then trigger.trigger() end
    end, LOADING_RETRY_MS)
  end
  local untl = s == 'held' and tonumber(msg)
  if untl then
    -- resumes by itself: once the wait is over, the place the cursor is at is asked for
    -- again (the keys typed meanwhile sent nothing to the server)
    vim.defer_fn(function()
      if state.backend ~= 'held' or state.backend_message ~= msg then return end
      state.backend, state.backend_message = 'unknown', ''
      if api.nvim_get_mode().mode:sub(1, 1) == 'i' and not ghost.is_visible() then trigger.trigger() end
    end, math.max(0, math.ceil((untl - now()) * 1000)) + 50)
  end
end

return M
