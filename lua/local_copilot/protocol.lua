-- Every message between this Lua side and the Python host, listed in one place
-- (python/local_copilot/nvim/protocol.py types the same ones). Events go to the host as
-- vim.rpcnotify(chan, 'local_copilot_event', name, payload); what the host tells Lua goes to
-- updates.lua.
local M = {}

---@class local_copilot.Snapshot what a keystroke sends: the buffer around the cursor
---@field buf integer
---@field tick integer b:changedtick when taken
---@field row integer 0-based cursor row
---@field col integer 0-based cursor column in bytes
---@field first integer 0-based row of lines[1]
---@field lines? string[] the window around the cursor (absent when `base` is given)
---@field base? integer seq of the whole window this one-line snapshot belongs to
---@field line? string the cursor's line (with `base`)
---@field line_from? integer bytes of the cursor's line left out before its text here (a long line is cut: trigger.lua)
---@field nlines integer lines in the buffer
---@field ft string
---@field path string
---@field et boolean
---@field sw integer
---@field ts integer
---@field seq integer increasing id; the render plan echoes it
---@field interval? number smoothed milliseconds between keystrokes
---@field shown? integer suggestions shown since the last request (the host counts them)
---@field text? string typed_through only: what is left of the suggestion

---@class local_copilot.Candidate
---@field text string
---@field words integer[] byte offsets where accept_word() stops

---@class local_copilot.RenderPlan what ghost.show() draws (updates.lua's 'render' update)
---@field buf integer
---@field tick integer drawn only while b:changedtick equals this
---@field row integer
---@field col integer
---@field seq integer the snapshot's seq
---@field items local_copilot.Candidate[]
---@field index integer 0-based candidate shown
---@field final boolean no more updates for this seq
---@field cached boolean answered from the host's cache

---@class local_copilot.EditSpec an instruction edit's question
---@field path string
---@field ft string
---@field lines string[] the selection
---@field before string[] lines above it
---@field after string[] lines below it
---@field instruction string
---@field history string[][] earlier rounds of a follow-up: { instruction, answer } pairs
---@field et boolean the buffer's 'expandtab', 'shiftwidth' and 'tabstop': the answer is indented so
---@field sw integer
---@field ts integer

---@class local_copilot.EditUpdate an instruction edit's state (updates.lua's 'edit' update)
---@field id integer
---@field buf integer
---@field state 'waiting'|'streaming'|'done'|'error'
---@field lines string[] the answer's code so far
---@field tokens integer
---@field elapsed_ms integer
---@field message string why it failed, or a note
---@field truncated boolean stopped at the token limit

---@class local_copilot.event.Backend :LocalCopilotBackend
---@field action 'switch'|'start'|'stop'|'restart'|'model'
---@field name? string the entry (the active one when absent); for 'model', the model to use

---@class local_copilot.event.Chunk another buffer's text for cross-file context
---@field path string
---@field lines string[]
---@field around? integer 0-based row the text is centred on

---@class local_copilot.Definition one definition a language server found (definitions.lua)
---@field path string its file
---@field text string its header and a short body, or the server's hover text

---@class local_copilot.event.Definitions the definitions of the names near the cursor, the newest last
---@field buf integer
---@field path string the buffer's file
---@field items local_copilot.Definition[]

---@class local_copilot.RecentEdit a change the user finished (recent_edits.lua)
---@field buf integer
---@field path string
---@field row integer 0-based first row of `new`
---@field new string[] the rows as the change left them
---@field before string[] unchanged rows just above
---@field after string[] and just below

---@class local_copilot.event.Edits changes finished elsewhere, oldest first, as context for ghost text
---@field edits local_copilot.RecentEdit[]

---@class local_copilot.event.Yank
---@field path string
---@field lines string[]

---@class local_copilot.event.Buf cancel (Insert mode left) and forget (the buffer was wiped)
---@field buf integer

---@class local_copilot.event.Accepted
---@field kind 'full'|'word'|'line'

---@class local_copilot.event.PathChanged
---@field path string

---@class local_copilot.EditRecord one change the user made (edit_recorder.lua)
---@field path string
---@field row integer 0-based first row changed
---@field old string[] the rows before
---@field new string[] the rows after
---@field before? string[] unchanged rows just above
---@field after? string[] and just below

---@class local_copilot.event.NextEdit ask for the next edit around the cursor
---@field buf integer
---@field tick integer
---@field row integer
---@field col integer
---@field first integer 0-based row of lines[1]
---@field lines string[]
---@field nlines integer
---@field path string
---@field ft string
---@field seq integer
---@field cwd string
---@field edits local_copilot.EditRecord[] recorded since the last request

---@class local_copilot.event.NextEditNote
---@field what 'shown'|'accepted'|'dismissed'

---@class local_copilot.event.EditRequest
---@field id integer Lua's own numbering
---@field buf integer
---@field attempt integer retries so far
---@field spec local_copilot.EditSpec

---@class local_copilot.event.EditWarm
---@field buf integer
---@field spec local_copilot.EditSpec

---@class local_copilot.event.EditCancel
---@field buf integer
---@field id integer

-- Lua -> host (notifications): name -> what the payload is
M.events = {
  config = 'the options table given to setup(): sent before the next event whenever they changed',
  snapshot = 'local_copilot.Snapshot: ask for a suggestion at the cursor',
  alternatives = 'local_copilot.Snapshot: more candidates for this spot (next()/prev())',
  typed_through = 'local_copilot.Snapshot with text: the user typed part of the suggestion',
  warm = 'local_copilot.Snapshot: the cursor rests here in Normal mode, evaluate its prompt (nothing generated)',
  backend = '{ action = switch|stop|restart, name? }',
  chunk = '{ path, lines, around? }: another buffer\'s text for cross-file context',
  definitions = '{ buf, path, items = local_copilot.Definition[] }: what the buffer\'s language servers found for the names near the cursor',
  edits = '{ edits = local_copilot.RecentEdit[] }: changes the user finished, oldest first, as context for ghost text',
  yank = '{ path, lines }: yanked text for cross-file context',
  cancel = '{ buf }: Insert mode left, stop what is in flight there',
  accepted = '{ kind = full|word|line }',
  forget = '{ buf }: the buffer was wiped',
  switched = '{ channel }: events go on the worker\'s channel from now on (sent after the earlier ones, on their channel)',
  path_changed = '{ path }: the file was written, read or a buffer named so: judge where it resolves anew',
  next_edit = '{ buf, tick, row, col, first, lines, nlines, path, ft, seq, cwd, edits, et, sw, ts }: ask for the next edit',
  next_edit_note = '{ what = shown|accepted|dismissed }: a next edit on screen (the host counts them)',
  edit_request = '{ id, buf, attempt, spec = local_copilot.EditSpec }: ask for an instruction edit',
  edit_warm = '{ buf, spec = local_copilot.EditSpec }: the instruction is being typed; warm the prompt cache',
  edit_cancel = '{ buf, id }: stop an instruction edit',
}

-- Lua -> host (sync calls through LocalCopilotCall): status, stats, health, backend_status,
-- debug_state, leaving.

-- host -> Lua: one tagged union of updates, received by updates.lua's receive() (its LuaCATS
-- shapes describe each); and one sync question, trigger.take_shown().

return M
