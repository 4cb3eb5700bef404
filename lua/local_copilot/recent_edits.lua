-- The user's recent edits at other places as context for ghost text (the host keeps and
-- judges them: python/local_copilot/prompt/recent_edits.py). edit_recorder.lua records the
-- changes: one on_lines callback per change widens a pending row range, no text read. A change
-- becomes a record once it is finished: the next change is far from it, its buffer is hidden,
-- or Insert mode starts away from it. The records reach the host as one `edits` event, at
-- InsertEnter (before the first key's snapshot, which schedule_request defers, so the first
-- request has them) or on the loop turn after a change far from the one before; nothing rides
-- on a keystroke's snapshot and no event is sent per key. Never starts the host: records wait
-- (a few) until it runs. Only buffers the plugin may read are recorded (trigger.buf_enabled).
local api = vim.api
local config = require('local_copilot.config')
local host = require('local_copilot.host')
local recorder = require('local_copilot.edit_recorder')
local sessions = require('local_copilot.sessions')

local M = {}

-- records kept until the host runs (the host keeps fewer: prompt/recent_edits.py)
local MAX_WAITING = 16

local outbox = {} -- records not sent yet, oldest first
local scheduled = false

function M.enabled()
  local ctx = config.get('context')
  return type(ctx) == 'table' and ctx.edits ~= false and (ctx.extra_tokens or 0) > 0
end

-- `start`: Insert mode in a buffer ghost text serves, which starts the host anyway (events
-- wait in its channel until it has loaded); else only a running host is told.
local function send(start)
  scheduled = false
  if #outbox == 0 or not (start or host.running()) then return end
  host.send('edits', { edits = outbox })
  outbox = {}
end

-- One record from the recorder (called inside on_lines for a change far from the one before:
-- only copies and a scheduled send here).
local function on_record(buf, rec)
  local cut = require('local_copilot.trigger').cut_lines
  local new, after = rec.new, rec.after or {}
  if #new > recorder.MAX_NEW then new, after = vim.list_slice(new, 1, recorder.MAX_NEW), {} end
  outbox[#outbox + 1] = {
    buf = buf, path = rec.path, row = rec.row,
    -- (copies: the next edits' record keeps its rows whole)
    new = cut(vim.list_slice(new)), before = cut(vim.list_slice(rec.before or {})), after = cut(vim.list_slice(after)),
  }
  if #outbox > MAX_WAITING then table.remove(outbox, 1) end
  if not scheduled then
    scheduled = true
    vim.schedule(function() send(false) end)
  end
end

function M.on_buf_enter(ev)
  if require('local_copilot.trigger').buf_enabled(ev.buf) then recorder.attach(ev.buf) end
end

-- Insert mode starts: the changes elsewhere are finished; the one the cursor is in or near
-- may go on (and the window shows it).
function M.on_insert_enter(ev)
  recorder.flush_away(ev.buf, api.nvim_win_get_cursor(0)[1] - 1)
  send(require('local_copilot.trigger').buf_enabled(ev.buf))
end

-- The cursor rests at row `row` of `buf` in Normal mode and its prompt is about to be warmed:
-- the changes away from it are finished and go first, so the warm-up's prompt holds them and
-- the first key there finds it cached (sent at InsertEnter, they would change the prompt's
-- start after the warm-up, and the server would evaluate the window again at that key).
function M.before_warm(buf, row)
  if not M.enabled() then return end
  recorder.flush_away(buf, row)
  send(false)
end

-- The host forgets a wiped buffer's edits (the `forget` event); those not sent yet go too,
-- the one its pending change makes included (recorded first).
function M.on_wipeout(ev)
  recorder.detach(ev.buf)
  outbox = vim.tbl_filter(function(r) return r.buf ~= ev.buf end, outbox)
end
sessions.on_forget('recent_edits', function(buf) M.on_wipeout({ buf = buf }) end)

-- Autocmds of their own group while the option is on (setup() calls this again).
function M.setup()
  local next_edit = config.get('next_edit')
  recorder.want('next_edit', type(next_edit) == 'table' and next_edit.enabled == true)
  if not M.enabled() then
    pcall(api.nvim_del_augroup_by_name, 'LocalCopilotRecentEdits')
    recorder.want('context', false)
    recorder.on_record, outbox = nil, {}
    return
  end
  recorder.want('context', true)
  recorder.on_record = on_record
  local group = api.nvim_create_augroup('LocalCopilotRecentEdits', { clear = true })
  local au = function(ev, fn, desc)
    api.nvim_create_autocmd(ev, { group = group, callback = fn, desc = 'local-copilot: recent edits: ' .. desc })
  end
  au('BufEnter', M.on_buf_enter, 'record edits')
  au('InsertEnter', M.on_insert_enter, 'send the edits finished elsewhere')
  au('BufFilePost', function(ev) recorder.renamed(ev.buf) end, 'record under the new name')
  au({ 'BufHidden', 'BufUnload' }, function(ev) recorder.detach(ev.buf) end, 'stop recording a buffer not shown')
  M.on_buf_enter({ buf = api.nvim_get_current_buf() })
end

-- Tests: the records not sent yet.
function M._waiting() return outbox end

return M
