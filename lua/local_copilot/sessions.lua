-- Every buffer's state on the Lua side, in one table per buffer (its session), and the one
-- place that forgets a buffer: on BufWipeout, forget() lets each module that holds something
-- of the buffer outside its session (a request in flight, a suggestion on screen, a record
-- not sent yet) let it go, drops the session, and tells the host, whose own Session of the
-- buffer (python/local_copilot/ghost/session.py) goes the same way. A wiped buffer so leaves
-- nothing behind on either side.
--
-- A session is created on first use (get); a reader that must not create one asks peek. The
-- fields belong to the module named beside each; no other module writes them.
local api = vim.api

local M = {}

---@class local_copilot.Session
---@field buf integer
---@field facts? table trigger.lua: what the keystroke path reads of the buffer besides its text
---@field base? table trigger.lua: the last whole window sent { seq, row, first, last, n }
---@field watched? true trigger.lua: nvim_buf_attach watches its edits
---@field waiting? true trigger.lua: a request waits for its answer (status()'s 'waiting')
---@field seq? integer ghost.lua: the latest snapshot sent; only its render plans draw
---@field info_drawn? true ghost.lua: the (i/n) annotation mark may exist
---@field next_edit_seq? integer next_edit.lua: the latest next-edit request's seq
---@field edit_failed? table edit.lua: the last instruction edit that failed (edit_retry())
---@field edit_keys? table edit.lua: lhs -> the buffer-local mapping it had, while a preview maps keys
---@field last_row? integer chunks.lua: the cursor's row when CursorMoved last ran
---@field definitions? table definitions.lua: the definitions found and asked for
---@field recorder? table edit_recorder.lua: the pending change and the copy of the text
---@field verdict? table privacy.lua: why the host refuses the buffer's text { path, reason, kind }
---@field binary? table privacy.lua: the file judged binary or not { path, reason }

---@type table<integer, local_copilot.Session>
local by_buf = {}

-- name -> fun(buf, session?) and the names in the order they were given: a module's hook
-- runs before those of the modules loaded after it (the recorder's flush before recent edits
-- drop what it flushed)
local hooks, order = {}, {}

-- The session of `buf`, created on first use. A buffer already wiped gets a table that is
-- not kept: a late answer for it (a verdict, a definition) leaves nothing.
---@return local_copilot.Session
function M.get(buf)
  local s = by_buf[buf]
  if s then return s end
  s = { buf = buf }
  if api.nvim_buf_is_valid(buf) then by_buf[buf] = s end
  return s
end

-- The session of `buf` if it has one (nothing is created).
---@return local_copilot.Session?
function M.peek(buf) return by_buf[buf] end

-- Every session, for what changes in all buffers at once (new options, a new host).
function M.all() return pairs(by_buf) end

-- `fn(buf, session)` runs when `buf` is forgotten (session nil when it had none): for what a
-- module keeps of the buffer outside its session. Given again under the same name, it
-- replaces the earlier one (a module loaded anew).
---@param name string
---@param fn fun(buf: integer, s: local_copilot.Session?)
function M.on_forget(name, fn)
  if not hooks[name] then order[#order + 1] = name end
  hooks[name] = fn
end

-- `buf` was wiped: everything of it goes, here and in the host.
function M.forget(buf)
  local s = by_buf[buf]
  for _, name in ipairs(order) do hooks[name](buf, s) end
  by_buf[buf] = nil
  local host = package.loaded['local_copilot.host'] -- (a host never loaded knows nothing of it)
  if host then host.tell('forget', { buf = buf }) end
  -- a handler of the same wipe that runs after this one may write to the buffer's session
  -- again (the buffer is still valid while BufWipeout runs): dropped once the wipe is done
  vim.schedule(function()
    if by_buf[buf] and not api.nvim_buf_is_valid(buf) then by_buf[buf] = nil end
  end)
end

-- The buffers that have a session (tests: a wiped buffer is not among them).
function M._buffers()
  local out = {}
  for buf in pairs(by_buf) do out[#out + 1] = buf end
  table.sort(out)
  return out
end

api.nvim_create_autocmd('BufWipeout', {
  group = api.nvim_create_augroup('LocalCopilotSessions', { clear = true }),
  callback = function(ev) M.forget(ev.buf) end,
  desc = 'local-copilot: forget a wiped buffer',
})

return M
