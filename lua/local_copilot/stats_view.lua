-- :LocalCopilot stats: the Python host's counters and latencies (stats.py summary()) in a
-- floating window, one block per backend. q or <Esc> closes it.
local M = {}

local BAR = 24 -- widest histogram bar, in cells

local function num(v) return (type(v) == 'number') and v or 0 end

local function pct(t, p)
  if type(t) ~= 'table' then return 0 end
  return num(t['p' .. p] or t[p])
end

local function fmt_ms(v)
  v = num(v)
  if v >= 1000 then return ('%.2f s'):format(v / 1000) end
  return ('%.1f ms'):format(v)
end

local function histogram(lines, title, hist)
  if type(hist) ~= 'table' or #hist == 0 then return end
  local top, width = 0, 0
  for _, b in ipairs(hist) do
    top = math.max(top, num(b[2]))
    width = math.max(width, #tostring(b[1]))
  end
  lines[#lines + 1] = '  ' .. title
  for _, b in ipairs(hist) do
    local n = num(b[2])
    local len = top > 0 and math.floor(n / top * BAR + 0.5) or 0
    if n > 0 and len == 0 then len = 1 end
    lines[#lines + 1] = ('    %-' .. width .. 's ms  %s %d'):format(b[1], ('█'):rep(len), n)
  end
end

-- The window's text for a summary (pure: tests read it without a window).
function M.lines(summary)
  local lines = {}
  local backends = type(summary) == 'table' and summary.backends or {}
  if type(backends) ~= 'table' then backends = {} end
  local active = summary and summary.active
  local names = vim.tbl_keys(backends)
  table.sort(names, function(a, b)
    if a == active then return true end
    if b == active then return false end
    return a < b
  end)
  if #names == 0 then
    lines[#lines + 1] = 'No completions yet: type in Insert mode, then open this again.'
  end
  for i, name in ipairs(names) do
    local b = backends[name]
    local c = type(b.counters) == 'table' and b.counters or {}
    local acc = type(b.accepts) == 'table' and b.accepts or {}
    if i > 1 then lines[#lines + 1] = '' end
    lines[#lines + 1] = name .. (name == active and ' (active)' or '')
    lines[#lines + 1] = ('  requests %d   cancels %d   errors %d   speculative %d'):format(
      num(c.requests), num(c.cancels), num(c.errors), num(c.speculative))
    lines[#lines + 1] = ('  cache hits %d   typed-through hits %d   quiet %d (then typed %d)   warm-ups %d'):format(
      num(c.cache_hits), num(c.typed_through), num(c.quiet), num(c.quiet_false), num(c.warmups))
    local sz = type(summary.sizing) == 'table' and summary.sizing or nil
    if name == active and sz and num(sz.prompt_tokens_per_s) > 0 then
      local ctx = type(sz.context) == 'table' and sz.context or {}
      lines[#lines + 1] = ('  server speed         %.0f prompt tokens/s   %.0f generated tokens/s'):format(
        num(sz.prompt_tokens_per_s), num(sz.generated_tokens_per_s))
      lines[#lines + 1] = ('  context in use       %d tokens (~%d characters, %d lines above, up to %d below)   target %d ms'):format(
        num(ctx.window_tokens), num(ctx.chars), num(ctx.lines_before), num(ctx.suffix_lines), num(sz.latency_target_ms))
    end
    local accepted = num(acc.full) + num(acc.word) + num(acc.line)
    lines[#lines + 1] = ('  shown %d   accepted %d (full %d, word %d, line %d)   acceptance rate %.0f%%'):format(
      num(c.shown), accepted, num(acc.full), num(acc.word), num(acc.line), num(b.acceptance_rate) * 100)
    if num(b.n) > 0 then
      lines[#lines + 1] = ('  time to first token  p50 %s   p95 %s   p99 %s'):format(
        fmt_ms(pct(b.ttft_ms, 50)), fmt_ms(pct(b.ttft_ms, 95)), fmt_ms(pct(b.ttft_ms, 99)))
      lines[#lines + 1] = ('  total latency        p50 %s   p95 %s   p99 %s'):format(
        fmt_ms(pct(b.total_ms, 50)), fmt_ms(pct(b.total_ms, 95)), fmt_ms(pct(b.total_ms, 99)))
      lines[#lines + 1] = ('  speed                %.0f chars/s (p50, while streaming)   %d completions measured'):format(
        num(b.chars_per_s), num(b.n))
      histogram(lines, 'time to first token', b.ttft_hist)
      histogram(lines, 'total latency', b.total_hist)
    else
      lines[#lines + 1] = '  no completed request measured yet'
    end
  end
  local ne = type(summary) == 'table' and summary.next_edit or nil
  if type(ne) == 'table' and num(ne.requests) > 0 then
    lines[#lines + 1] = ''
    lines[#lines + 1] = 'next edits'
    lines[#lines + 1] = ('  requests %d   shown %d   accepted %d   dismissed %d   quiet %d   failed %d'):format(
      num(ne.requests), num(ne.shown), num(ne.accepted), num(ne.dismissed), num(ne.quiet), num(ne.failed))
    if num(ne.n) > 0 then
      lines[#lines + 1] = ('  latency              p50 %s   p90 %s'):format(
        fmt_ms(pct(ne.latency_ms, 50)), fmt_ms(pct(ne.latency_ms, 90)))
    end
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = 'q or <Esc> closes'
  return lines
end

function M.fetch()
  local lc = require('local_copilot')
  if not lc.registered('LocalCopilotCall') then
    return nil, 'the remote plugin is not registered; run :UpdateRemotePlugins and restart (:checkhealth local_copilot)'
  end
  local summary, why = require('local_copilot.host').call('stats')
  if type(summary) ~= 'table' then
    return nil, (why or 'the python3 host had no answer') .. ' (:checkhealth local_copilot)'
  end
  return summary
end

-- Open the window; returns its buffer and window ids (nil when the host cannot be asked).
function M.open(summary)
  if summary == nil then
    local err
    summary, err = M.fetch()
    if not summary then
      require('local_copilot.message').show('local-copilot: ' .. err, vim.log.levels.WARN, false)
      return nil
    end
  end
  local lines = M.lines(summary)
  local width = 0
  for _, l in ipairs(lines) do width = math.max(width, vim.fn.strdisplaywidth(l)) end
  width = math.min(width + 2, math.max(20, vim.o.columns - 4))
  local height = math.min(#lines, math.max(3, vim.o.lines - 4))
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].filetype = 'local_copilot_stats'
  local win = vim.api.nvim_open_win(buf, true, {
    relative = 'editor',
    row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
    width = width,
    height = height,
    style = 'minimal',
    border = 'rounded',
    title = ' local-copilot stats ',
    title_pos = 'center',
  })
  local close = function()
    if vim.api.nvim_win_is_valid(win) then vim.api.nvim_win_close(win, true) end
  end
  for _, key in ipairs({ 'q', '<Esc>' }) do
    vim.keymap.set('n', key, close, { buffer = buf, nowait = true, desc = 'local-copilot: close stats' })
  end
  return buf, win
end

return M
