"""The exception tree drawn in errors.py's docstring is the one its classes make."""

from __future__ import annotations

import re

from local_copilot import errors


def _drawn() -> dict[str, str | None]:
    """Each name of the drawing (the docstring's first indented block) and the name it hangs
    under, None for the root; a name's column is its depth."""
    lines = (errors.__doc__ or "").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("    ") and line.strip())
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in lines[start:]:
        if not line.strip():
            break
        found = re.match(r"[\s│├└─]*", line)
        assert found is not None
        column, name = found.end(), line[found.end():].split()[0]
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((column, name))
    return parents


def test_the_drawing_is_the_class_tree() -> None:
    classes = {name: obj for name, obj in vars(errors).items()
               if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == errors.__name__}
    drawn = _drawn()
    assert set(drawn) == set(classes)
    assert [name for name, parent in drawn.items() if parent is None] == ["LocalCopilotError"]
    for name, parent in drawn.items():
        if parent is not None:
            assert classes[name].__bases__[0] is classes[parent], name
    assert sorted(errors.__all__) == sorted(classes)
