-- Main-thread cost of recording edits for next edits (lua/local_copilot/edit_recorder.lua), per change:
-- the same N one-character edits on a 5,000-line buffer timed with the recorder attached and
-- without it; the difference per change is the recorder's cost. Also the cost of taking the
-- records (done once per next-edit request, not per change).
-- Run: nvim --clean --headless --cmd 'set rtp^=.' -l bench/next_edit_recorder.lua
-- (bench/run.py runs it for `make bench`; RECORDER_JSON=1 makes the last line JSON for it)
local api = vim.api
local recorder = require('local_copilot.edit_recorder')
local N, ROUNDS = 20000, 7

local function buffer()
  local buf = api.nvim_create_buf(true, false)
  local lines = {}
  for i = 1, 5000 do lines[i] = ('    value_%d = compute(value_%d, %d)  # line'):format(i, i - 1, i) end
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  return buf
end

-- N edits as typing makes them: a character inserted on row r, moving down now and then;
-- JUMPY=1: every change far from the one before (a macro or :g over the file), the worst case
local jumpy = os.getenv('JUMPY') == '1'
local function type_into(buf)
  local t0 = vim.uv.hrtime()
  for i = 1, N do
    local row = jumpy and (i % 2 == 0 and 100 or 4000) or 2000 + math.floor(i / 200)
    api.nvim_buf_set_text(buf, row, 4, row, 4, { 'x' })
  end
  return (vim.uv.hrtime() - t0) / 1e6
end

local plain, recorded, takes = {}, {}, {}
for _ = 1, ROUNDS do
  local a = buffer()
  plain[#plain + 1] = type_into(a)
  api.nvim_buf_delete(a, { force = true })
  local b = buffer()
  recorder.attach(b)
  recorded[#recorded + 1] = type_into(b)
  local t0 = vim.uv.hrtime()
  local recs = recorder.take()
  takes[#takes + 1] = (vim.uv.hrtime() - t0) / 1e6
  assert(#recs >= 1)
  recorder.detach(b)
  api.nvim_buf_delete(b, { force = true })
end
table.sort(plain); table.sort(recorded); table.sort(takes)
local mid = math.floor(ROUNDS / 2) + 1
local per = (recorded[mid] - plain[mid]) / N
print(('edits without recorder: %.2f ms per %d changes (median of %d rounds)'):format(plain[mid], N, ROUNDS))
print(('edits with recorder:    %.2f ms per %d changes'):format(recorded[mid], N))
print(('recorder main-thread cost per change: %.2f µs (budget 50 µs)'):format(per * 1000))
print(('take() at a request (%d changes pending): %.3f ms (median)'):format(N, takes[mid]))
if os.getenv('RECORDER_JSON') == '1' then
  print(vim.json.encode({ changes = N, rounds = ROUNDS, jumpy = jumpy, without_ms = plain[mid], with_ms = recorded[mid],
    per_change_us = per * 1000, take_ms = takes[mid] }))
end
