-- Neovim config for `make demo`: the plugin from this checkout, its Python host from the
-- project's venv, <Tab> accepting with fallback, and a banner that says what runs.
local env = vim.env
vim.opt.runtimepath:prepend(env.LOCAL_COPILOT_DEMO_REPO)
vim.g.local_copilot_python = env.LOCAL_COPILOT_DEMO_PYTHON
-- $NVIM_RPLUGIN_MANIFEST points Neovim's rplugin loader at the demo's manifest
vim.o.number = true
vim.o.swapfile = false
vim.o.termguicolors = true -- the default colour scheme's grey Comment is a GUI colour

-- 'preset' (Qwen2.5-Coder 1.5B), 'gemma' (Gemma 3 270M base from PyPI, offline) or 'tiny'
local which = env.LOCAL_COPILOT_DEMO_MODEL
local tiny = which == 'tiny'
require('local_copilot').setup({
  backends = { ['llama.cpp'] = {
    url = env.LOCAL_COPILOT_DEMO_URL,
    -- the infill sampler ends a suggestion when the model is unsure; noise always is
    samplers = tiny and { 'top_k', 'top_p', 'temperature' } or nil,
    temperature = tiny and 1.0 or nil, -- noise should at least look varied
  } },
  keymaps = { accept = '<Tab>', dismiss = '<C-]>' },
  n_predict = 48,
})

local what = ({
  tiny = 'tiny offline model: completions are NOISE',
  -- a 270M base model without FIM tokens: it continues the text before the cursor
  gemma = 'Gemma 3 270M base (offline), so small: often wrong',
})[which] or 'Qwen2.5-Coder 1.5B'
-- short enough for a 100-column terminal
vim.o.winbar = ' demo: ' .. what .. ' | <Tab> accept, <C-]> dismiss, :qa! quit'
