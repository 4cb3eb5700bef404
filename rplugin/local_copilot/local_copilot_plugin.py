# Thin entry for the plugin's own remote-plugin host (host type local_copilot, run by the
# plugin's own python: lua/local_copilot/python.lua). Its name differs from the package's on purpose:
# pynvim appends this folder to the END of sys.path and imports the entry by name, so a file
# called local_copilot.py would be shadowed by an installed `local_copilot` package.
import os
import sys

_python_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
if _python_dir not in sys.path:
    sys.path.insert(0, os.path.normpath(_python_dir))

from local_copilot.nvim.plugin import LocalCopilotPlugin  # noqa: E402

__all__ = ["LocalCopilotPlugin"]
