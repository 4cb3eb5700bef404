-- Code drawn as virtual text in its filetype's syntax highlighting (Tree-sitter, where the
-- filetype has a parser and a highlights query), over a highlight group of the caller's: next
-- edits' inserted text (next_edit.lua), instruction edits' added lines (edit.lua).
-- Also how text with tabs is drawn as virtual text (ghost text too).
local M = {}

-- Per line of `lines` (1-based), the highlight group of each 0-based byte column (nil where
-- none); nil when Tree-sitter cannot highlight `ft`.
function M.groups(lines, ft)
  local lang = ft ~= '' and vim.treesitter.language.get_lang(ft) or nil
  if not lang then return nil end
  local text = table.concat(lines, '\n')
  local ok, parser = pcall(vim.treesitter.get_string_parser, text, lang)
  if not ok or not parser then return nil end
  local query_ok, query = pcall(vim.treesitter.query.get, lang, 'highlights')
  if not query_ok or not query then return nil end
  local tree_ok, trees = pcall(parser.parse, parser)
  if not tree_ok or not trees or not trees[1] then return nil end
  local groups = {}
  for i = 1, #lines do groups[i] = {} end
  for id, node in query:iter_captures(trees[1]:root(), text, 0, #lines) do
    local name = query.captures[id]
    -- captures starting with '_' are the query's own; spell ones are no colour
    if name and not name:find('^_') and name ~= 'spell' and name ~= 'nospell' then
      local sr, sc, er, ec = node:range()
      for r = sr, er do
        local g = groups[r + 1]
        if g then
          local from = r == sr and sc or 0
          local to = r == er and ec or #lines[r + 1]
          for c = from, to - 1 do g[c] = '@' .. name .. '.' .. lang end
        end
      end
    end
  end
  return groups
end

-- `line` as virtual-text chunks: each run of one group as { text, { base, group } }, text
-- without a group as { text, base }. `cols`: the line's entry of M.groups(), or nil.
function M.chunks(line, cols, base)
  if line == '' or not cols then return { { line, base } } end
  local out, from, cur = {}, 0, cols[0]
  for c = 1, #line do
    local g = cols[c]
    if c == #line or g ~= cur then
      out[#out + 1] = { line:sub(from + 1, c), cur and { base, cur } or base }
      from, cur = c, g
    end
  end
  return out
end

-- `text` with its tabs as the spaces the buffer would show from display column `start_col`
-- (virt_text draws a tab as one cell).
function M.expand_tabs(text, start_col, ts)
  if not text:find('\t', 1, true) then return text end
  local out, col = {}, start_col
  for piece, tab in text:gmatch('([^\t]*)(\t?)') do
    if piece == '' and tab == '' then break end
    out[#out + 1] = piece
    col = col + vim.fn.strdisplaywidth(piece)
    if tab ~= '' then
      local pad = ts - (col % ts)
      out[#out + 1] = string.rep(' ', pad)
      col = col + pad
    end
  end
  return table.concat(out)
end

return M
