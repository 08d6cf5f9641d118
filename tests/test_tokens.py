"""Token counting per backend and whole-request budget fitting (`awm.tokens`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awm.assets import tiktoken_cache_dir
from awm.errors import ConfigError, LLMError, PromptTooLargeError, SetupError
from awm.tokens import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    CharEstimateCounter,
    LlamaServerCounter,
    PromptParts,
    TiktokenCounter,
    count_messages,
    counter_for,
    fit_prompt,
    render_messages,
    truncate_lines,
)

GPT4O = TiktokenCounter("gpt-4o")


def recount(messages: list[dict[str, str]]) -> int:
    """The whole request counted afresh (a new counter: nothing memoized from the fitting)."""
    fresh = TiktokenCounter("gpt-4o")
    return sum(fresh.count(m["content"]) + MESSAGE_OVERHEAD for m in messages) + REPLY_PRIMING


def page(n_lines: int, prefix: str = "button") -> str:
    return "\n".join(f"[{i}] {prefix} 'Item number {i} of the list'" for i in range(n_lines))


# --- counters ------------------------------------------------------------------------------------


def test_tiktoken_counts_offline_in_a_fresh_process_with_network_blocked():
    """Known counts and token ids for gpt-4o (o200k) and gpt-4 (cl100k), loaded from our cache dir.

    A fresh interpreter, so the encodings really load from disk; sockets raise and proxies point
    nowhere, so any download attempt would fail the test.
    """
    script = textwrap.dedent(
        """
        import json, os, socket
        def refuse(*args, **kwargs):
            raise RuntimeError("network touched")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from awm.tokens import TiktokenCounter
        out = {}
        for model in ("gpt-4o", "gpt-4"):
            counter = TiktokenCounter(model)
            out[model] = [counter.encoding_name, counter.count("hello world"),
                          counter._encoding.encode("hello world")]
        out["cache_dir"] = os.environ["TIKTOKEN_CACHE_DIR"]
        print(json.dumps(out))
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["gpt-4o"] == ["o200k_base", 2, [24912, 2375]]
    assert out["gpt-4"] == ["cl100k_base", 2, [15339, 1917]]
    assert out["cache_dir"] == str(tiktoken_cache_dir())


def test_tiktoken_unknown_model_falls_back_and_says_so():
    counter = TiktokenCounter("qwen2.5-coder-1.5b-instruct")
    assert counter.encoding_name == "o200k_base"
    assert counter.exact is False
    assert TiktokenCounter("gpt-4o").exact is True
    # Special-token text in a page is counted as text, not refused.
    assert counter.count("a <|endoftext|> b") > 3


def test_tiktoken_missing_or_corrupt_cache_is_a_setup_error_and_keeps_the_file(tmp_path, monkeypatch):
    from awm.assets import TIKTOKEN_FILES
    from awm.tokens import _offline_tiktoken_file

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(SetupError, match="make setup"):
        _offline_tiktoken_file("cl100k_base")
    import hashlib

    corrupt = tmp_path / hashlib.sha1(TIKTOKEN_FILES["cl100k_base"][0].encode()).hexdigest()
    corrupt.write_bytes(b"not a vocabulary")
    with pytest.raises(SetupError, match="corrupt"):
        _offline_tiktoken_file("cl100k_base")
    assert corrupt.exists()  # tiktoken itself would delete it and try to download


def test_counts_are_memoized_per_counter():
    counter = TiktokenCounter("gpt-4o")
    text = "The same system text is counted every step."
    first = counter.count(text)
    hits = counter._cached.cache_info().hits
    assert counter.count(text) == first
    assert counter._cached.cache_info().hits == hits + 1
    assert TiktokenCounter("gpt-4o")._cached.cache_info().hits == 0  # no state shared between counters


def test_char_estimate_is_ceil_of_len_over_3_2():
    counter = CharEstimateCounter()
    assert [counter.count(""), counter.count("a" * 32), counter.count("a" * 33)] == [0, 10, 11]
    with pytest.raises(ConfigError):
        CharEstimateCounter(chars_per_token=0)


def test_counter_for_picks_by_backend():
    assert isinstance(counter_for("openai", "gpt-4o"), TiktokenCounter)
    assert isinstance(counter_for("anthropic", "claude-haiku-4-5"), CharEstimateCounter)
    assert isinstance(counter_for("estimate", None), CharEstimateCounter)
    local = counter_for("local", "qwen", "http://127.0.0.1:8080/v1/")
    assert isinstance(local, LlamaServerCounter)
    assert local.url == "http://127.0.0.1:8080/tokenize"
    with pytest.raises(ConfigError, match="base_url"):
        counter_for("local", "qwen")
    with pytest.raises(ConfigError, match="auto"):
        counter_for("auto", None)


def test_llama_server_counter_unreachable_is_an_llm_error():
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    counter = LlamaServerCounter(f"http://127.0.0.1:{port}/v1", timeout_s=2)
    with pytest.raises(LLMError, match=f"127.0.0.1:{port}/tokenize"):
        counter.count("hello")


# --- observation truncation -------------------------------------------------------------------


def test_truncate_lines_keeps_the_top_and_marks_the_cut():
    text = page(100)
    cut = truncate_lines(text, GPT4O, 120)
    assert GPT4O.count(cut) <= 120
    lines = cut.split("\n")
    assert lines[:-1] == text.split("\n")[: len(lines) - 1]
    assert lines[-1].startswith("[... cut to fit the context window:")
    assert f"{100 - (len(lines) - 1)} of 100 lines not shown" in lines[-1]
    assert truncate_lines(text, GPT4O, 10_000) == text


def test_truncate_lines_cuts_a_single_long_line_by_characters():
    text = "word " * 500
    cut = truncate_lines(text, GPT4O, 60)
    assert GPT4O.count(cut) <= 60
    assert cut.startswith("word word")
    assert "1 of 1 lines not shown" not in cut  # part of the line is shown


# --- fitting: order and guarantees ------------------------------------------------------------

SYSTEM = "You are a web agent. Reply with exactly one action from the list. " * 5
WORKFLOWS = [
    f"Workflow {i}: to do task family {i}, first click, then type, then submit. " * 6 for i in range(4)
]


def parts_for(history: int, lines: int) -> PromptParts:
    return PromptParts(
        system=SYSTEM,
        memory=WORKFLOWS,
        goal="Goal: book the cheapest flight to Boston",
        history=[f"Step {i}: click('{i}') -> ok" for i in range(history)],
        observation=page(lines),
    )


def sizes(parts: PromptParts) -> tuple[int, int, int]:
    """(whole request, same without history, same without history and page)."""
    whole = count_messages(
        render_messages(parts, len(parts.memory), len(parts.history), parts.observation), GPT4O
    )
    no_hist = count_messages(render_messages(parts, len(parts.memory), 0, parts.observation), GPT4O)
    no_page = count_messages(render_messages(parts, len(parts.memory), 0, ""), GPT4O)
    return whole, no_hist, no_page


def test_everything_fits_untouched():
    parts = parts_for(history=5, lines=10)
    fitted = fit_prompt(parts, GPT4O, context_window=8192, completion_tokens=256)
    assert (fitted.memory_kept, fitted.history_kept, fitted.observation_pruned, fitted.dropped) == (
        4,
        5,
        False,
        [],
    )
    assert fitted.prompt_tokens == recount(fitted.messages)
    system, user = fitted.messages
    assert system["role"] == "system" and system["content"].startswith(SYSTEM + "\n\n## Workflows\n\n")
    assert user["role"] == "user" and user["content"].startswith(parts.goal)
    assert user["content"].index("Step 4:") < user["content"].index("[0] button")  # history before page


def test_history_goes_first_oldest_first():
    parts = parts_for(history=40, lines=30)
    whole, no_hist, _ = sizes(parts)
    budget = (whole + no_hist) // 2  # some history must go, but not all
    fitted = fit_prompt(parts, GPT4O, context_window=budget + 100, completion_tokens=100)
    assert 0 < fitted.history_kept < 40
    assert not fitted.observation_pruned and fitted.memory_kept == 4
    user = fitted.messages[1]["content"]
    assert "Step 39:" in user and "Step 0:" not in user
    assert f"Step {40 - fitted.history_kept}:" in user and f"Step {39 - fitted.history_kept}:" not in user
    assert fitted.dropped == [f"history: dropped the {40 - fitted.history_kept} oldest of 40 steps"]
    assert fitted.prompt_tokens == recount(fitted.messages) <= budget
    # The fewest entries were dropped: one more would have fitted the budget no longer.
    longer = count_messages(render_messages(parts, 4, fitted.history_kept + 1, parts.observation), GPT4O)
    assert longer > budget


def test_observation_is_pruned_before_any_workflow_goes():
    parts = parts_for(history=10, lines=200)
    _, no_hist, no_page = sizes(parts)
    budget = no_page + 300  # the page (>2,000 tokens) must shrink; 300 tokens is above the floor
    fitted = fit_prompt(parts, GPT4O, context_window=budget + 50, completion_tokens=50)
    assert fitted.history_kept == 0 and fitted.observation_pruned and fitted.memory_kept == 4
    assert fitted.dropped[0] == "history: dropped the 10 oldest of 10 steps"
    assert fitted.dropped[1].startswith("observation: cut from")
    assert len(fitted.dropped) == 2
    assert fitted.prompt_tokens == recount(fitted.messages) <= budget
    assert fitted.prompt_tokens >= budget - 20  # the page got the room that was left


def test_workflows_go_least_relevant_first_and_only_when_the_page_is_at_its_floor():
    parts = parts_for(history=3, lines=200)
    _, _, no_page = sizes(parts)
    budget = no_page + 20  # not even 64 tokens of page fit with all workflows
    fitted = fit_prompt(parts, GPT4O, context_window=budget + 50, completion_tokens=50)
    assert 0 < fitted.memory_kept < 4
    system = fitted.messages[0]["content"]
    for i in range(4):
        assert (f"Workflow {i}:" in system) == (i < fitted.memory_kept)
    assert [d.split(":")[0] for d in fitted.dropped] == ["history", "observation", "memory"]
    assert fitted.prompt_tokens == recount(fitted.messages) <= budget
    page_tokens = GPT4O.count(fitted.messages[1]["content"].split("\n\n", 1)[1])
    assert page_tokens >= 64


def test_pruner_is_called_with_the_target_and_oversized_results_are_still_cut():
    parts = parts_for(history=0, lines=200)
    _, _, no_page = sizes(parts)
    targets: list[int] = []

    def keep_buttons_2x(text: str, target: int) -> str:
        targets.append(target)
        return "\n".join(line for line in text.split("\n") if int(line[1 : line.index("]")]) % 2 == 0)

    fitted = fit_prompt(
        parts, GPT4O, context_window=no_page + 400, completion_tokens=100, prune_observation=keep_buttons_2x
    )
    assert targets and targets[0] <= 300
    user = fitted.messages[1]["content"]
    assert "[2] button" in user and "[1] button" not in user  # the pruner's output was used...
    assert "lines not shown" in user  # ...and cut further, since it was still too long
    assert fitted.prompt_tokens == recount(fitted.messages) <= no_page + 300


def test_irreducible_prompt_raises_with_the_sizes():
    parts = PromptParts(system="instructions " * 9000, goal="Goal: x", observation=page(10))
    with pytest.raises(
        PromptTooLargeError, match=r"irreducible prompt is [\d,]+ tokens.*budget is 8,192 - 256 = 7,936"
    ):
        fit_prompt(parts, GPT4O, context_window=8192, completion_tokens=256)


def test_last_resort_cuts_the_page_below_the_floor():
    parts = PromptParts(
        system=SYSTEM, memory=WORKFLOWS, goal="Goal: x", history=["Step 0"], observation=page(50)
    )
    base = count_messages(render_messages(parts, 0, 0, ""), GPT4O)
    fitted = fit_prompt(parts, GPT4O, context_window=base + 40, completion_tokens=0)
    assert (fitted.memory_kept, fitted.history_kept, fitted.observation_pruned) == (0, 0, True)
    assert "below min_observation_tokens=64" in fitted.dropped[1]
    assert fitted.prompt_tokens == recount(fitted.messages) <= base + 40


# --- property: never oversized, never a spurious refusal, system and goal always kept -----------

words = st.sampled_from(
    ["click", "the", "OK", "button", "[12]", "link", "'Boston'", "é", "\n", "  ", "->", "∑"]
)
texts = st.lists(words, max_size=120).map(" ".join)
pages = st.lists(st.lists(words, max_size=15).map(" ".join), max_size=80).map("\n".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    system=texts,
    memory=st.lists(texts, max_size=5),
    goal=texts,
    history=st.lists(st.lists(words, max_size=10).map(" ".join), max_size=30),
    observation=pages,
    context_window=st.integers(min_value=0, max_value=1500),
    completion_tokens=st.integers(min_value=0, max_value=300),
    min_obs=st.integers(min_value=0, max_value=128),
    use_pruner=st.booleans(),
)
def test_fit_prompt_never_returns_an_oversized_request(
    system, memory, goal, history, observation, context_window, completion_tokens, min_obs, use_pruner
):
    parts = PromptParts(system=system, memory=memory, goal=goal, history=history, observation=observation)
    budget = context_window - completion_tokens

    def drop_every_other_line(text: str, target: int) -> str:
        return "\n".join(text.split("\n")[::2])

    try:
        fitted = fit_prompt(
            parts,
            GPT4O,
            context_window=context_window,
            completion_tokens=completion_tokens,
            prune_observation=drop_every_other_line if use_pruner else None,
            min_observation_tokens=min_obs,
        )
    except PromptTooLargeError:
        smallest_page = min((observation, truncate_lines(observation, GPT4O, 0)), key=GPT4O.count)
        assert recount(render_messages(parts, 0, 0, smallest_page)) > budget
        return
    assert fitted.prompt_tokens == recount(fitted.messages) <= budget
    system_msg, user_msg = fitted.messages
    assert system_msg["content"] == render_messages(parts, fitted.memory_kept, 0, "")[0]["content"]
    assert system_msg["content"].startswith(system)
    assert user_msg["content"].startswith(goal)
    kept = history[len(history) - fitted.history_kept :] if fitted.history_kept else []
    assert "\n".join(kept) in user_msg["content"]
    # Order: the page is cut and workflows go only once no history is left.
    if fitted.observation_pruned or fitted.memory_kept < len(memory):
        assert fitted.history_kept == 0


# --- one way to get a client's counter: LLMClient.token_counter() ------------------------------


def test_each_backend_gives_its_own_counter(tmp_path):
    from awm.config import load_settings
    from awm.llm import local_server
    from awm.llm.factory import LocalClient, LocalServerCounter, make_client

    def settings(**llm):
        return load_settings(overrides={"llm": {"cache": False, **llm}, "home": str(tmp_path)})

    openai_client = make_client(settings(backend="openai", api_key="k", model="gpt-4o"))
    counter = openai_client.token_counter()
    assert isinstance(counter, TiktokenCounter) and counter.encoding_name == "o200k_base"
    assert counter.count("hello world") == GPT4O.count("hello world")
    llama = make_client(settings(backend="openai", base_url="http://127.0.0.1:9/v1", model="m"))
    assert isinstance(llama.token_counter(), TiktokenCounter)  # an OpenAI-compatible server: tiktoken
    anthropic = make_client(settings(backend="anthropic", api_key="k"))
    assert isinstance(anthropic.token_counter(), CharEstimateCounter)
    # the response cache forwards to the client it wraps
    cached = make_client(settings(backend="openai", api_key="k", model="gpt-4o", cache=True))
    assert type(cached).__name__ == "CachedClient" and isinstance(cached.token_counter(), TiktokenCounter)
    # the embedded model: asking for a counter starts no server (a cached run never loads the model)
    fake = tmp_path / "tiny.gguf"
    fake.write_bytes(b"GGUF")
    local = make_client(settings(backend="local", local_model_path=str(fake)))
    assert isinstance(local, LocalClient)
    servers_before = dict(local_server._SERVERS)
    assert isinstance(local.token_counter(), LocalServerCounter)
    assert local_server._SERVERS == servers_before


def test_worker_client_for_a_shared_llama_server_counts_with_its_tokenizer():
    from awm.config import LLMSettings
    from awm.llm.openai_backend import OpenAICompatibleClient

    client = OpenAICompatibleClient(
        model="qwen", api_key="x", settings=LLMSettings(), base_url="http://127.0.0.1:8080/v1",
        backend="local", llama_cpp=True,
    )  # fmt: skip
    counter = client.token_counter()
    assert isinstance(counter, LlamaServerCounter) and counter.url == "http://127.0.0.1:8080/tokenize"


# --- the real local model ---------------------------------------------------------------------


@pytest.mark.llm
def test_llama_server_counter_matches_the_servers_own_prompt_count(local_llm):
    """Counts from /tokenize, plus MESSAGE_OVERHEAD/REPLY_PRIMING, equal what the server bills."""
    from awm.llm.base import ChatRequest

    counter = local_llm.token_counter()  # starts the server on the first count
    assert counter.count("hello world") == 2
    parts = PromptParts(
        system="You are a web agent. Answer with one action.",
        memory=["Workflow: search\nclick('x')"],
        goal="Goal: click the OK button",
        history=["Step 1: click('3') -> ok"],
        observation="[3] button 'OK'\n[4] button 'Cancel'",
    )
    fitted = fit_prompt(parts, counter, context_window=8192, completion_tokens=256)
    result = local_llm.chat(ChatRequest(messages=fitted.messages, max_tokens=1))
    assert result.usage.prompt_tokens <= fitted.prompt_tokens <= result.usage.prompt_tokens + 2
