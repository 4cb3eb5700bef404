-- The in-process language server (`setup({ lsp = true })`): completion menus (blink.cmp's
-- `lsp` source, nvim-cmp's cmp-nvim-lsp, vim.lsp.completion) and Neovim 0.12's
-- vim.lsp.inline_completion see the suggestions as the items of an LSP client named
-- 'local_copilot'. No process is started: `cmd` is a function, and the requests go to the
-- running Python host, which answers them through the same pipeline as ghost text (the same
-- privacy policy, context sizing, post-processing, and the same cached generation for a place
-- ghost text already asked about). Answers come back as `lsp_answer` updates (updates.lua).
local api = vim.api
local config = require('local_copilot.config')
local sessions = require('local_copilot.sessions')

local M = {}

M.NAME = 'local_copilot'

local state = {
  next_id = 0,
  ---@type table<integer, { callback: fun(err: any, result: any), done?: fun(id: integer), buf: integer }>
  pending = {},
  group = nil, ---@type integer?
}

local CAPABILITIES = {
  -- byte columns: the snapshot's own unit, so nothing is converted on either side
  positionEncoding = 'utf-8',
  textDocumentSync = { openClose = false, change = 0 },
  -- where vim.lsp.completion's autotrigger (and the menus) open the menu by themselves: where
  -- code goes on after a word, as minuet-ai's server declares (python/local_copilot/lsp/items.py)
  completionProvider = { triggerCharacters = { '@', '.', '(', '[', ':', ' ' }, resolveProvider = false },
  inlineCompletionProvider = true,
}

-- The buffer of a textDocument param.
local function buffer_of(params)
  local uri = params and params.textDocument and params.textDocument.uri
  if not uri then return nil end
  local buf = vim.uri_to_bufnr(uri)
  return api.nvim_buf_is_loaded(buf) and buf or nil
end

-- The snapshot the host answers for: the window around `position` of `buf`, as the ghost-text
-- path sends it whole (trigger.lua), with the position as the cursor.
local function snapshot(buf, position)
  local ctx = config.get('context')
  local n = api.nvim_buf_line_count(buf)
  local row = math.min(position.line, n - 1)
  local first = math.max(0, row - ctx.lines_before)
  local last = math.min(n, row + 1 + ctx.lines_after)
  local bo = vim.bo[buf]
  return {
    buf = buf, tick = api.nvim_buf_get_changedtick(buf), row = row, col = position.character,
    first = first, lines = api.nvim_buf_get_lines(buf, first, last, false), nlines = n,
    ft = bo.filetype, path = api.nvim_buf_get_name(buf), et = bo.expandtab, sw = bo.shiftwidth, ts = bo.tabstop,
  }
end

-- An LSP request of the client: the ones the host answers go there; `initialize` and
-- `shutdown` are answered here.
local function request(method, params, callback, notify_reply_callback)
  state.next_id = state.next_id + 1
  local id = state.next_id
  local function reply(err, result)
    vim.schedule(function()
      callback(err, result)
      if notify_reply_callback then notify_reply_callback(id) end
    end)
  end
  if method == 'initialize' then
    reply(nil, { capabilities = CAPABILITIES, serverInfo = { name = M.NAME } })
  elseif method == 'textDocument/completion' or method == 'textDocument/inlineCompletion' then
    local buf = buffer_of(params)
    -- off here (a private file, a filetype turned off, the plugin disabled): nothing is sent
    if not buf or not require('local_copilot.trigger').buf_enabled(buf) then
      reply(nil, method == 'textDocument/completion' and { isIncomplete = true, items = {} } or { items = {} })
      return true, id
    end
    local line = api.nvim_buf_get_lines(buf, params.position.line, params.position.line + 1, false)[1] or ''
    local kind = params.context and params.context.triggerKind
    state.pending[id] = { callback = callback, done = notify_reply_callback, buf = buf }
    local sent = require('local_copilot.host').lsp({
      id = id,
      method = method == 'textDocument/completion' and 'completion' or 'inline',
      -- Invoked (1 in both kinds): the user asked, alternatives too
      invoked = kind == 1,
      line = params.position.line, character = params.position.character,
      indent = line:match('^%s*'),
      snapshot = snapshot(buf, params.position),
    })
    if not sent then M.answer(id, nil) end
  else
    reply(nil, nil) -- shutdown, and what this server does not offer
  end
  return true, id
end

local function notify(method, params)
  if method == '$/cancelRequest' and params and state.pending[params.id] then
    require('local_copilot.host').lsp({ cancel = params.id })
  end
  return true
end

-- `buf` was wiped: its requests are cancelled (the host closes their streams and answers them
-- with nothing). Said on the requests' own channel, so it reaches the host after them; the
-- host's `forget` of the buffer also cancels them, but comes on another channel.
local function cancel_buffer(buf)
  for id, p in pairs(state.pending) do
    if p.buf == buf then require('local_copilot.host').lsp({ cancel = id }) end
  end
end
sessions.on_forget('lsp', cancel_buffer)

-- The host's answer to request `id` (updates.lua); nil: nothing to offer.
function M.answer(id, result)
  local p = state.pending[id]
  if not p then return end
  state.pending[id] = nil
  if result == vim.NIL then result = nil end
  p.callback(nil, result)
  if p.done then p.done(id) end
end

local function cmd(_dispatchers)
  local closing = false
  return {
    request = request,
    notify = notify,
    is_closing = function() return closing end,
    terminate = function() closing = true end,
  }
end

-- Start (or reuse) the client for `buf` where the plugin may complete.
function M.attach(buf)
  buf = buf or api.nvim_get_current_buf()
  if vim.bo[buf].buftype ~= '' or not config.get('lsp') then return nil end
  return vim.lsp.start({ name = M.NAME, cmd = cmd, root_dir = vim.fn.getcwd() }, { bufnr = buf })
end

-- The client's id, when it is running.
function M.client_id()
  local c = vim.lsp.get_clients({ name = M.NAME })[1]
  return c and c.id or nil
end

-- setup(): on with `lsp = true`, off (the client stopped) otherwise.
function M.setup()
  if not config.get('lsp') then
    if state.group then
      api.nvim_del_augroup_by_id(state.group)
      state.group = nil
    end
    for _, c in ipairs(vim.lsp.get_clients({ name = M.NAME })) do c:stop(true) end
    return
  end
  state.group = api.nvim_create_augroup('LocalCopilotLsp', { clear = true })
  api.nvim_create_autocmd({ 'BufEnter', 'FileType' }, { group = state.group, desc = 'local-copilot: completion items',
    callback = function(ev) M.attach(ev.buf) end })
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) then M.attach(buf) end
  end
end

return M
