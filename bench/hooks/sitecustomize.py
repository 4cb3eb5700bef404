"""Run at the start of the Python host of `make bench`'s `httpx` profile (this folder is on
its PYTHONPATH): every backend's completion streams go through httpx (httpx_streams.py)
instead of the hand-written client, so the bench measures one against the other.

The package is not imported here: the host puts its checkout's python/ on sys.path later
(rplugin/python3), and an import now could load another copy. Instead, once
local_copilot.backends.base has run, HttpBackend's `streams` becomes a property whose setter
turns the hand-written client every backend creates into httpx streams on the backend's own
httpx client.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

TARGET = "local_copilot.backends.base"


def _install(base: ModuleType) -> None:
    from httpx_streams import HttpxStreams

    def get(self: Any) -> Any:
        return self.__dict__["_bench_streams"]

    def set_(self: Any, client: Any) -> None:
        if isinstance(client, base.StreamClient):
            client.close()
            client = HttpxStreams(self.client)
        self.__dict__["_bench_streams"] = client

    base.HttpBackend.streams = property(get, set_)


class _Loader(importlib.abc.Loader):
    """The module's own loader, and _install() once the module has run."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _install(module)

    def __getattr__(self, name: str) -> Any:  # get_source and the like, for tracebacks
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)  # once is all
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())
