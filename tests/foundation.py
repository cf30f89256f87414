"""The foundation workload (``fixtures/make_foundation.py``: its graph, its runs and what a reader of
its database must see), loaded once for the tests of the fixture databases made with it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def _load():
    spec = importlib.util.spec_from_file_location("make_foundation", FIXTURES / "make_foundation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_foundation"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


FX = _load()
