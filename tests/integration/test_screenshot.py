"""scripts/screenshot.py draws the README's picture from a real Neovim: the SVG it writes holds
the typed code and, in the suggestion's own colour, the ghost text the plugin drew."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from .nvim_session import REPO

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pictures(nvim_bin: str, llama_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The script run once, as a user runs it: the folder it wrote both pictures to."""
    out = tmp_path_factory.mktemp("pictures")
    spec = importlib.util.spec_from_file_location("screenshot", REPO / "scripts" / "screenshot.py")
    assert spec is not None and spec.loader is not None
    shot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shot)
    assert shot.main(["--out", str(out)]) == 0
    return out


def test_the_picture_shows_the_suggestion_in_its_colour(pictures: Path) -> None:
    svg = (pictures / "ghost-text.svg").read_text()
    texts = {t: fill for fill, t in re.findall(r'<text [^>]*fill="([^"]+)"[^>]*>([^<]*)</text>', svg)}
    assert "def" in texts and "fibonacci" in texts  # the typed code, highlighted
    ghost = [t.strip() for t in texts if t.strip() in ("a, b = 0, 1", "for _ in range(n):", "a, b = b, a + b", "return a")]
    assert len(ghost) == 4, texts
    colours = {texts[t] for t in texts if t.strip() in ghost}
    assert len(colours) == 1 and colours != {texts["def"]}, colours  # one colour, not the code's
    assert "-- INSERT --" in svg


def test_the_menu_picture_shows_the_suggestion_as_an_item(pictures: Path) -> None:
    svg = (pictures / "menu.svg").read_text()
    texts = re.findall(r'<text [^>]*>([^<]*)</text>', svg)
    # the menu's row: the suggestion's first line and the plugin's name as its source, drawn
    # on the menu's own background (a rect), below the line it completes
    [item] = [t for t in texts if "local-copilot" in t]
    assert "a, b = 0, 1" in item
    assert svg.count("<rect") >= 3  # the page, the status line, the menu's row
