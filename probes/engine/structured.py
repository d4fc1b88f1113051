"""Request-body fields for structured output and tool calls, per API.

Workloads state a JSON schema or tools once, neutrally (``{"name", "description",
"parameters"}`` per tool); each API spells the request differently. Kept apart from the
stream dialects: this shapes what we send, they read what comes back.
"""

from __future__ import annotations

from typing import Any


def body_fields(
    api: str, schema: dict[str, Any] | None = None, tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Extra body fields asking for JSON following ``schema``, or for a call of ``tools``."""
    out: dict[str, Any] = {}
    if tools:
        if api == "anthropic-messages":
            out["tools"] = [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "input_schema": t.get("parameters") or {"type": "object"},
                }
                for t in tools
            ]
            out["tool_choice"] = {"type": "any"}  # the answer must be a call
        else:
            out["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t.get("description", ""),
                        "parameters": t.get("parameters") or {"type": "object"},
                    },
                }
                for t in tools
            ]
            out["tool_choice"] = "required"
    elif schema is not None:
        if api == "anthropic-messages":
            out["output_format"] = {"type": "json_schema", "schema": schema}
        else:
            out["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            }
    return out


# Anthropic's structured outputs are behind a beta header.
ANTHROPIC_STRUCTURED_BETA = "structured-outputs-2025-11-13"


def header_fields(api: str, schema: dict[str, Any] | None = None) -> dict[str, str]:
    if api == "anthropic-messages" and schema is not None:
        return {"anthropic-beta": ANTHROPIC_STRUCTURED_BETA}
    return {}
