"""A workload's JSON schemas resolve inside themselves only: nothing is fetched.

Left to itself, jsonschema resolves a remote ``$ref`` by fetching it with urllib: no egress
policy, redirects followed, no timeout, no size cap, and what came back could surface in
a run's public check detail. We hold it twice. A workload whose schema (or a tool's
parameters) names anything but a local reference ("#...") is refused when it is saved
(Workload.clean) or loaded from probes.yaml (with the line of the reference). And every
check validates with a ``referencing`` registry that retrieves nothing, so a row written
before the rule, or by SQL, fails its check in our words instead of reaching out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# The keywords that point at another schema (2020-12's, 2019-09's recursive one).
REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
REMOTE_REFUSED = "the workload's schema refers outside itself; nothing is fetched"


def remote_refs(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, reference) for each reference in ``value`` that is not local ("#...")."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in REF_KEYWORDS and not (isinstance(item, str) and item.startswith("#")):
                yield (*path, key), item
            else:
                yield from remote_refs(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from remote_refs(item, (*path, index))


def refusal(path: tuple[Any, ...], ref: Any) -> str:
    where = ".".join(str(p) for p in path)
    return f"{where} is {ref!r}: only local references (#...) are allowed; nothing is fetched"


def error(instance: Any, schema: Any) -> str | None:
    """Why ``instance`` fails ``schema`` (our words), or None when it passes."""
    if next(remote_refs(schema), None) is not None:
        return REMOTE_REFUSED
    # Imported where used: the models read the kinds at every start, and only a run's
    # checks need jsonschema (a tenth of a second to import).
    import jsonschema  # noqa: PLC0415
    import referencing  # noqa: PLC0415
    import referencing.exceptions  # noqa: PLC0415

    try:
        # A registry with no retrieval: an unresolved reference fails, it is never fetched.
        jsonschema.validate(instance, schema, registry=referencing.Registry())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"schema: {where}: {exc.message}"
    except jsonschema.SchemaError as exc:
        return f"the workload's schema is invalid: {exc.message}"
    except referencing.exceptions.Unresolvable:
        return REMOTE_REFUSED
    return None
