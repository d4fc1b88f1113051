"""Token counts from the server's own tokenizer, for streams that carry no usage.

Without ``usage`` we would count with o200k, which can be far from the model's own
tokenizer on unusual text (2x has been seen). Several servers answer a tokenize route:

* llama.cpp ``POST /tokenize {"content": text, "add_special": false}`` -> ``{"tokens": [...]}``
* vLLM ``POST /tokenize {"model", "prompt", "add_special_tokens": false}`` -> ``{"count": n}``
* llama-cpp-python ``POST /extras/tokenize {"input": text}`` -> ``{"tokens": [...]}``
  (it always adds BOS: we subtract what the empty string counts)
* Ollama has no tokenize route, but its final chunk carries ``eval_count``: the dialect
  keeps it and metrics read it like usage.

The routes are asked after the stream, never inside the timed window. Each request is
bounded (total timeout, response size), and any failure falls back to o200k: a
tokenize route that misbehaves must never fail a measurement. Requests go through
``door.request`` (the one door out; one deadline for the whole exchange, a byte cap).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from . import bounded, door, json_budget

# The per-endpoint setting: the method used when a stream carries no usage.
METHODS = ("llama.cpp", "vllm", "llama-cpp-python", "ollama")
ROUTE_METHODS = ("llama.cpp", "vllm", "llama-cpp-python")  # the ones asked over HTTP
TIMEOUT_S = 5.0
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
# Token ids in one answer: a 4 MiB answer holds no more than this many anyway.
MAX_ANSWER_NODES = 1_000_000


class TokenizeError(Exception):
    pass


def server_root(base_url: str) -> str:
    """``http://host:8080/v1`` -> ``http://host:8080``: the tokenize routes sit at the root."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _route(method: str, root: str, model: str, text: str) -> tuple[str, dict[str, Any]]:
    if method == "llama.cpp":
        return f"{root}/tokenize", {"content": text, "add_special": False}
    if method == "vllm":
        return f"{root}/tokenize", {"model": model, "prompt": text, "add_special_tokens": False}
    if method == "llama-cpp-python":
        return f"{root}/extras/tokenize", {"input": text, "model": model}
    raise ValueError(f"no tokenize route for {method!r}; routes: {', '.join(ROUTE_METHODS)}")


async def _post_bounded(
    client: door.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> Any:
    """One POST within a total deadline and a size cap; the decoded JSON body."""
    try:
        response = await door.request(
            client,
            "POST",
            url,
            deadline_s=TIMEOUT_S,
            max_bytes=MAX_RESPONSE_BYTES,
            content=orjson.dumps(body),
            headers=headers,
        )
    except bounded.DeadlineExceeded:
        raise TokenizeError(f"{url}: no answer within {TIMEOUT_S} s") from None
    except bounded.BoundedError as exc:
        raise TokenizeError(f"{url}: {exc}") from None
    except door.HTTPError as exc:
        raise TokenizeError(f"{url}: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise TokenizeError(f"{url}: HTTP {response.status_code}")
    try:
        # A token list is one array of numbers: a bomb of nested arrays is refused
        # before it is built (json_budget.py).
        return response.json(max_nodes=MAX_ANSWER_NODES, max_containers=100)
    except json_budget.JSONTooLarge as exc:
        raise TokenizeError(f"{url}: {exc}") from None
    except orjson.JSONDecodeError as exc:
        raise TokenizeError(f"{url}: not JSON ({exc})") from None


# A count beyond this is not a count of our text (a hostile or broken server).
MAX_COUNT = 10_000_000


def _count_of(method: str, answer: Any) -> int:
    if isinstance(answer, dict):
        count = answer.get("count")
        if method == "vllm" and type(count) is int and 0 <= count <= MAX_COUNT:
            return count
        tokens = answer.get("tokens")
        if isinstance(tokens, list):
            return len(tokens)
    raise TokenizeError(f"{method} tokenize answer has no token list")


async def count_groups(
    method: str,
    base_url: str,
    model: str,
    groups: Iterable[Iterable[str]],
    headers: dict[str, str] | None = None,
    keys: Sequence[door.KeyBinding] = (),
) -> list[int]:
    """Tokens per group of ``texts`` (each text counted alone, summed per group) by the
    server's tokenizer: the output and the prompt of a run in one exchange.

    Raises TokenizeError when the route is missing or answers something else.
    """
    root = server_root(base_url)
    hdrs = {"content-type": "application/json", **(headers or {})}
    async with door.async_client(connect_s=TIMEOUT_S, keys=keys) as client:

        async def one(text: str) -> int:
            url, body = _route(method, root, model, text)
            return _count_of(method, await _post_bounded(client, url, body, hdrs))

        # Whatever the server adds to every input (a BOS token) is not in the text.
        overhead = await one("")
        totals = []
        for texts in groups:
            total = 0
            for text in texts:
                if text:
                    total += max(0, await one(text) - overhead)
            totals.append(total)
        return totals


async def count_texts(
    method: str,
    base_url: str,
    model: str,
    texts: Iterable[str],
    headers: dict[str, str] | None = None,
    keys: Sequence[door.KeyBinding] = (),
) -> int:
    """Tokens in ``texts`` (summed, each counted alone) by the server's tokenizer."""
    (total,) = await count_groups(method, base_url, model, [texts], headers, keys)
    return total


def count_texts_sync(method: str, base_url: str, model: str, texts: Iterable[str], **kw) -> int:
    return bounded.run_sync(lambda: count_texts(method, base_url, model, list(texts), **kw))


_PROBE_TEXT = "Inferwatch tokenize check: one two three."


def route_url(method: str, base_url: str) -> str:
    """The URL a method's tokenize route answers at, for reports."""
    return _route(method, server_root(base_url), "", "")[0]


async def _detect(base_url: str, model: str, headers: dict[str, str] | None) -> str | None:
    for method in ROUTE_METHODS:
        try:
            n = await count_texts(method, base_url, model, [_PROBE_TEXT], headers=headers)
        except (TokenizeError, ValueError):
            continue
        if 0 < n < len(_PROBE_TEXT):
            return method
    return None


async def detect(
    base_url: str,
    model: str,
    headers: dict[str, str] | None = None,
    total_s: float | None = None,
) -> str | None:
    """Which tokenize route the server answers (for "Test connection"), else None.

    Tried in a fixed order; a route counts only if it answers a sane count for a short
    sentence. Each request is bounded (TIMEOUT_S); ``total_s`` bounds the whole search
    (a server that stalls every route must not hold the page for all of them: None
    then). Ollama is not detectable this way (it has no route): the connection check
    finds it by the eval_count on its stream's final chunk.
    """
    if total_s is None:
        return await _detect(base_url, model, headers)
    try:
        return await asyncio.wait_for(_detect(base_url, model, headers), total_s)
    except TimeoutError:
        return None


def detect_sync(
    base_url: str,
    model: str,
    headers: dict[str, str] | None = None,
    total_s: float | None = None,
) -> str | None:
    """``detect`` for synchronous callers (a Django view, a management command)."""
    return bounded.run_sync(lambda: detect(base_url, model, headers, total_s))
