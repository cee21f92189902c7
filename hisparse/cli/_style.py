"""Whether a command's output gets colour: only on a terminal, and never with NO_COLOR set
(https://no-color.org: any non-empty value)."""
from __future__ import annotations

import os
import sys
from typing import TextIO


def use_colour(stream: TextIO | None = None) -> bool:
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
