-- Definitions from the buffer's language servers: for the call the cursor is in (`name(` …)
-- and the few nearest names before the cursor, ask the attached clients that
-- answer textDocument/definition, read each definition's header and short body (from its
-- buffer when loaded, else from disk) or, where the file cannot be read, the server's hover
-- text, and send them to the host, one message per buffer; the keys that follow carry them
-- (python/local_copilot/prompt/definitions.py). The definitions found stay, in the order they
-- were found (the newest last, at most KEEP), while the cursor moves on: they come first in the
-- prompt, so the fewer times they change, the more of the server's prompt cache stays. Nothing here waits: a slow server's answer is
-- used when it arrives, and a request older than TIMEOUT_MS is given up so a later key may
-- ask again. A definition in a file the privacy rules refuse is not read (the host judges
-- what is read, its text too).
local api = vim.api
local uv = vim.uv or vim.loop
local sessions = require('local_copilot.sessions')

local M = {}

M.NAMES = 3 -- names asked about per key: the call's, then the nearest before the cursor
M.BODY_LINES = 12 -- a definition's lines sent: its header and the start of its body
M.MAX_BYTES = 512 * 1024 -- a file larger than this on disk is not read
M.TIMEOUT_MS = 1500 -- a request unanswered this long is given up
M.RECHECK_MS = 3000 -- a name's definition is asked again after this long
M.LINES_BEFORE = 3 -- lines above the cursor's searched for names
M.KEEP = 6 -- definitions kept per buffer

-- Per buffer, its session's `definitions` (sessions.lua): { pending = { cancel fns } | nil,
--   since = ms, found = { name -> { at, item | false } }, kept = { { name, item }, ... } oldest
--   first, sent = string, key, names }
local function state_of(buf)
  local s = sessions.peek(buf)
  return s and s.definitions
end

local KEYWORDS = {}
for w in ([[and or not if then else elif elseif end for while do in is return def class function local
  import from as with try except finally raise lambda pass break continue yield await async nil None True False
  true false self this new const let var fn pub use mod struct enum impl match case switch default static
  public private protected void int float str bool char long double unsigned typeof instanceof]]):gmatch('%S+') do
  KEYWORDS[w] = true
end

local function now() return uv.now() end

-- The names near byte column `col` (0-based) of `line`, with the previous lines `above` (nearest
-- last): the call the cursor is in, then the nearest names before it, the one being typed at the
-- cursor left out (a part of a name has no definition, and asking on each letter costs a
-- question per key). Each as { name, row offset (0 = this line, -1 the one above, ...), byte
-- column }.
function M.names(line, col, above)
  local out, seen = {}, {}
  local function add(name, drow, c)
    if #out < M.NAMES and name and not seen[name] and not KEYWORDS[name] and not name:match('^%d') then
      seen[name] = true
      out[#out + 1] = { name, drow, c }
    end
  end
  local before = line:sub(1, col)
  -- the call the cursor is in: the name before the innermost unclosed `(`
  local depth = 0
  for i = #before, 1, -1 do
    local ch = before:sub(i, i)
    if ch == ')' then depth = depth + 1
    elseif ch == '(' then
      if depth == 0 then
        local s, e = before:sub(1, i - 1):find('[%a_][%w_]*%s*$')
        if s then add(before:sub(s, e):match('^[%a_][%w_]*'), 0, s - 1) end
        break
      end
      depth = depth - 1
    end
  end
  -- the nearest names before it, on this line and the few above
  local typing = before:find('[%a_][%w_]*$')
  if typing then before = before:sub(1, typing - 1) end
  local rows = { before }
  for i = #(above or {}), math.max(1, #(above or {}) - M.LINES_BEFORE + 1), -1 do rows[#rows + 1] = above[i] end
  for k, text in ipairs(rows) do
    local found = {}
    for p, w in text:gmatch('()([%a_][%w_]*)') do found[#found + 1] = { w, p - 1 } end
    for i = #found, 1, -1 do add(found[i][1], 1 - k, found[i][2]) end
    if #out >= M.NAMES then break end
  end
  return out
end

local function indent_of(s) return #s:match('^%s*') end

-- The definition starting at 0-based `row` of `lines` (the whole file or its first lines): its
-- decorators, its header and the start of its body, cut where the indentation comes back to
-- the header's, at most BODY_LINES lines.
function M.extract(lines, row)
  local first = lines[row + 1]
  if not first or not first:match('%S') then return nil end
  local ind = indent_of(first)
  local top = row + 1
  while top > 1 and lines[top - 1]:match('^%s*@') and indent_of(lines[top - 1]) == ind do top = top - 1 end
  local out = {}
  for i = top, row + 1 do out[#out + 1] = lines[i] end
  local i, cut = row + 2, false
  while lines[i] do
    local l = lines[i]
    if l:match('%S') and indent_of(l) <= ind then
      -- a closing bracket or `end` at the header's indentation ends the definition
      if l:match('^%s*[%)%]}]') or l:match('^%s*end%f[%W]') then out[#out + 1] = l end
      break
    end
    if #out >= M.BODY_LINES then cut = true break end
    out[#out + 1] = l
    i = i + 1
  end
  while #out > 1 and not out[#out]:match('%S') do out[#out] = nil end
  if cut then out[#out + 1] = string.rep(' ', ind + 4) .. '...' end
  return table.concat(out, '\n')
end

local function refused(path)
  local privacy = require('local_copilot.privacy')
  local b = vim.fn.bufnr(path)
  return privacy.path_reason(b > 0 and b or -1, path) ~= nil
end

-- The lines of `path` up to 0-based `row` and the body after it: its buffer's when loaded,
-- else the file's (at most MAX_BYTES); nil when neither can be read.
local function lines_of(path, row)
  local b = vim.fn.bufnr(path)
  local want = row + M.BODY_LINES + 2
  if b > 0 and api.nvim_buf_is_loaded(b) then return api.nvim_buf_get_lines(b, 0, want, false) end
  local st = uv.fs_stat(path)
  if not st or st.type ~= 'file' or st.size > M.MAX_BYTES then return nil end
  local ok, lines = pcall(vim.fn.readfile, path, '', want)
  if not ok then return nil end
  -- (readfile() gives a NUL byte as a newline: a binary file is no definition's text)
  for _, l in ipairs(lines) do if l:find('\n', 1, true) then return nil end end
  return lines
end

local function hover_text(result)
  local c = result and result.contents
  if type(c) == 'table' and c.value then c = c.value end
  if type(c) == 'table' then c = (c[1] and (c[1].value or c[1])) or nil end
  if type(c) ~= 'string' or c == '' then return nil end
  local lines = {}
  for l in (c .. '\n'):gmatch('(.-)\n') do
    -- (markdown's code fences and rules are not the definition's text)
    if not l:match('^```') and not l:match('^%-%-%-+%s*$') and #lines < M.BODY_LINES then lines[#lines + 1] = l end
  end
  local text = table.concat(lines, '\n'):gsub('%s+$', '')
  return text ~= '' and text or nil
end

local function send(buf)
  local s = state_of(buf)
  if not s or not api.nvim_buf_is_valid(buf) then return end
  local items, seen, keys = {}, {}, {}
  for _, k in ipairs(s.kept) do
    local key = k.item.path .. '\0' .. k.item.text
    if not seen[key] then
      seen[key] = true
      items[#items + 1] = k.item
      keys[#keys + 1] = key
    end
  end
  local sig = table.concat(keys, '\1') -- (what was sent last: the same is not sent again)
  if sig == s.sent then return end
  s.sent = sig
  require('local_copilot.host').tell('definitions', { buf = buf, path = api.nvim_buf_get_name(buf), items = items })
end

local function location_of(result)
  if type(result) ~= 'table' then return nil end
  local loc = result.uri or result.targetUri and result or result[1]
  if type(loc) ~= 'table' then return nil end
  local uri = loc.uri or loc.targetUri
  local range = loc.targetRange or loc.range
  if not uri or not range then return nil end
  return uri, range.start.line
end

-- Ask `client` where `name` (at `pos` of `buf`) is defined; `done(item or false)` once.
local function ask(client, buf, pos, done)
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = pos }
  -- where the definition's file cannot be read (too large, not on disk): what the server says of it
  local function hover(path)
    if not client:supports_method('textDocument/hover', buf) then return done(false) end
    local ok, id = client:request('textDocument/hover', params, function(err, result)
      local text = not err and hover_text(result)
      done(text and { path = path, text = text } or false)
    end, buf)
    if not ok then done(false) end
    return ok and id or nil
  end
  local hover_id
  local ok, id = client:request('textDocument/definition', params, function(err, result)
    local uri, row = location_of(not err and result or nil)
    if not uri then return done(false) end
    local path = vim.uri_to_fname(uri)
    if path == api.nvim_buf_get_name(buf) then
      -- one in the buffer's own file: the window around the cursor holds it when near
      local ctx = require('local_copilot.config').get('context')
      if row >= pos.line - ctx.lines_before and row <= pos.line + ctx.lines_after then return done(false) end
    end
    if refused(path) then return done(false) end
    local lines = lines_of(path, row)
    local text = lines and M.extract(lines, row)
    if text then return done({ path = path, text = text }) end
    hover_id = hover(path)
  end, buf)
  if not ok then done(false) end
  return function()
    if ok and id then pcall(client.cancel_request, client, id) end
    if hover_id then pcall(client.cancel_request, client, hover_id) end
  end
end

-- `name`'s definition is `item` now (false: none): a kept one changes in its place, a new one
-- goes last, the oldest leaving past KEEP.
function M._keep(s, name, item)
  for i, k in ipairs(s.kept) do
    if k.name == name then
      if item then k.item = item else table.remove(s.kept, i) end
      return
    end
  end
  if not item then return end
  s.kept[#s.kept + 1] = { name = name, item = item }
  if #s.kept > M.KEEP then table.remove(s.kept, 1) end
end

-- TextChangedI/InsertEnter: ask about the names near the cursor that are not known yet.
function M.on_change(ev)
  local buf = ev and ev.buf or api.nvim_get_current_buf()
  -- no language server has run in this Neovim: nothing to ask (and vim.lsp is not loaded for it)
  if not package.loaded['vim.lsp'] then return end
  local config = require('local_copilot.config')
  local ctx = config.get('context')
  if not ctx.lsp or ctx.extra_tokens == 0 then return end
  local host = require('local_copilot.host')
  if not host.running() then return end
  local s = state_of(buf)
  local t = now()
  if s and s.pending then
    if t - s.since < M.TIMEOUT_MS then return end -- the answers still arriving are for this key's too
    for _, cancel in ipairs(s.pending) do cancel() end
    s.pending = nil
  end
  local clients = vim.lsp.get_clients({ bufnr = buf, method = 'textDocument/definition' })
  if #clients == 0 or not require('local_copilot.trigger').buf_enabled(buf) then return end
  if not s then
    s = { found = {}, kept = {}, sent = nil }
    sessions.get(buf).definitions = s
  end
  local cur = api.nvim_win_get_cursor(0)
  local row, col = cur[1] - 1, cur[2]
  local line = api.nvim_get_current_line()
  -- typing a name changes none of the names asked about: they are found again only when the
  -- text before the name being typed changed
  local key = row .. '\0' .. line:sub(1, col):gsub('[%a_][%w_]*$', '')
  local lines = {}
  if key ~= s.key or not s.names then
    lines = api.nvim_buf_get_lines(buf, math.max(0, row - M.LINES_BEFORE), row, false)
    s.key, s.names = key, M.names(line, col, lines)
  end
  local names = s.names
  local asks = {}
  for _, n in ipairs(names) do
    local f = s.found[n[1]]
    if not f or t - f.at >= M.RECHECK_MS then asks[#asks + 1] = n end
  end
  if #asks == 0 then return end
  if #lines == 0 and row > 0 then lines = api.nvim_buf_get_lines(buf, math.max(0, row - M.LINES_BEFORE), row, false) end
  if vim.tbl_count(s.found) > 64 then -- names long left behind
    local keep = {}
    for _, n in ipairs(names) do keep[n[1]] = s.found[n[1]] end
    for _, k in ipairs(s.kept) do keep[k.name] = s.found[k.name] end
    s.found = keep
  end
  local pending, left = {}, 0
  s.pending, s.since = pending, t
  for _, n in ipairs(asks) do
    local r = row + n[2]
    local text = r == row and line or lines[#lines + n[2] + 1]
    for _, client in ipairs(clients) do
      local char = n[3]
      local ok, c = pcall(vim.str_utfindex, text, client.offset_encoding or 'utf-16', n[3], false)
      if ok and c then char = c end
      left = left + 1
      local answered = false
      pending[#pending + 1] = ask(client, buf, { line = r, character = char }, function(item)
        if answered then return end
        answered = true
        local old = s.found[n[1]]
        -- one client's answer is enough; a later client's nothing does not undo it
        if item or not (old and old.item and old.at >= t) then
          s.found[n[1]] = { at = t, item = item }
          M._keep(s, n[1], item)
        end
        left = left - 1
        if left == 0 and s.pending == pending then s.pending = nil end
        if api.nvim_buf_is_valid(buf) then send(buf) end
      end)
    end
  end
end

-- What is known and asked for `buf` (0: the current one), for tests.
function M._state(buf)
  if buf == 0 then buf = api.nvim_get_current_buf() end
  return state_of(buf) or {}
end

-- The buffer was wiped: the requests still out for it are cancelled.
sessions.on_forget('definitions', function(_, session)
  local s = session and session.definitions
  if s and s.pending then for _, cancel in ipairs(s.pending) do cancel() end end
end)

return M
