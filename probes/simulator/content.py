"""What the simulator says: words, sentences, JSON for a schema, tool-call arguments.

The simulator has its own "model tokenizer" (``model_tokens``): a word with its leading
space is one token, and so is each punctuation mark. Every text it streams is made of
such tokens, so its usage, its tokenize routes and its event schedule agree exactly.
With the plain vocabulary o200k agrees too (each word is one o200k token); the odd
vocabulary is made of words o200k splits into several pieces, as real tokenizers differ
from o200k on unusual text, so a count by o200k is far off there.
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import vocab

_TOKEN = re.compile(r" ?\w+| +|[^\w ]")

# Consonant clusters no English-trained BPE has merged: o200k splits each into 2-4 pieces.
_ODD = (
    "zqx vbk xqz jvw qzk wxv kjq fzq pqx zvb gxq qjz vqk zkx xjv bqz qvx jzq kvz wqj "
    "zxk qbv xvq jkz vzq qxk zjv kqb xzj vjq"
)
ODD_WORDS = tuple(" " + w for w in _ODD.split())


def model_tokens(text: str) -> list[str]:
    """The simulator model's tokens of ``text`` (what its tokenize routes count)."""
    return _TOKEN.findall(text)


def word(i: int, vocabulary: str = "plain") -> str:
    if vocabulary == "odd":
        return ODD_WORDS[(i * 7 + 3) % len(ODD_WORDS)]
    return vocab.token(i)


def prose(start: int, count: int, vocabulary: str = "plain", sentence: int = 0) -> str:
    """Tokens ``start`` .. ``start + count``: words, with a full stop every ``sentence``."""
    out = []
    for i in range(start, start + count):
        out.append("." if sentence and (i + 1) % sentence == 0 else word(i, vocabulary))
    return "".join(out)


# -- JSON -----------------------------------------------------------------------------


def instance(schema: Any, depth: int = 0) -> Any:
    """A small JSON value that satisfies ``schema`` (the subset structured output uses)."""
    if not isinstance(schema, dict) or depth > 6:
        return "value"
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        return {name: instance(sub, depth + 1) for name, sub in props.items()}
    if kind == "array":
        n = max(1, int(schema.get("minItems") or 1))
        return [instance(schema.get("items") or {}, depth + 1) for _ in range(n)]
    if kind == "integer":
        return int(schema.get("minimum") or 3)
    if kind == "number":
        return float(schema.get("minimum") or 2.5)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = "the same result each time"
    if schema.get("minLength"):
        text = (text + " ") * (int(schema["minLength"]) // len(text) + 1)
    return text.strip()


def json_text(schema: Any) -> str:
    return json.dumps(instance(schema), separators=(", ", ": "))


def response_schema(req: dict[str, Any]) -> Any | None:
    """The JSON schema a request asks the answer to follow, if any (either API)."""
    # OpenAI's response_format; Anthropic's output_config.format (GA) or, during its
    # transition period, the beta's top-level output_format.
    config = req.get("output_config")
    anthropic = config.get("format") if isinstance(config, dict) else None
    fmt = req.get("response_format") or anthropic or req.get("output_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema")
        if isinstance(inner, dict) and "schema" in inner:  # OpenAI
            return inner["schema"]
        return fmt.get("schema", {})  # Anthropic
    if fmt.get("type") == "json_object":
        return {"type": "object", "properties": {"answer": {"type": "string"}}}
    return None


def requested_tool(req: dict[str, Any]) -> tuple[str, Any] | None:
    """(name, parameter schema) of the first tool a request defines, if any."""
    tools = req.get("tools")
    if not isinstance(tools, list) or not tools or not isinstance(tools[0], dict):
        return None
    tool = tools[0]
    if isinstance(tool.get("function"), dict):  # OpenAI
        fn = tool["function"]
        return str(fn.get("name") or "tool"), fn.get("parameters") or {}
    return str(tool.get("name") or "tool"), tool.get("input_schema") or {}  # Anthropic
