"""The optional frameworks (jax, torch): imported only by the features that use
them, with an ImportError that names the pip extra when one is missing."""

from __future__ import annotations

import importlib


def import_optional(name: str, extra: str, feature: str):
    """``importlib.import_module(name)``; when that fails, an ImportError naming
    ``feature``, the module and ``pip install 'kjit[extra]'``."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise ImportError(f"{feature} needs {name}, which could not be imported ({err}); install it with "
                          f"pip install 'kjit[{extra}]'") from err
