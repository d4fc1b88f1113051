"""Token counts without usage: the server's tokenize route, or Ollama's eval_count.

The simulator plays each server: it omits usage (``usage=none``) and answers the
tokenize route the way that server does (llama.cpp without BOS by default, vLLM with
BOS unless told not to, llama-cpp-python always with BOS). Its odd vocabulary is text
o200k splits into over twice as many tokens as the model's own tokenizer, so a count by
o200k would be far off; the server's count must equal what it generated.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from probes.engine import Prices, ProbeRequest, measure_sync, tokenize, tokens
from probes.simulator import content, start_in_thread

GENERATED = 200
ODD_NO_USAGE = "sim-default@tps=4000,ttft=5,usage=none,vocab=odd"


@pytest.fixture(scope="module", params=["llama.cpp", "vllm", "llama-cpp-python"])
def server(request) -> Iterator[tuple[str, str]]:
    with start_in_thread(tokenizer=request.param) as sim:
        yield request.param, sim.base_url


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
def test_the_servers_tokenizer_counts_what_it_generated(server, api) -> None:
    method, base_url = server
    req = ProbeRequest(
        api=api,
        base_url=base_url,
        model=ODD_NO_USAGE,
        max_tokens=GENERATED,
        token_counter=method,
    )
    result = measure_sync(req)
    assert result.ok, result.error
    assert result.usage is None  # nothing to read: the count must come from the server
    assert result.output_tokens == GENERATED
    assert result.token_source == method
    # Where o200k would have been: more than twice as many tokens (and twice the speed).
    assert result.output_tokens_o200k > 2 * GENERATED
    assert result.output_tps_o200k > 1.8 * result.output_tps


# A prompt in the odd vocabulary: o200k counts it more than twice as long as the model.
ODD_PROMPT = [
    {"role": "system", "content": "Answer in" + content.prose(0, 40, "odd") + "."},
    {"role": "user", "content": "Summarise:" + content.prose(40, 300, "odd", sentence=12)},
]
PRICES = Prices(input_per_m=2.0, output_per_m=8.0)


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
def test_the_prompt_is_counted_by_the_same_route_without_usage(server, api) -> None:
    method, base_url = server
    req = ProbeRequest(
        api=api,
        base_url=base_url,
        model=ODD_NO_USAGE,
        messages=ODD_PROMPT,
        max_tokens=GENERATED,
        token_counter=method,
        prices=PRICES,
    )
    result = measure_sync(req)
    assert result.ok, result.error
    # The simulator's own tokenizer on the prompt's text (content only, no template).
    model_count = sum(len(content.model_tokens(m["content"])) for m in ODD_PROMPT)
    assert result.input_tokens == model_count
    assert result.token_source == method
    o200k = sum(tokens.count(m["content"]) for m in ODD_PROMPT)
    assert o200k > 2 * model_count  # what input_tokens would have been by o200k
    # The cost is of the server's counts, input and output alike.
    expected = (model_count * 2.0 + GENERATED * 8.0) / 1e6
    assert result.cost_usd == pytest.approx(expected, rel=1e-9)


def test_without_a_counter_the_count_is_o200k_and_says_so(server) -> None:
    _, base_url = server
    req = ProbeRequest(
        api="openai-chat", base_url=base_url, model=ODD_NO_USAGE, max_tokens=GENERATED
    )
    result = measure_sync(req)
    assert result.token_source == "o200k"
    assert result.output_tokens == result.output_tokens_o200k > 2 * GENERATED
    assert result.input_tokens is None and result.cost_usd is None  # no prompt count


def test_usage_wins_over_the_tokenize_route_when_the_stream_has_it(server) -> None:
    method, base_url = server
    req = ProbeRequest(
        api="openai-chat",
        base_url=base_url,
        model="sim-default@tps=4000,ttft=5,vocab=odd",
        max_tokens=GENERATED,
        token_counter=method,
    )
    result = measure_sync(req)
    assert (result.output_tokens, result.token_source) == (GENERATED, "usage")


def test_detect_finds_the_route_the_server_answers(server) -> None:
    method, base_url = server
    assert tokenize.detect_sync(base_url, "sim-default") == method


def test_ollamas_final_eval_count_is_the_count() -> None:
    with start_in_thread() as sim:
        req = ProbeRequest(
            api="openai-chat",
            base_url=sim.base_url,
            model="sim-default@tps=4000,ttft=5,usage=eval_count,vocab=odd",
            max_tokens=GENERATED,
            token_counter="ollama",
        )
        result = measure_sync(req)
    assert (result.output_tokens, result.token_source) == (GENERATED, "ollama")


def test_a_missing_route_falls_back_to_o200k_and_records_why() -> None:
    with start_in_thread() as sim:  # answers no tokenize route, like OpenAI
        req = ProbeRequest(
            api="openai-chat",
            base_url=sim.base_url,
            model=ODD_NO_USAGE,
            max_tokens=50,
            token_counter="vllm",
        )
        result = measure_sync(req)
        assert tokenize.detect_sync(sim.base_url, "sim-default") is None
    assert result.ok and result.token_source == "o200k"
    assert "HTTP 404" in result.stream["tokenize_error"]


def test_a_tokenize_route_that_hangs_is_cut_off(monkeypatch) -> None:
    monkeypatch.setattr(tokenize, "TIMEOUT_S", 0.3)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts the connection, never answers
    port = listener.getsockname()[1]
    try:
        with pytest.raises(tokenize.TokenizeError, match="no answer"):
            tokenize.count_texts_sync("llama.cpp", f"http://127.0.0.1:{port}/v1", "m", ["hi"])
    finally:
        listener.close()


def test_the_route_search_gives_up_as_a_whole() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts every connection, never answers one
    port = listener.getsockname()[1]
    try:
        started = time.monotonic()
        found = tokenize.detect_sync(f"http://127.0.0.1:{port}/v1", "m", total_s=0.5)
        elapsed = time.monotonic() - started
    finally:
        listener.close()
    assert found is None
    assert elapsed < tokenize.TIMEOUT_S  # not one request's bound, let alone six
