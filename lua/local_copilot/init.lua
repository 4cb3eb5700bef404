-- Public API of local-copilot.nvim. Keystrokes become snapshots sent to the Python host as
-- async notifications; the host answers with render plans drawn by ghost.lua.
local api = vim.api
local config = require('local_copilot.config')
local ghost = require('local_copilot.ghost')

local M = {}

local state = {
  enabled = true,
  seq = 0,
  sent_config_version = -1,
  timer = nil,
  attached = false,
  warned_unregistered = false,
  waiting = {}, -- buf -> true while a request is in flight (for status())
}

-- The manifest defines the rplugin's functions lazily: a FuncUndefined autocmd starts the
-- host on first call. Either form means :UpdateRemotePlugins registered us.
function M.registered(name)
  name = name or 'LocalCopilotEvent'
  return vim.fn.exists('*' .. name) == 1 or vim.fn.exists('#FuncUndefined#' .. name) == 1
end

local function host_ready()
  if M.registered() then return true end
  if not state.warned_unregistered then
    state.warned_unregistered = true
    M.notify('local-copilot: the remote plugin is not registered; run :UpdateRemotePlugins and restart (:checkhealth local_copilot)', 'error')
  end
  return false
end

local function send(name, payload)
  if not host_ready() then return end
  vim.fn.LocalCopilotEvent(name, payload)
end

-- Options: see :help local-copilot-config. Stores them; nothing starts here.
function M.setup(opts)
  vim.validate('opts', opts, 'table', true)
  config.set(opts or {})
  require('local_copilot.install').use_private_host()
  M._define_highlights()
  require('local_copilot.keymaps').apply(config.get('keymaps'))
  M.attach()
  -- a host already running must hear about the new options now, not on the next keystroke
  if vim.fn.exists('*LocalCopilotEvent') == 1 and state.sent_config_version >= 0 then -- host running
    state.sent_config_version = config.version
    send('config', config.user)
  end
end

function M._define_highlights()
  api.nvim_set_hl(0, 'LocalCopilotSuggestion', { link = 'Comment', default = true })
end

local function is_secret(path)
  local name = vim.fs.basename(path)
  for _, pat in ipairs(config.secret_patterns) do
    if name:match(pat) then return true end
  end
  return false
end

-- Whether completion may run in `buf` (global toggle, filetype, buffer flag, secrets, size).
function M.buf_enabled(buf)
  buf = buf or api.nvim_get_current_buf()
  if not state.enabled or vim.b[buf].local_copilot_enabled == false then return false end
  if vim.bo[buf].buftype ~= '' then return false end
  local ft = vim.bo[buf].filetype
  local fts = config.get('filetypes')
  local on = fts[ft]
  if on == nil then on = config.filetype_defaults[ft] end
  if on == nil then on = fts['*'] end
  if on == false then return false end
  if vim.b[buf].local_copilot_enabled == true then return true end
  local path = api.nvim_buf_get_name(buf)
  if path ~= '' and is_secret(path) then return false end
  if api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf)) > config.max_file_bytes then return false end
  return true
end

local function snapshot(buf)
  local row, col = unpack(api.nvim_win_get_cursor(0))
  row = row - 1
  local ctx = config.get('context')
  local n = api.nvim_buf_line_count(buf)
  local first = math.max(0, row - ctx.lines_before)
  local last = math.min(n, row + 1 + ctx.lines_after)
  state.seq = state.seq + 1
  local bo = vim.bo[buf]
  return {
    buf = buf,
    tick = api.nvim_buf_get_changedtick(buf),
    row = row,
    col = col,
    first = first,
    lines = api.nvim_buf_get_lines(buf, first, last, false),
    nlines = n,
    ft = bo.filetype,
    path = api.nvim_buf_get_name(buf),
    et = bo.expandtab,
    sw = bo.shiftwidth,
    ts = bo.tabstop,
    seq = state.seq,
  }
end

-- Send a snapshot now (manual trigger, or when the debounce timer fires).
function M.trigger()
  local buf = api.nvim_get_current_buf()
  if not M.buf_enabled(buf) or not host_ready() then return end
  local snap = snapshot(buf)
  ghost.last_seq[buf] = snap.seq
  if state.sent_config_version ~= config.version then
    state.sent_config_version = config.version
    snap.config = config.user
  end
  state.waiting[buf] = true
  send('snapshot', snap)
end

local function on_change()
  local cur = ghost.current
  if cur and not ghost.is_visible() then ghost.clear() end
  if not config.get('auto_trigger') then return end
  local delay = config.get('debounce_ms')
  state.timer = state.timer or vim.uv.new_timer()
  state.timer:stop()
  state.timer:start(delay, 0, vim.schedule_wrap(function()
    if api.nvim_get_mode().mode:sub(1, 1) == 'i' then M.trigger() end
  end))
end

local function on_leave()
  if state.timer then state.timer:stop() end
  local buf = api.nvim_get_current_buf()
  ghost.clear()
  ghost.last_seq[buf] = nil
  if state.waiting[buf] then
    state.waiting[buf] = nil
    if vim.fn.exists('*LocalCopilotEvent') == 1 then vim.fn.LocalCopilotEvent('cancel', buf) end -- host running
  end
end

function M.attach()
  if state.attached then return end
  state.attached = true
  M._define_highlights()
  local group = api.nvim_create_augroup('LocalCopilot', { clear = true })
  api.nvim_create_autocmd({ 'TextChangedI', 'CursorMovedI' }, { group = group, callback = on_change, desc = 'local-copilot: request a suggestion' })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave', 'WinLeave' }, { group = group, callback = on_leave, desc = 'local-copilot: clear the suggestion' })
  api.nvim_create_autocmd('ColorScheme', { group = group, callback = M._define_highlights, desc = 'local-copilot: highlight' })
  api.nvim_create_autocmd('User', { group = group, pattern = 'LocalCopilotSuggestion', callback = function(ev)
    state.waiting[api.nvim_get_current_buf()] = nil
  end, desc = 'local-copilot: request finished' })
end

function M.accept() return ghost.accept() end
function M.is_visible() return ghost.is_visible() end

function M.dismiss()
  if not ghost.is_visible() then return false end
  on_leave()
  return true
end

function M.enable() state.enabled = true end
function M.disable() state.enabled = false; on_leave() end
function M.toggle() if state.enabled then M.disable() else M.enable() end end

-- For statuslines: 'disabled', 'showing', 'waiting' or 'idle'.
function M.status()
  local buf = api.nvim_get_current_buf()
  if not M.buf_enabled(buf) then return 'disabled' end
  if ghost.is_visible() then return 'showing' end
  if state.waiting[buf] then return 'waiting' end
  return 'idle'
end

-- Called by the Python host; safe from any context.
function M.notify(msg, level)
  vim.schedule(function()
    vim.notify(msg, vim.log.levels[(level or 'warn'):upper()] or vim.log.levels.WARN, { title = 'local-copilot' })
  end)
end

return M
