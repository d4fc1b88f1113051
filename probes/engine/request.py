"""What to measure: the request, its limits and the prices to cost it with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from . import dialects
from .contract import MIN_SPEED_TOKENS
from .dialects import APIS

if TYPE_CHECKING:
    from . import door
    from .telemetry import Telemetry  # its scrapers (prometheus_client) load with a probe

# probes/engine/tokenize.METHODS (kept here too so a request validates without httpx).
TOKEN_COUNTERS = ("llama.cpp", "vllm", "llama-cpp-python", "ollama")


@dataclass(frozen=True)
class Limits:
    """When to give up. Each limit maps to one status of metrics.md."""

    connect_s: float = 10.0  # DNS + TCP + TLS -> timeout_connect
    first_token_s: float = 60.0  # t0 -> first output event -> timeout_first_token
    stall_s: float = 30.0  # gap between output events -> timeout_stall
    total_s: float = 300.0  # t0 -> end of stream -> timeout_total
    max_response_bytes: int = 32 * 1024 * 1024  # body size -> protocol_error
    max_event_bytes: int = 4 * 1024 * 1024  # one SSE event or line -> protocol_error
    # Counts, not just bytes: 31 MiB of ":\n" is 16 M events within the byte cap. Each
    # passed limit -> protocol_error naming it (dialects/base.py, sse.py).
    max_events: int = 200_000  # SSE events + comment lines in one response
    # Every line, blank and unterminated ones too (an Anthropic event is three lines).
    max_lines: int = 800_000
    # JSON objects, arrays and items (counted as ``{``, ``[`` and ``,``) in one event of
    # more than JSON_SCAN_BYTES: 4 MiB of ``[{},{},...]`` is two million dicts (~250 MB)
    # once parsed, so such an event is refused before it is parsed.
    max_json_nodes: int = 20_000
    max_output_events: int = 100_000  # output events (timeline entries) in one run
    max_tool_calls: int = 64  # distinct tool calls in one run
    # Answer + reasoning + tool text in one run (~500k tokens, far past any real answer):
    # held as text until the run is measured, ~10 MB a stream at 4 Mi, so a parallel-8
    # slot of 1 MiB deltas reached +111 MB; at 2 Mi it stays well within 100 MB.
    max_content_chars: int = 2 * 1024 * 1024
    # Not a failure: the stored timeline keeps at most this many points, neighbouring
    # output events merged past it (metrics computed from every event first).
    stored_timeline_entries: int = 10_000
    # The warm-up GET (before t0, not measured): given up when it breaks either bound, and
    # the measured request then opens its own connection (cold_connection).
    warmup_s: float = 15.0
    warmup_max_bytes: int = 8 * 1024 * 1024  # a big provider's model list is ~1 MB


# What each limit bounds and what passing it makes of the run (listed on /methodology/).
LIMIT_MEANINGS: dict[str, str] = {
    "connect_s": "DNS, TCP and TLS of the measured request; past it: timeout_connect.",
    "first_token_s": "From t0 to the first output event; past it: timeout_first_token.",
    "stall_s": "Between two output events; past it: timeout_stall.",
    "total_s": "From t0 to the end of the stream; past it: timeout_total.",
    "max_response_bytes": "Bytes of one response body; past it: protocol_error.",
    "max_event_bytes": "Bytes of one SSE event or line; past it: protocol_error.",
    "max_events": "SSE events and comment lines (keep-alives) in one response; "
    "past it: protocol_error.",
    "max_lines": "SSE lines of every kind (blank and unterminated ones too) in one response; "
    "past it: protocol_error.",
    "max_json_nodes": "JSON objects, arrays and items in one large event (before it is parsed); "
    "past it: protocol_error.",
    "max_output_events": "Output events (timeline entries) in one run; past it: protocol_error.",
    "max_tool_calls": "Distinct tool calls in one run; past it: protocol_error.",
    "max_content_chars": "Characters of answer, reasoning and tool-call text (names and "
    "arguments) in one run, counted together; "
    "past it: protocol_error.",
    "stored_timeline_entries": "Points of the stored timeline; past it, neighbouring output "
    "events are merged into one point (metrics are computed from every event first).",
    "warmup_s": "The unmeasured warm-up GET; past it the measured request connects cold.",
    "warmup_max_bytes": "Bytes of the warm-up GET's answer; past it, as warmup_s.",
}


def limit_rows(limits: Limits | None = None) -> list[tuple[str, str, str]]:
    """(name, value, meaning) for every limit, defaults unless given: for /methodology/."""
    limits = limits or Limits()
    rows = []
    for name, meaning in LIMIT_MEANINGS.items():
        value = getattr(limits, name)
        if name.endswith("_s"):
            shown = f"{value:g} s"
        elif name.endswith("_bytes"):
            shown = f"{value / (1 << 20):g} MiB"
        else:
            shown = f"{value:,}"
        rows.append((name, shown, meaning))
    return rows


@dataclass(frozen=True)
class Prices:
    """USD per million tokens, as in force at the run's time."""

    input_per_m: float
    cached_input_per_m: float | None = None  # None: cached tokens cost the input price
    output_per_m: float = 0.0


@dataclass
class ProbeRequest:
    api: str
    base_url: str
    model: str
    api_key: str | None = None
    messages: list[dict[str, Any]] = field(
        default_factory=lambda: [{"role": "user", "content": "Say hello."}]
    )
    max_tokens: int = 256
    temperature: float | None = 0
    extra_headers: dict[str, str] = field(default_factory=dict)
    # Merged into the JSON body last; a key set to None removes a default
    # (e.g. {"stream_options": None} for a server that rejects it).
    extra_body: dict[str, Any] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    prices: Prices | None = None
    warm: bool = True
    include_text: bool = False
    # Fewer output tokens than this: the run keeps its TTFT but is flagged short_output
    # (the observatory passes its MIN_SPEED_TOKENS setting).
    min_speed_tokens: int = MIN_SPEED_TOKENS
    # How to count output tokens when the stream carries no usage: None (o200k) or one
    # of tokenize.METHODS (ask the server's tokenizer after the stream).
    token_counter: str | None = None
    # Our o200k count of the prompt, given only when the provider cannot have cached any
    # of it (a fresh prompt): it stands in for usage's input count in the prefill rate.
    # None for a repeat (its cached share is unknown without usage).
    prompt_tokens: int | None = None
    # A self-hosted server's /metrics and power source, read around the run.
    telemetry: Telemetry | None = None
    # The origin (scheme://host:port) api_key is bound to: the one door out (door.py)
    # sends it nowhere else, whatever base_url now says. None: base_url's own (a request
    # built on the command line, where the key and the URL are given together).
    key_origin: str | None = None

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise ValueError(f"api must be one of {', '.join(APIS)}, not {self.api!r}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://: {self.base_url!r}")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self.token_counter is not None and self.token_counter not in TOKEN_COUNTERS:
            raise ValueError(
                f"token_counter must be one of {', '.join(TOKEN_COUNTERS)}, "
                f"not {self.token_counter!r}"
            )

    # -- HTTP ----------------------------------------------------------------------------

    def url(self) -> str:
        return dialects.get(self.api).url(self.base_url)

    def warmup_url(self) -> str:
        """A cheap GET on the same host, to open the connection before measuring."""
        return dialects.get(self.api).warmup_url(self.url())

    def headers(self) -> dict[str, str]:
        headers = dialects.get(self.api).headers(self.api_key)
        headers.update(self.extra_headers)
        return headers

    def secrets(self) -> list[str]:
        """What this request carries that nothing we keep may contain: its key and its
        extra header values (a tenant token)."""
        return [s for s in (self.api_key, *self.extra_headers.values()) if s and len(s) >= 4]

    def key_bindings(self) -> tuple[door.KeyBinding, ...]:
        """The key and the one origin it may travel to, for the door's check."""
        from . import door  # the HTTP client loads where a request is sent, not here

        if not self.api_key:
            return ()
        bound = door.origin(self.base_url) if self.key_origin is None else self.key_origin
        return (door.KeyBinding(self.api_key, bound),)

    def body(self) -> bytes:
        body = dialects.get(self.api).body(self)
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(self.extra_body)
        return orjson.dumps({k: v for k, v in body.items() if v is not None})
