"""Token counting per backend, and fitting a whole chat request into the model's context window.

Why one module: the agent builds a prompt every step from parts that grow (history) or vary (page,
workflow memory), and a request that overflows the context either fails at the server or, worse,
is silently truncated from the front -- where the fixed instructions are. `fit_prompt` measures the
*whole* request (system + memory + goal + history + observation + chat-template overhead) on the
final messages and never returns one over budget; the original AWM code fitted the prompt before
the workflow text was appended and returned an oversized prompt after 20 shrink steps.

Counters:

* `TiktokenCounter` -- OpenAI models, from the offline tiktoken cache set up by `make setup`
  (`awm.assets.configure_runtime_env()` points `TIKTOKEN_CACHE_DIR` at it); it never downloads.
* `LlamaServerCounter` -- the llama.cpp server's own tokenizer (`POST /tokenize`), exact for the
  embedded local model.
* `CharEstimateCounter` -- ``ceil(len / 3.2)``: an *estimate* (3.2 characters per token measured on
  MiniWoB++ AXTrees), used for Anthropic, whose tokenizer is not public, or as an explicit fallback.

Counts of identical strings are memoized (LRU): the same system and memory text is counted every step.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from awm.errors import ConfigError, LLMError, PromptTooLargeError, SetupError

# Chat-template tokens per message. ChatML as used by Qwen2.5 (the embedded model) wraps each message
# as `<|im_start|>` + role + `\n` + content + `<|im_end|>` + `\n`: 5 tokens. OpenAI's documented count
# is 3 per message + 1 for the role: 4. We take the larger, so the estimate errs on the safe side.
MESSAGE_OVERHEAD = 5
# Tokens that prime the reply (`<|im_start|>assistant\n` in ChatML; OpenAI documents 3 as well).
REPLY_PRIMING = 3

DEFAULT_CACHE_SIZE = 1024
CHARS_PER_TOKEN = 3.2


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that says how many tokens a text is for one model."""

    def count(self, text: str) -> int: ...


class _MemoCounter:
    """Base for counters whose count is costly: identical strings are counted once (LRU)."""

    def __init__(self, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        # Per instance, so the cache dies with the counter (no module-level state).
        self._cached = lru_cache(maxsize=cache_size)(self._count_uncached)

    def count(self, text: str) -> int:
        return self._cached(text)

    def _count_uncached(self, text: str) -> int:
        raise NotImplementedError


# --- tiktoken ----------------------------------------------------------------------------------


def _offline_tiktoken_file(name: str) -> Path:
    """Where tiktoken will look for encoding `name`; SetupError unless a verified copy is there.

    tiktoken downloads a missing file, and *deletes and re-downloads* one whose sha256 is wrong, so
    we check both before handing over: offline, either would end in a network error mid-run.
    """
    from awm.assets import TIKTOKEN_FILES, configure_runtime_env

    if name not in TIKTOKEN_FILES:
        raise SetupError(f"tiktoken encoding {name} has no offline copy (have: {', '.join(TIKTOKEN_FILES)})")
    configure_runtime_env()
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR", ""))
    url, expected = TIKTOKEN_FILES[name]
    path = Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()  # noqa: S324 - tiktoken's cache key
    if not cache_dir or not path.is_file():
        raise SetupError(
            f"tiktoken encoding {name} is not in the offline cache ({path}); run `make setup` "
            "(python -m awm.assets setup)"
        )
    if hashlib.sha256(path.read_bytes()).hexdigest() != expected:
        raise SetupError(f"tiktoken cache file {path} for {name} is corrupt; delete it and run `make setup`")
    return path


def _load_encoding(name: str):
    import tiktoken

    loaded = getattr(getattr(tiktoken, "registry", None), "ENCODINGS", {})
    if name not in loaded:  # already in memory means no file access at all
        _offline_tiktoken_file(name)
    return tiktoken.get_encoding(name)


class TiktokenCounter(_MemoCounter):
    """Exact counts for OpenAI models, from the offline tiktoken cache; never downloads.

    The encoding is chosen by model name (tiktoken's own model table). Unknown names (other
    OpenAI-compatible servers, future models) fall back to o200k_base, else cl100k_base, and set
    `exact = False`: the count is then an approximation of that model's tokenizer.
    """

    def __init__(
        self, model: str | None = None, *, encoding: str | None = None, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        super().__init__(cache_size)
        from tiktoken.model import encoding_name_for_model

        self.model = model
        name = encoding
        if name is None and model:
            try:
                # The name only: tiktoken.encoding_for_model would load (and maybe download) it.
                name = encoding_name_for_model(model)
            except KeyError:
                name = None
        candidates = ([name] if name else []) + [c for c in ("o200k_base", "cl100k_base") if c != name]
        failure: SetupError | None = None
        for candidate in candidates:
            try:
                self._encoding = _load_encoding(candidate)
                break
            except SetupError as exc:
                if candidate == encoding:
                    raise
                failure = failure or exc
        else:
            assert failure is not None
            raise failure
        self.exact = self._encoding.name == name
        self.encoding_name: str = self._encoding.name

    def _count_uncached(self, text: str) -> int:
        # Page text may contain "<|endoftext|>" literally: count it as text, never refuse it.
        return len(self._encoding.encode(text, disallowed_special=()))


# --- llama.cpp server --------------------------------------------------------------------------


def server_root(base_url: str) -> str:
    """`http://127.0.0.1:8080/v1` -> `http://127.0.0.1:8080`: /tokenize lives at the server root."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root


class LlamaServerCounter(_MemoCounter):
    """Exact counts from the llama.cpp server's own tokenizer: `POST {root}/tokenize`.

    `base_url` is the OpenAI-style URL the client uses (ending in /v1); the /v1 is stripped.
    Proxies are bypassed: the server is local, and a proxy from the environment would only break it.
    """

    def __init__(
        self, base_url: str, *, timeout_s: float = 30.0, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        super().__init__(cache_size)
        self.url = server_root(base_url) + "/tokenize"
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _count_uncached(self, text: str) -> int:
        body = json.dumps({"content": text, "add_special": False}).encode()
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                payload = json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise LLMError(
                f"llama.cpp server tokenizer at {self.url} failed: {exc}; is the server running?"
            ) from exc
        except json.JSONDecodeError as exc:
            raise LLMError(f"llama.cpp server tokenizer at {self.url} returned non-JSON: {exc}") from exc
        tokens = payload.get("tokens") if isinstance(payload, dict) else None
        if not isinstance(tokens, list):
            raise LLMError(
                f"llama.cpp server tokenizer at {self.url} returned no 'tokens' list: {str(payload)[:200]}"
            )
        return len(tokens)


# --- estimate ----------------------------------------------------------------------------------


class CharEstimateCounter:
    """An estimate, not a count: ``ceil(len(text) / chars_per_token)``.

    3.2 characters per token is what cl100k/o200k give on MiniWoB++ AXTrees; English prose runs
    nearer 4, so the estimate mostly errs high. Used for Anthropic (no public tokenizer) or when
    asked for explicitly. Cheap enough to need no cache.
    """

    exact = False

    def __init__(self, chars_per_token: float = CHARS_PER_TOKEN) -> None:
        if chars_per_token <= 0:
            raise ConfigError(f"chars_per_token must be positive, got {chars_per_token}")
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)


def counter_for(backend: str, model: str | None, base_url: str | None = None) -> TokenCounter:
    """The right counter for a resolved backend: `openai`, `local`, `anthropic`, or `estimate`.

    `local` needs the server's base URL (the client's, ending in /v1). Resolve `auto` first
    (`LLMSettings.resolved_backend()`).
    """
    if backend == "openai":
        return TiktokenCounter(model)
    if backend == "local":
        if not base_url:
            raise ConfigError("token counting for the local backend needs the llama.cpp server's base_url")
        return LlamaServerCounter(base_url)
    if backend in ("anthropic", "estimate"):
        return CharEstimateCounter()
    raise ConfigError(
        f"no token counter for backend '{backend}'; expected openai, local, anthropic or estimate "
        "(resolve 'auto' with LLMSettings.resolved_backend() first)"
    )


# --- prompt fitting ----------------------------------------------------------------------------


class PromptParts(BaseModel):
    """What one agent step wants to say, before fitting. See `fit_prompt` for what may shrink."""

    system: str  # fixed instructions (action set); never dropped
    memory: list[str] = []  # workflow texts, most relevant first; dropped from the END
    goal: str = ""  # never dropped
    history: list[str] = []  # one entry per past step, oldest first; dropped from the START
    observation: str = ""  # current page; may be pruned/truncated
    memory_header: str = "## Workflows"
    history_header: str = "## Previous steps"  # shown only when at least one step is kept


class FittedPrompt(BaseModel):
    """The request to send, its measured size, and what was given up to make it fit."""

    messages: list[dict[str, str]]  # [system: system + memory], [user: goal, history, observation]
    prompt_tokens: int  # counted over the final messages, incl. MESSAGE_OVERHEAD and REPLY_PRIMING
    memory_kept: int
    history_kept: int
    observation_pruned: bool
    dropped: list[str] = []  # human-readable log of what was shrunk, in shrink order


def render_messages(
    parts: PromptParts, memory_kept: int, history_kept: int, observation: str
) -> list[dict[str, str]]:
    """The two chat messages for a choice of kept memory (first n) and history (last n) and a page.

    Stable text first (system, then memory) so a llama.cpp prefix cache is reused across steps;
    the parts that change every step (history, page) come last.
    """
    system = parts.system
    if memory_kept > 0:
        system += f"\n\n{parts.memory_header}\n\n" + "\n\n".join(parts.memory[:memory_kept])
    sections = [parts.goal]
    if history_kept > 0:
        kept = parts.history[len(parts.history) - history_kept :]
        sections.append(parts.history_header + "\n" + "\n".join(kept))
    sections.append(observation)
    user = "\n\n".join(s for s in sections if s)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def count_messages(messages: list[dict[str, str]], counter: TokenCounter) -> int:
    """Tokens of a whole chat request: contents + MESSAGE_OVERHEAD each + REPLY_PRIMING."""
    return sum(counter.count(m["content"]) + MESSAGE_OVERHEAD for m in messages) + REPLY_PRIMING


def _cut_marker(omitted: int, total: int) -> str:
    return f"[... cut to fit the context window: {omitted} of {total} lines not shown]"


def truncate_lines(text: str, counter: TokenCounter, target: int) -> str:
    """Keep the top of `text` within `target` tokens, cutting whole lines and marking the cut.

    The marker line says how many lines were cut. If even the first line does not fit, it is cut
    by characters. At a target below the marker's own size the result is the marker alone (the
    smallest observation `fit_prompt` will send); callers re-count it.
    """
    if counter.count(text) <= target:
        return text
    lines = text.split("\n")
    total = len(lines)

    def with_lines(k: int) -> str:
        return "\n".join(lines[:k] + [_cut_marker(total - k, total)])

    lo, hi = 0, total - 1  # largest k in [0, total-1] whose cut fits; k=0 is the fallback
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(with_lines(mid)) <= target:
            lo = mid
        else:
            hi = mid - 1
    if lo > 0:
        return with_lines(lo)
    # Not even one whole line: cut the first line by characters (largest prefix that fits).
    first, marker = lines[0], _cut_marker(total - 1, total)

    def with_chars(n: int) -> str:
        return f"{first[:n]} ...\n{marker}"

    lo, hi = 0, len(first)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(with_chars(mid)) <= target:
            lo = mid
        else:
            hi = mid - 1
    return with_chars(lo) if lo > 0 else _cut_marker(total, total)


def fit_prompt(
    parts: PromptParts,
    counter: TokenCounter,
    *,
    context_window: int,
    completion_tokens: int,
    prune_observation: Callable[[str, int], str] | None = None,
    min_observation_tokens: int = 64,
) -> FittedPrompt:
    """Fit `parts` into ``context_window - completion_tokens`` tokens, measured on the final messages.

    Shrinking order (fixed; each step only when the previous ones are exhausted):

    1. history, oldest first, whole entries;
    2. the observation, down to `min_observation_tokens` (or its own size, if smaller): by
       `prune_observation(text, token_target)` if given (its result is re-counted and cut by lines
       when still over), else by keeping the top lines and marking the cut;
    3. workflows, least relevant (last) first -- after each drop the observation gets the room back,
       up to its full size;
    4. only when nothing else can go: the observation below `min_observation_tokens`, down to the
       cut marker alone.

    The system text and the goal are never touched. If the irreducible request -- system + goal +
    the smallest observation + chat overhead -- does not fit, raises `PromptTooLargeError` with the
    sizes. Every returned prompt was counted whole, so `prompt_tokens <= budget` always holds.

    Cost: each text is counted once (memoized by the counter); the history cut is estimated from
    per-entry counts and then verified on the whole request, so long histories cost a few whole
    counts, not one per entry; page truncation is a binary search (log n counts).
    """
    budget = context_window - completion_tokens
    n_mem, n_hist = len(parts.memory), len(parts.history)
    obs = parts.observation

    def measure(mem_k: int, hist_k: int, observation: str) -> tuple[list[dict[str, str]], int]:
        messages = render_messages(parts, mem_k, hist_k, observation)
        return messages, count_messages(messages, counter)

    def done(
        messages: list[dict[str, str]],
        tokens: int,
        mem_k: int,
        hist_k: int,
        observation: str,
        below_floor: bool = False,
    ) -> FittedPrompt:
        dropped = []
        if hist_k < n_hist:
            dropped.append(f"history: dropped the {n_hist - hist_k} oldest of {n_hist} steps")
        if observation != obs:
            note = f" (below min_observation_tokens={min_observation_tokens})" if below_floor else ""
            dropped.append(
                f"observation: cut from {counter.count(obs):,} to {counter.count(observation):,} tokens{note}"
            )
        if mem_k < n_mem:
            dropped.append(f"memory: dropped the {n_mem - mem_k} least relevant of {n_mem} workflows")
        return FittedPrompt(
            messages=messages,
            prompt_tokens=tokens,
            memory_kept=mem_k,
            history_kept=hist_k,
            observation_pruned=observation != obs,
            dropped=dropped,
        )

    # 0. Everything fits.
    messages, tokens = measure(n_mem, n_hist, obs)
    if tokens <= budget:
        return done(messages, tokens, n_mem, n_hist, obs)

    # 1. History, oldest first. Estimate the cut from per-entry counts (+1 for the joining newline),
    #    verify on the whole request, walk forward while over and back while the estimate overshot.
    if n_hist:
        freed = [0]
        for entry in parts.history:
            freed.append(freed[-1] + counter.count(entry) + 1)  # freed[d]: dropping the d oldest
        results: dict[int, tuple[list[dict[str, str]], int]] = {0: (messages, tokens)}

        def over_by(d: int) -> int:
            if d not in results:
                results[d] = measure(n_mem, n_hist - d, obs)
            return results[d][1] - budget

        d = 0
        while d < n_hist and over_by(d) > 0:
            want = freed[d] + over_by(d)  # total to free, by the estimate
            d = max(d + 1, min(n_hist, _first_at_least(freed, want)))
        while d > 1 and over_by(d) <= 0 and (d - 1) not in results and over_by(d - 1) <= 0:
            d -= 1
        if over_by(d) <= 0:
            messages, tokens = results[d]
            return done(messages, tokens, n_mem, n_hist - d, obs)

    # 2.-4. No history left. The observation shrinks to the floor, then workflows go, then the floor.
    full_obs_tokens = counter.count(obs)
    floor = min(full_obs_tokens, max(0, min_observation_tokens))

    def shrink(target: int) -> str:
        if counter.count(obs) <= target:
            return obs
        text = obs
        if prune_observation is not None:
            text = prune_observation(obs, target)
            if counter.count(text) <= target:
                return text
        return truncate_lines(text, counter, target)

    def fit_observation(mem_k: int, lowest: int) -> FittedPrompt | None:
        """Largest observation (>= `lowest` tokens) that fits with `mem_k` workflows, or None."""
        _, rest = measure(mem_k, 0, "")
        target = min(full_obs_tokens, budget - rest - 1)  # -1: the blank line before the page
        for _ in range(6):  # boundary effects make the whole a token or two off the parts
            if target < lowest:
                return None
            observation = shrink(max(target, 0))
            fitted_messages, fitted_tokens = measure(mem_k, 0, observation)
            if fitted_tokens <= budget:
                return done(fitted_messages, fitted_tokens, mem_k, 0, observation, below_floor=target < floor)
            target -= max(1, fitted_tokens - budget)
        return None

    for mem_k in range(n_mem, -1, -1):  # 2. (mem_k = n_mem), then 3.: the last workflow first
        fitted = fit_observation(mem_k, floor)
        if fitted is not None:
            return fitted
    fitted = fit_observation(0, -1)  # 4. nothing else can go
    if fitted is not None:
        return fitted

    # The smallest observation: the cut marker alone, or the page itself when that is shorter.
    minimal = min((obs, truncate_lines(obs, counter, 0)), key=counter.count)
    messages, irreducible = measure(0, 0, minimal)
    if irreducible <= budget:  # the search above gave up a token or two early; this is the floor
        return done(messages, irreducible, 0, 0, minimal, below_floor=minimal != obs)
    raise PromptTooLargeError(
        f"irreducible prompt is {irreducible:,} tokens (system {counter.count(parts.system):,}, "
        f"goal {counter.count(parts.goal):,}, smallest observation {counter.count(minimal):,}, "
        f"chat overhead {2 * MESSAGE_OVERHEAD + REPLY_PRIMING}); budget is {context_window:,} - "
        f"{completion_tokens:,} = {budget:,}; shorten the system prompt or goal, or raise llm.context_window"
    )


def _first_at_least(prefix: list[int], value: int) -> int:
    """Smallest index i with prefix[i] >= value (prefix is non-decreasing); len(prefix) if none."""
    return bisect.bisect_left(prefix, value)
