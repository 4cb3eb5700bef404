"""The bench's chart: grouped bars of generated tokens/s per concurrency level, drawn with
matplotlib. matplotlib is an optional extra (`pip install '.[bench]'`): without it the bench
still writes its JSON and its text table, and says how to get the chart."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["CHART_EXTRA_HINT", "chart_missing", "bar_chart"]

# How to add the extra to the plugin's own .venv (the build's), from the plugin's folder.
CHART_EXTRA_HINT = "in the plugin's folder, .venv/bin/python -m pip install '.[bench]'"


def chart_missing() -> str | None:
    """Why no chart can be drawn (matplotlib is not installed), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed"
    return None


def bar_chart(path: Path, groups: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], *,
              title: str, x_label: str, y_label: str) -> None:
    """Write a PNG to `path`: one group of bars per x value (`groups`), one bar per series (a
    backend), each bar labelled with its value."""
    import matplotlib

    matplotlib.use("Agg")  # no display: the file is the output
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.8, 5.0), dpi=100)
    try:
        n = max(len(series), 1)
        width = 0.8 / n
        for i, (name, values) in enumerate(series):
            xs = [g + (i - (n - 1) / 2) * width for g, v in enumerate(values) if v is not None]
            ys = [v for v in values if v is not None]
            bars = ax.bar(xs, ys, width * 0.95, label=name)
            ax.bar_label(bars, labels=[f"{v:,.1f}" if v < 100 else f"{v:,.0f}" for v in ys], fontsize=8, padding=2)
        ax.set_xticks(range(len(groups)), list(groups))
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.set_title(title)
        ax.grid(axis="y", color="#e1e1e1")
        ax.set_axisbelow(True)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
