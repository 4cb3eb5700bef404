"""The python3 host's packages in :checkhealth and `local-copilot doctor`: the language server's
(pygls, lsprotocol) are checked too, as a warning that names what needs them, and every advice
line installs all the plugin's dependencies (the README's pip line)."""

from __future__ import annotations

import pytest

from local_copilot.health import probes
from local_copilot.health.report import python_section


def test_a_missing_language_server_package_is_a_warning_naming_what_needs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "package_version", lambda dist: None if dist == "pygls" else "9999")
    items = {i.message.split(" ", 1)[0]: i for i in python_section().items}
    assert items["pygls"].level == "warn"
    assert "completion menus (lsp = true) and `local-copilot lsp` need it" in items["pygls"].message
    assert items["pygls"].advice[0].endswith("-m pip install pynvim httpx msgspec platformdirs pygls lsprotocol")
    assert items["lsprotocol"].level == "ok"


def test_a_missing_host_package_is_an_error_whose_advice_installs_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "package_version", lambda dist: None if dist == "msgspec" else "9999")
    items = {i.message.split(" ", 1)[0]: i for i in python_section().items}
    assert items["msgspec"].level == "error"
    assert items["msgspec"].advice[0].endswith("-m pip install pynvim httpx msgspec platformdirs pygls lsprotocol")
