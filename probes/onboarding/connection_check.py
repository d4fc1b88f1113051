"""Test a server before probing it: what API it speaks and what it tells about itself.

`check()` sends one tiny streamed request through the measurement engine (the same path
probes take) and a few bounded GETs/POSTs to the routes servers use to describe
themselves:

* API style: OpenAI chat completions, else Anthropic messages (when asked to detect).
* Usage: whether the stream ends with token counts (llama.cpp and some proxies omit
  them; the engine then counts output with o200k_base).
* Token counter: how to count tokens when the stream has no usage, one of
  ``tokenize.METHODS``: Ollama when the stream's final chunk carries ``eval_count``,
  else the tokenize route the server answers (``tokenize.detect``: llama.cpp, vLLM,
  llama-cpp-python), else none (o200k). Create stores it on the endpoint.
* Context length: ``/v1/models`` ``max_model_len`` (vLLM), llama.cpp ``/props``
  ``n_ctx`` (or the models list's ``meta.n_ctx_train``).
* Slots: llama.cpp ``/props`` ``total_slots`` or the length of ``/slots``; a
  single-slot server serves one request at a time, so probes must not overlap.
* Server metrics: ``/metrics`` in Prometheus text with vLLM (``vllm:*``), llama.cpp
  (``llamacpp:*``), SGLang (``sglang:*``) or TGI (``tgi_*``) names: proposed as the
  endpoint's server metrics URL (read around each run: probes/engine/telemetry.py).

Every side request is bounded in time (connect, headers and body) and size
(`_bounded_json`, through the one door out, probes/engine/door.py; the tokenize search
by its own per-request bound and DETECT_TOTAL_S overall); a server that answers none of
them still gets a verdict from the streamed request alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from probes.engine import Limits, ProbeRequest, RunResult

# The HTTP client (door, tokenize, the client) and the metrics parser load inside the
# functions that send or parse: the admin imports this module for every manage.py command.

SIDE_REQUEST_S = 4.0  # total time for one side request, connect to last byte
SIDE_REQUEST_MAX_BYTES = 2 * 1024 * 1024  # a model list of a few thousand entries
SIDE_REQUEST_MAX_NODES = 200_000  # values in one side answer (ten per model listed)
DETECT_TOTAL_S = 8.0  # the whole tokenize-route search (up to six bounded POSTs)
TEST_LIMITS = Limits(connect_s=5, first_token_s=20, stall_s=10, total_s=30)
TEST_PROMPT = [{"role": "user", "content": "Reply with the word ok."}]
TEST_MAX_TOKENS = 8
DETECT = "detect"
# What a server says to a request in an API it does not speak.
WRONG_API_STATUSES = ("not_found", "http_error", "protocol_error")


@dataclass
class ConnectionReport:
    """What the test found; None where the server did not say."""

    ok: bool
    api_style: str | None = None
    status: str = ""
    error: str = ""
    ttft_ms: float | None = None
    stream_usage: bool | None = None  # the stream carried token counts
    tokenize_route: str = ""  # the URL that tokenizes, "" if none answered
    # How to count tokens without usage (tokenize.METHODS), "" for o200k.
    token_counter: str = ""
    context_tokens: int | None = None
    context_source: str = ""  # where context_tokens came from
    total_slots: int | None = None
    server_models: list[str] = field(default_factory=list)
    server_metrics_url: str = ""  # the server's /metrics, when its names are known
    server_engine: str = ""  # whose names: servermetrics.ENGINES
    # What the server says it is: /v1/models owned_by, else llama.cpp when /props answered.
    server_software: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def single_slot(self) -> bool:
        return self.total_slots == 1

    @property
    def safe_concurrency(self) -> int:
        """Requests at once that do not queue behind each other at the server."""
        if self.total_slots:
            return max(1, min(self.total_slots, 4))
        return 1


_HTTP_STATUS = re.compile(r"^HTTP \d{3}")
_ERROR_CLASS = re.compile(r"^[A-Z][A-Za-z]*(?:Error|Timeout|Exception|Refused)\b")


def error_class(error: str) -> str:
    """What a failed test may show before the endpoint is saved: the HTTP status or the
    exception's class, and the egress policy's own refusal; never the server's words (the
    URL may be an internal service whose 403 page is no business of the form's)."""
    for door_words in ("egress policy:", "key policy:"):
        if door_words in error:
            return error[error.index(door_words) :]
    for pattern in (_HTTP_STATUS, _ERROR_CLASS):
        found = pattern.match(error)
        if found:
            return found.group(0)
    return ""


def server_root(base_url: str) -> str:
    """The server's root: the base URL without its API version (`/v1`)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", "")).rstrip("/")


def _bounded_json(
    method: str, url: str, headers: dict[str, str], body: dict | None = None
) -> Any | None:
    """One side request: JSON or None, never longer than SIDE_REQUEST_S from connect to
    last byte (headers included: the engine's bounded request), never bigger than
    SIDE_REQUEST_MAX_BYTES (a misbehaving server cannot hold the page)."""
    from probes.engine import door

    try:
        response = door.request_sync(
            method,
            url,
            headers=headers,
            content=orjson.dumps(body) if body is not None else None,
            deadline_s=SIDE_REQUEST_S,
            max_bytes=SIDE_REQUEST_MAX_BYTES,
        )
        if response.status_code != 200:
            return None
        return response.json(max_nodes=SIDE_REQUEST_MAX_NODES)  # a bomb: ValueError
    except (door.HTTPError, door.InvalidURL, door.BoundedError, ValueError):
        return None  # orjson.JSONDecodeError is a ValueError


def _bounded_text(url: str, headers: dict[str, str]) -> str | None:
    """A side GET's text (not JSON), under the same bounds as ``_bounded_json``."""
    from probes.engine import door

    try:
        response = door.request_sync(
            "GET", url, headers=headers, deadline_s=SIDE_REQUEST_S, max_bytes=SIDE_REQUEST_MAX_BYTES
        )
    except (door.HTTPError, door.InvalidURL, door.BoundedError, ValueError):
        return None
    if response.status_code != 200:
        return None
    return response.body.decode("utf-8", "replace")


def metrics_route(base_url: str, headers: dict[str, str]) -> tuple[str, str]:
    """The server's /metrics URL and engine when its names are known, else ("", "")."""
    from probes.engine import servermetrics

    url = server_root(base_url) + "/metrics"
    text = _bounded_text(url, headers)
    if text is None:
        return "", ""
    try:
        engine = servermetrics.detect(servermetrics.parse(text))
    except servermetrics.MetricsError:
        return "", ""
    return (url, engine) if engine else ("", "")


def side_headers(api_style: str, api_key: str | None, extra: dict[str, str]) -> dict[str, str]:
    # The same authentication the engine sends, so a side route sees the probe's key.
    request = ProbeRequest(api=api_style, base_url="http://placeholder", model="m", api_key=api_key)
    headers = {k: v for k, v in request.headers().items() if k != "accept"}
    headers.update(extra)
    return headers


def _measure(api_style: str, base_url: str, model_id: str, api_key: str | None, extra) -> RunResult:
    from probes.engine import measure_sync

    return measure_sync(
        ProbeRequest(
            api=api_style,
            base_url=base_url,
            model=model_id,
            api_key=api_key,
            messages=TEST_PROMPT,
            max_tokens=TEST_MAX_TOKENS,
            extra_headers=dict(extra),
            limits=TEST_LIMITS,
            warm=False,
            # Ollama's final eval_count is read only when asked for: a stream without
            # usage that carries one then says token_source "ollama".
            token_counter="ollama",
        )
    )


def token_counter(result: RunResult, base_url: str, model_id: str, headers: dict[str, str]) -> str:
    """How to count this server's tokens without usage (tokenize.METHODS), "" for o200k.

    ``result`` is a test request measured with ``token_counter="ollama"``. Shared by the
    add-endpoint page and the providers' Test connection action.
    """
    if result.token_source == "ollama":
        return "ollama"  # no tokenize route to look for: the stream counts itself
    from probes.engine import tokenize

    found = tokenize.detect_sync(base_url, model_id, headers, total_s=DETECT_TOTAL_S)
    return found or ""


def _models_info(report: ConnectionReport, data: Any, model_id: str) -> None:
    if not isinstance(data, dict):
        return
    entries = data.get("data") if isinstance(data.get("data"), list) else []
    report.server_models = [str(e.get("id")) for e in entries if isinstance(e, dict)][:50]
    owners = [
        e.get("owned_by") for e in entries if isinstance(e, dict) and e.get("id") == model_id
    ] or [e.get("owned_by") for e in entries[:1] if isinstance(e, dict)]
    if owners and isinstance(owners[0], str):
        report.server_software = _software_name(owners[0])
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("id") != model_id:
            continue
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        for source, value in (
            ("/v1/models max_model_len", entry.get("max_model_len")),
            ("/v1/models context_length", entry.get("context_length")),
            ("/v1/models meta.n_ctx_train", meta.get("n_ctx_train")),
        ):
            if isinstance(value, int) and value > 0:
                report.context_tokens, report.context_source = value, source
                return


# owned_by values that name server software, as people write them, and our name for each.
_SOFTWARE = {
    "vllm": "vLLM",
    "llamacpp": "llama.cpp",
    "llama.cpp": "llama.cpp",
    "ollama": "Ollama",
    "sglang": "SGLang",
    "tgi": "TGI",
    "text-generation-inference": "TGI",
    "lmstudio": "LM Studio",
    "inferwatch-simulator": "Inferwatch simulator",
}


def _software_name(owned_by: str) -> str:
    """Our name for the software a server says it is, or "": its own word is untrusted
    text, and a provider named from it would show it to every visitor."""
    return _SOFTWARE.get(owned_by.strip().lower(), "")


def _props_info(report: ConnectionReport, props: Any) -> None:
    if not isinstance(props, dict):
        return
    report.server_software = report.server_software or "llama.cpp"  # only it has /props
    settings = props.get("default_generation_settings")
    n_ctx = props.get("n_ctx")
    if isinstance(settings, dict) and not isinstance(n_ctx, int):
        n_ctx = settings.get("n_ctx")
    if isinstance(n_ctx, int) and n_ctx > 0:
        # The server's context per slot is what a request can use: it wins over the
        # model's training context.
        report.context_tokens, report.context_source = n_ctx, "/props n_ctx"
    slots = props.get("total_slots")
    if isinstance(slots, int) and slots > 0:
        report.total_slots = slots


def _count_note(method: str) -> str:
    if method == "ollama":
        return "The stream carries no usage: output is counted by Ollama's final eval_count."
    if method:
        return (
            f"The stream carries no usage: output and prompt are counted by the server's "
            f"tokenizer ({method})."
        )
    return "The stream carries no usage: tokens are counted with o200k_base."


def check(
    base_url: str,
    model_id: str,
    api_style: str = DETECT,
    api_key: str | None = None,
    extra_headers: dict[str, str] | None = None,
) -> ConnectionReport:
    """Test the server; never raises for anything the server does."""
    from probes.engine import servermetrics, tokenize

    extra = dict(extra_headers or {})
    styles = ["openai-chat", "anthropic-messages"] if api_style == DETECT else [api_style]
    result = None
    for style in styles:
        result = _measure(style, base_url, model_id, api_key, extra)
        if result.status not in WRONG_API_STATUSES:
            break
    assert result is not None
    report = ConnectionReport(
        ok=result.ok,
        api_style=style if result.ok or len(styles) == 1 else None,
        status=result.status,
        error=result.error or "",
        ttft_ms=result.ttft_ms,
    )
    if result.ok:
        report.stream_usage = result.token_source == "usage"
    root = server_root(base_url)
    headers = side_headers(report.api_style or styles[0], api_key, extra)
    models = _bounded_json("GET", base_url.rstrip("/") + "/models", headers)
    _models_info(report, models, model_id)
    _props_info(report, _bounded_json("GET", root + "/props", headers))
    if report.total_slots is None:
        slots = _bounded_json("GET", root + "/slots", headers)
        if isinstance(slots, list) and slots:
            report.total_slots = len(slots)
    report.server_metrics_url, report.server_engine = metrics_route(base_url, headers)
    if report.server_engine:
        lacking = servermetrics.lacks(report.server_engine)
        report.notes.append(
            f"Server metrics ({report.server_engine}) at {report.server_metrics_url}: queue, "
            "prefill, decode and load are read around each run"
            + (f"; it lacks {', '.join(lacking)}." if lacking else ".")
        )
    if result.ok:
        report.token_counter = token_counter(result, base_url, model_id, headers)
        if report.token_counter in tokenize.ROUTE_METHODS:
            report.tokenize_route = tokenize.route_url(report.token_counter, base_url)
        if not report.stream_usage:
            report.notes.append(_count_note(report.token_counter))
    if report.single_slot:
        report.notes.append(
            "One slot: the server answers one request at a time, so probes run one at a time."
        )
    return report
