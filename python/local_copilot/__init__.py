"""local-copilot.nvim: ghost-text FIM completion from local model servers (pure-Python core)."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
