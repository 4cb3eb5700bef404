-- Which buffers' text stays in Neovim. The policy lives in Python
-- (python/local_copilot/privacy.py): the host gives Lua its path rules compiled to Lua
-- patterns once per configuration (_rules), and tells it why it refused a buffer's text
-- (_verdict: the project ignore file, git, a credential in the text). Until the host has
-- started (on the first keystroke) Lua uses the built-in rules the host's module generated
-- (privacy_rules.lua); the host applies the user's `exclude` too, and decides in any case.
local M = {}

local rules = nil -- { { lua pattern, reason }, ... } from the host, or the built-in ones
local verdicts = {} -- buf -> { path = , reason = , kind = 'path' | 'content' } from the host
-- path -> reason or false: status() runs on every statusline redraw, and the rules are many
local judged = {}

function M._rules(list)
  rules = list
  verdicts = {}
  judged = {}
  require('local_copilot.trigger').forget_facts_of()
end

function M._verdict(buf, path, reason, kind)
  if reason == nil or reason == vim.NIL then
    verdicts[buf] = nil
  else
    verdicts[buf] = { path = path, reason = reason, kind = kind }
  end
  require('local_copilot.trigger').forget_facts_of(buf)
end

-- Whether the host gave its rules (with the user's `exclude`).
function M.has_rules() return rules ~= nil and rules ~= package.loaded['local_copilot.privacy_rules'] end

local function path_rule(path)
  if path == '' then return nil end
  local got = judged[path]
  if got ~= nil then return got or nil end
  rules = rules or require('local_copilot.privacy_rules')
  local s = path:gsub('\\', '/'):lower()
  if s:sub(1, 1) ~= '/' then s = '/' .. s end
  got = false
  for _, r in ipairs(rules) do
    if s:find(r[1] .. '$') or s:find(r[1] .. '/') then
      got = r[2]
      break
    end
  end
  judged[path] = got
  return got or nil
end

-- Why no text of `buf` (named `path`) may be read and sent, or nil: its path is refused.
function M.path_reason(buf, path)
  local reason = path_rule(path)
  if reason then return reason end
  local v = verdicts[buf]
  if v and v.kind == 'path' and v.path == path then return v.reason end
  return nil
end

-- Why the host refuses to send `buf`'s text now, or nil (path or content).
function M.reason(buf, path)
  local reason = M.path_reason(buf, path)
  if reason then return reason end
  local v = verdicts[buf]
  if v and v.path == path then return v.reason end
  return nil
end

function M.forget(buf) verdicts[buf] = nil end

return M
