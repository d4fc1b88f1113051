"""JSON answers parsed within a budget of values, counted on the bytes before parsing.

A JSON answer costs far more as Python objects than as bytes: 4 MiB of ``[[],[],...]``
is 1.4 M lists (some 110 MB), a tokenize or power answer shaped that way held +133 MB.
Every answer we parse from a server says how many values it may hold; the count is a
C-speed scan of the bytes (brackets and commas inside strings count too, so it errs
high), made before a single object is built.
"""

from __future__ import annotations

from typing import Any

import orjson


class JSONTooLarge(ValueError):
    """An answer holding more values than its budget: refused before parsing. A
    ValueError, as a malformed answer is (callers handle both alike)."""


def json_nodes(data: bytes) -> int:
    """An upper bound of the containers and items parsing ``data`` would make."""
    return data.count(b"{") + data.count(b"[") + data.count(b",")


def loads(data: bytes, max_nodes: int, max_containers: int | None = None) -> Any:
    """``orjson.loads(data)`` if it holds at most ``max_nodes`` containers and items (and
    at most ``max_containers`` objects and arrays), else JSONTooLarge."""
    if json_nodes(data) > max_nodes:
        raise JSONTooLarge(f"JSON answer holds more than {max_nodes} values")
    if max_containers is not None and data.count(b"{") + data.count(b"[") > max_containers:
        raise JSONTooLarge(f"JSON answer holds more than {max_containers} objects and arrays")
    return orjson.loads(data)
