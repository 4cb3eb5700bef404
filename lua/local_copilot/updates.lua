-- Everything the Python host tells Lua arrives here: one function, receive(), takes one update
-- or several (python/local_copilot/updates.py defines the same tagged union) and hands
-- each to the module it concerns by its `type`.
local M = {}

---@alias local_copilot.Update
---| local_copilot.update.Render
---| local_copilot.update.NextEdit
---| local_copilot.update.Edit
---| local_copilot.update.BackendState
---| local_copilot.update.BackendReady
---| local_copilot.update.Notice
---| local_copilot.update.PrivacyVerdict
---| local_copilot.update.PrivacyRules
---| local_copilot.update.Resync
---| local_copilot.update.UseChannel

---@class local_copilot.update.Render a suggestion to draw
---@field type 'render'
---@field plan local_copilot.RenderPlan

---@class local_copilot.update.NextEdit a next edit to draw (0-based rows, byte columns)
---@field type 'next_edit'
---@field buf integer
---@field tick integer drawn only while b:changedtick equals this
---@field seq integer the request's seq
---@field cursor integer[] { row, col } where it was asked for
---@field row integer
---@field col integer
---@field end_row integer
---@field end_col integer exclusive
---@field text string what replaces the span ("\n" between lines)
---@field old string what the span holds

---@class local_copilot.update.Edit an instruction edit's preview or outcome
---@field type 'edit'
---@field update local_copilot.EditUpdate

---@class local_copilot.update.BackendState
---@field type 'backend_state'
---@field state 'ok'|'down'|'held'|'loading'|'bad option'
---@field message? string why; for 'held' the time the wait ends (seconds since the epoch)

---@class local_copilot.update.BackendReady a backend switch took effect
---@field type 'backend_ready'
---@field backend string

---@class local_copilot.update.Notice a message for the user
---@field type 'notice'
---@field message string
---@field level? string 'info' when absent

---@class local_copilot.update.PrivacyVerdict why the host never sends a buffer's text (no reason: it may again)
---@field type 'privacy_verdict'
---@field buf integer
---@field path string
---@field reason? string
---@field kind? 'path'|'content'

---@class local_copilot.update.PrivacyRules the policy's path rules
---@field type 'privacy_rules'
---@field rules string[][] { lua pattern, reason } pairs

---@class local_copilot.update.Resync the host lacks the window a one-line snapshot referred to
---@field type 'resync'
---@field buf integer

---@class local_copilot.update.UseChannel the host's worker has a channel of its own to Neovim
---@field type 'use_channel'
---@field channel integer

---@type table<string, fun(u: local_copilot.Update)>
local handlers = {
  render = function(u) require('local_copilot.ghost').show(u.plan) end,
  next_edit = function(u) require('local_copilot.next_edit').show(u) end,
  edit = function(u) require('local_copilot.edit')._update(u.update) end,
  backend_state = function(u) require('local_copilot')._backend_state(u.state, u.message or '') end,
  backend_ready = function(u)
    vim.api.nvim_exec_autocmds('User', { pattern = 'LocalCopilotBackendReady', modeline = false,
      data = { backend = u.backend } })
  end,
  notice = function(u) require('local_copilot').notify(u.message, u.level or 'info') end,
  privacy_verdict = function(u) require('local_copilot.privacy')._verdict(u.buf, u.path, u.reason, u.kind) end,
  privacy_rules = function(u) require('local_copilot.privacy')._rules(u.rules) end,
  resync = function(u) require('local_copilot.trigger').resync(u.buf) end,
  use_channel = function(u) require('local_copilot.host').use_channel(u.channel) end,
  lsp_answer = function(u) require('local_copilot.lsp').answer(u.id, u.result) end,
}

-- The tags handled (tests: the same as the host's updates.TAGS).
M.tags = vim.tbl_keys(handlers)

-- Called by the host with one update or several, in the order they happened. An update of a
-- tag this Lua does not know (a host of another version) is skipped.
---@param ... local_copilot.Update
function M.receive(...)
  for i = 1, select('#', ...) do
    local u = select(i, ...)
    local handle = handlers[u.type]
    if handle then handle(u) end
  end
end

return M
