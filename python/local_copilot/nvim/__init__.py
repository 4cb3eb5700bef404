"""The Neovim adapter: the only code that imports pynvim."""
