"""Token counts without usage: the server's tokenize route, or Ollama's eval_count.

The simulator plays each server: it omits usage (``usage=none``) and answers the
tokenize route the way that server does (llama.cpp without BOS by default, vLLM with
BOS unless told not to, llama-cpp-python always with BOS). Its odd vocabulary is text
o200k splits into over twice as many tokens as the model's own tokenizer, so a count by
o200k would be far off; the server's count must equal what it generated.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from probes.engine import ProbeRequest, measure_sync, tokenize
from probes.simulator import start_in_thread

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


def test_without_a_counter_the_count_is_o200k_and_says_so(server) -> None:
    _, base_url = server
    req = ProbeRequest(
        api="openai-chat", base_url=base_url, model=ODD_NO_USAGE, max_tokens=GENERATED
    )
    result = measure_sync(req)
    assert result.token_source == "o200k"
    assert result.output_tokens == result.output_tokens_o200k > 2 * GENERATED


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
