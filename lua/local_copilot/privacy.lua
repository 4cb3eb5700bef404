-- Which buffers' text stays in Neovim. The policy lives in Python
-- (python/local_copilot/privacy/policy.py): the host gives Lua its path rules compiled to Lua
-- patterns once per configuration (_rules), and tells it why it refused a buffer's text
-- (_verdict: the project ignore file, git, a credential in the text). Until the host has
-- started (on the first keystroke) Lua uses the built-in rules the host's module generated
-- (privacy_rules.lua); the host applies the user's `exclude` too, and decides in any case.
-- As the host does, Lua judges a path as named and as it resolves (its links followed), and
-- once per path: again only when the file is written, read or a buffer renamed. Binary files
-- (git's rule, on the file's first bytes and the buffer's encoding, which only Neovim knows)
-- are judged here alone: their text never reaches the host.
local api = vim.api
local uv = vim.uv or vim.loop
local sessions = require('local_copilot.sessions')

local M = {}

local rules = nil -- { { lua pattern, reason }, ... } from the host, or the built-in ones
-- path -> reason or false: status() runs on every statusline redraw, and the rules are many
local judged = {}
-- Per buffer, in its session (sessions.lua): `verdict`, { path, reason, kind = 'path' |
-- 'content' } from the host; `binary`, { path, reason = reason or false }: the file read once.
local function verdict_of(buf)
  local s = sessions.peek(buf)
  return s and s.verdict
end

-- bytes git reads to tell binary from text (privacy.BINARY_HEAD)
local BINARY_HEAD = 8000

function M._rules(list)
  rules = list
  for _, s in sessions.all() do s.verdict = nil end
  judged = {}
  require('local_copilot.trigger').forget_facts_of()
end

function M._verdict(buf, path, reason, kind)
  if reason == nil or reason == vim.NIL then
    local s = sessions.peek(buf)
    if s then s.verdict = nil end
  else
    sessions.get(buf).verdict = { path = path, reason = reason, kind = kind }
  end
  require('local_copilot.trigger').forget_facts_of(buf)
end

-- Whether the host gave its rules (with the user's `exclude`).
function M.has_rules() return rules ~= nil and rules ~= package.loaded['local_copilot.privacy_rules'] end

local function match(path)
  local s = path:gsub('\\', '/'):lower()
  if s:sub(1, 1) ~= '/' then s = '/' .. s end
  for _, r in ipairs(rules) do
    if s:find(r[1] .. '$') or s:find(r[1] .. '/') then return r[2] end
  end
  return nil
end

-- The absolute `path` with its links followed, as the host's os.path.realpath does it: a
-- missing file below a linked directory and a link to a missing file (written through on
-- :write) resolve too. A relative path stays as it is.
local function resolve(path, depth)
  depth = depth or 0
  if path:sub(1, 1) ~= '/' or depth > 40 then return path end
  local real = uv.fs_realpath(path)
  if real then return real end
  local dir, name = path:match('^(.*)/([^/]*)$')
  local st = uv.fs_lstat(path)
  if st and st.type == 'link' then
    local target = uv.fs_readlink(path)
    if target then
      if target:sub(1, 1) ~= '/' then target = dir .. '/' .. target end
      return resolve(target, depth + 1)
    end
  end
  if dir == '' then return path end
  local rdir = resolve(dir, depth + 1)
  return (rdir == '/' and '' or rdir) .. '/' .. name
end

local function path_rule(path)
  if path == '' then return nil end
  local got = judged[path]
  if got ~= nil then return got or nil end
  rules = rules or require('local_copilot.privacy_rules')
  got = match(path)
  if not got then
    local real = resolve(path)
    local why = real ~= path and match(real)
    if why then got = 'resolves to ' .. real .. ': ' .. why end
  end
  judged[path] = got or false
  return got or nil
end

-- Whether `s` is valid UTF-8; a sequence cut off at its end passes when `cut` (the file goes on).
local function valid_utf8(s, cut)
  if not s:find('[\128-\255]') then return true end
  local byte, i, n = string.byte, 1, #s
  while i <= n do
    local c = byte(s, i)
    if c < 0x80 then
      i = i + 1
    else
      local len = (c >= 0xC2 and c <= 0xDF and 2) or (c >= 0xE0 and c <= 0xEF and 3) or (c >= 0xF0 and c <= 0xF4 and 4)
      if not len then return false end
      for k = i + 1, math.min(i + len - 1, n) do
        local b = byte(s, k)
        if b < 0x80 or b > 0xBF then return false end
      end
      if i + len - 1 > n then return cut end
      -- overlong forms, UTF-16 surrogates and code points past U+10FFFF
      local b = byte(s, i + 1)
      if (c == 0xE0 and b < 0xA0) or (c == 0xED and b > 0x9F) or (c == 0xF0 and b < 0x90) or (c == 0xF4 and b > 0x8F) then
        return false
      end
      i = i + len
    end
  end
  return true
end

-- Whether `s` is valid text in `enc`. vim.iconv() writes '?' for what it cannot convert (it
-- never fails), so a '?' more than the bytes had is an invalid sequence; one cut off at the
-- end of what was read (`cut`) is forgiven by trying up to 3 bytes shorter.
local function valid_in(s, enc, cut)
  if enc == 'utf-8' or enc == 'utf8' then return valid_utf8(s, cut) end
  for drop = 0, cut and 3 or 0 do
    local part = s:sub(1, #s - drop)
    local out = vim.iconv(part, enc, 'utf-8')
    if out == nil then return true end -- an encoding iconv does not know: Neovim read it, leave it be
    local _, had = part:gsub('%?', '')
    local _, has = out:gsub('%?', '')
    if has <= had then return true end
  end
  return false
end

-- Why `buf`'s file is binary, by git's rule on its first BINARY_HEAD bytes on disk (Neovim
-- shows a NUL as ^@ and reads invalid text as latin1 or with its bytes kept): a NUL byte
-- (where the encoding is not a wide one, whose text holds NULs), or text not valid in the
-- buffer's encoding. A buffer with no file, or with 'binary' set (opened so on purpose), is
-- not judged here.
local function binary_reason(buf, path)
  if path == '' or buf < 0 or not api.nvim_buf_is_valid(buf) or vim.bo[buf].binary then return nil end
  local s = sessions.get(buf)
  local known = s.binary
  if known and known.path == path then return known.reason or nil end
  local reason = false
  local st = uv.fs_stat(path)
  local f = st and st.type == 'file' and io.open(path, 'rb')
  if f then
    local head = f:read(BINARY_HEAD + 1) or ''
    f:close()
    local cut = #head > BINARY_HEAD
    head = head:sub(1, BINARY_HEAD)
    local enc = vim.bo[buf].fileencoding
    if enc == '' then enc = vim.o.encoding end
    local wide = enc:match('^utf%-?16') or enc:match('^utf%-?32') or enc:match('^ucs%-?[24]')
    if not wide and head:find('\0', 1, true) then
      reason = ('a binary file (a NUL byte in its first %d bytes)'):format(BINARY_HEAD)
    elseif not valid_in(head, enc, cut) then
      reason = ('a binary file (not valid %s)'):format(enc)
    end
  end
  s.binary = { path = path, reason = reason }
  return reason or nil
end

-- Why no text of `buf` (named `path`) may be read and sent, or nil: its path is refused
-- (as named or as it resolves), or its file is binary.
function M.path_reason(buf, path)
  local reason = path_rule(path) or binary_reason(buf, path)
  if reason then return reason end
  local v = verdict_of(buf)
  if v and v.kind == 'path' and v.path == path then return v.reason end
  return nil
end

-- `buf`'s file was written, read or the buffer renamed: where its path resolves, and what
-- the file holds, are judged anew, and by the host too where Lua lets the path through (a
-- refused one stays in Neovim, its name included; Lua sends none of its text anyway).
function M.changed(buf)
  local path = api.nvim_buf_get_name(buf)
  judged[path] = nil
  local s = sessions.peek(buf)
  if s then s.binary = nil end
  require('local_copilot.trigger').forget_facts_of(buf)
  local host = package.loaded['local_copilot.host']
  if host and path ~= '' and not path_rule(path) then host.tell('path_changed', { path = path }) end
end

-- Why the host refuses to send `buf`'s text now, or nil (path or content).
function M.reason(buf, path)
  local reason = M.path_reason(buf, path)
  if reason then return reason end
  local v = verdict_of(buf)
  if v and v.path == path then return v.reason end
  return nil
end

-- The judgements above hold until the file changes: this module watches for it itself, so its
-- caches are right whoever asks first (status() in a statusline, before any completion).
api.nvim_create_autocmd({ 'BufFilePost', 'BufWritePost', 'BufReadPost' }, {
  group = api.nvim_create_augroup('LocalCopilotPrivacy', { clear = true }),
  callback = function(ev) M.changed(ev.buf) end,
  desc = 'local-copilot: judge a written, read or renamed file anew',
})

return M
