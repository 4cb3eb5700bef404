"""Model servers: launch recipes (recipes.py), finding their programs (programs.py), GPU sizing
(memory.py), the `auto` choice (auto.py) and supervision shared by every Neovim on the machine
(supervisor.py, janitor.py)."""
