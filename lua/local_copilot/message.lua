-- The plugin's messages to the user. Neovim's own vim.notify echoes the text as given, and a
-- message wider than the command line, or of several lines, stops the editor at a hit-enter
-- prompt until the user presses Enter. With it, a message becomes one line that fits
-- (v:echospace, read when it is shown: the window may have shrunk); the host's log keeps the
-- whole text of the host's messages (:LocalCopilot log opens it), :LocalCopilot status that of
-- the last few others (about the host itself, or the editor's side). A replacement of
-- vim.notify (nvim-notify, noice) shows long text without blocking and gets the text whole.
local M = {}

-- Ends a clipped message whose whole text is in the host's log. One whose whole text only
-- this module keeps (the host may be what is down) ends with '…', which leaves more of the
-- message on screen (the help names :LocalCopilot status).
local IN_LOG = '… (:LocalCopilot log)'
-- the whole text of the last clipped messages that are not in the log, oldest first
local kept = {}
local MAX_KEPT = 5

-- The whole text of the last messages clipped that the log does not hold (:LocalCopilot status).
function M.kept() return vim.deepcopy(kept) end

-- Whether vim.notify is Neovim's own (runtime/lua/vim/_editor.lua), not a plugin's.
function M.builtin()
  local info = debug.getinfo(vim.notify, 'S')
  return info ~= nil and info.source:match('vim/_editor%.lua$') ~= nil
end

-- `msg` as one line at most `room` cells wide, and whether it was cut; a cut one ends with
-- `tail` where that leaves room for 40 cells of the message, else with '…'.
function M.fit(msg, room, tail)
  local line = vim.trim(msg):gsub('%s*\n%s*', ' ')
  local width = vim.fn.strdisplaywidth
  if width(line) <= room then return line, false end
  if room - width(tail) < 40 then tail = '…' end
  local keep = math.max(0, room - width(tail))
  local cut = vim.fn.strcharpart(line, 0, keep)
  while cut ~= '' and width(cut) > keep do cut = vim.fn.strcharpart(cut, 0, vim.fn.strchars(cut) - 1) end
  return cut .. tail, true
end

-- Show `msg` at `level` (a vim.log.levels name or number). `in_log`: the host logged the
-- whole text, so a clipped line says where to read it. Without a UI (a headless or embedded
-- Neovim) there is no command line to fit nor any prompt, and the text goes whole.
function M.show(msg, level, in_log)
  if type(level) ~= 'number' then
    level = vim.log.levels[(level or 'warn'):upper()] or vim.log.levels.WARN
  end
  if vim.in_fast_event() then return vim.schedule(function() M.show(msg, level, in_log) end) end
  if M.builtin() and #vim.api.nvim_list_uis() > 0 then
    local whole, cut = msg, nil
    msg, cut = M.fit(msg, math.max(vim.v.echospace, 1), in_log and IN_LOG or '…')
    if cut and not in_log then
      kept[#kept + 1] = whole
      if #kept > MAX_KEPT then table.remove(kept, 1) end
    end
  end
  if level >= vim.log.levels.ERROR and M.builtin() then
    -- Neovim's own vim.notify gives an error as an error message, and an error message still
    -- on screen when the mode message is drawn holds the editor ~1 s (emsg_on_display): a
    -- failure told while the user types in Insert mode would stop the typing. The same text
    -- in the error highlight, kept in :messages, is not an error message.
    vim.api.nvim_echo({ { msg, 'ErrorMsg' } }, true, {})
    return
  end
  vim.notify(msg, level, { title = 'local-copilot' })
end

return M
