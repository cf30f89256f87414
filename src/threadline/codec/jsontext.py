"""JSON as threadline stores it (checkpoint documents, metadata, records): one encoder, so that the
text a put stores and the text a checksum covers (``codec.seal``) are the same bytes."""

from __future__ import annotations

import json
import re
from typing import Any

_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # \u0000 after an even number of backslashes


def dumps_json(obj: Any, *, sort_keys: bool = True) -> str:
    """JSON as stored: compact, UTF-8 kept, sorted keys unless ``sort_keys=False`` (metadata
    keeps its own key order, which the official SQLite saver's object filters compare).

    Raises ValueError for what a JSON column cannot hold on every backend: NaN or
    Infinity, NUL characters (Postgres JSONB refuses them) and unpaired surrogates (not UTF-8).
    """
    text = json.dumps(obj, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if "\\u0000" in text and _NUL.search(text):  # an escaped NUL, not the text "\\u0000" (an escaped backslash)
        raise ValueError("NUL character in a JSON value")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("unpaired surrogate character in a JSON value (not UTF-8)") from None
    return text
