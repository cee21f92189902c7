"""The PyTorch references of the ops, on any device (``hisparse.reference``): the same keyword
signatures as the CUDA ops (``swap_single_step``, ``swap_multi_step``, ``copy_planned``), plus the
invariant checkers. Imported on first use: the kernels' own modules import parts of this package."""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# public name -> submodule of this package that defines it
_EXPORTS = {
    "swap_single_step": "swap_single",
    "swap_multi_step": "swap_multi",
    "copy_planned": "copy_planned",
    "check_single_step": "invariants",
    "check_multi_step": "invariants",
}

__all__ = list(_EXPORTS)


class _Package(types.ModuleType):
    """Exports win over submodules of the same name: importing the submodule ``copy_planned`` sets
    that name on the package to the module, which would hide the function."""

    def __getattribute__(self, name: str) -> Any:
        if name in _EXPORTS:
            return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        return super().__getattribute__(name)

    def __getattr__(self, name: str) -> Any:  # not set yet: a submodule (hisparse.reference.swap_multi)
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            raise AttributeError(f"module 'hisparse.reference' has no attribute {name!r}; it exports "
                                 f"{', '.join(__all__)}") from None

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(__all__))


sys.modules[__name__].__class__ = _Package
