-- Cross-file context: text around the cursor of buffers the user visits, writes or jumps in,
-- and what they yank, goes to the host's ring of chunks. Never starts the host, never reads a
-- buffer that is disabled (secrets included).
local api = vim.api
local config = require('local_copilot.config')
local host = require('local_copilot.host')
local sessions = require('local_copilot.sessions')
local trigger = require('local_copilot.trigger')

local M = {}

local RING_SCOPE = 64 -- lines on each side of the cursor; the host picks a 64-line chunk
local JUMP = 32 -- a cursor move of more lines than this is a jump worth remembering

function M.send(buf)
  if not host.running() or not api.nvim_buf_is_valid(buf) or not trigger.buf_enabled(buf) then return end
  if config.get('context').extra_tokens == 0 then return end
  local win = vim.fn.bufwinid(buf)
  local row = win ~= -1 and api.nvim_win_get_cursor(win)[1] - 1 or 0
  local first = math.max(0, row - RING_SCOPE)
  host.tell('chunk', {
    path = api.nvim_buf_get_name(buf),
    lines = trigger.cut_lines(api.nvim_buf_get_lines(buf, first, row + RING_SCOPE, false)),
    around = row - first,
  })
end

function M.on_cursor_moved(ev)
  local row = api.nvim_win_get_cursor(0)[1]
  local s = sessions.get(ev.buf) -- (its `last_row`: the cursor's row when CursorMoved last ran there)
  local prev = s.last_row
  s.last_row = row
  if prev and math.abs(row - prev) > JUMP then M.send(ev.buf) end
end

function M.on_yank(ev)
  if not host.running() or not trigger.buf_enabled(ev.buf) or config.get('context').extra_tokens == 0 then return end
  local lines = vim.v.event.regcontents
  if type(lines) == 'table' and #lines > 0 then
    host.tell('yank', { path = api.nvim_buf_get_name(ev.buf), lines = trigger.cut_lines(lines) })
  end
end

return M
