"""The one policy factory: the policy of one episode from its task and the memory view the driver chose.

Why one: `awm run`, the pipeline's stages and every worker process build policies here, so the LLM
agent always gets the same settings (`[agent]`: grammar, prompt order, role-aware ids, guidance) whichever
command started the run. Picklable: the client is dropped when pickled and rebuilt in the worker (or
pointed at the driver's embedded llama.cpp server, `shared_base_url`, so N workers share one model).
"""

from __future__ import annotations

from typing import Any, Literal

from awm.config import Settings
from awm.errors import ConfigError
from awm.llm.base import LLMClient
from awm.memory.view import MemoryView
from awm.trajectory import Task
from awm.webarena.harness import Policy

PolicyKind = Literal["llm", "scripted"]


class PolicyFactory:
    """`factory(task, view)` -> the policy of one episode."""

    def __init__(
        self,
        settings: Settings,
        kind: PolicyKind = "llm",
        *,
        client: LLMClient | None = None,
        shared_base_url: str | None = None,
    ) -> None:
        if kind not in ("llm", "scripted"):
            raise ConfigError(f"policy must be llm or scripted (got '{kind}')")
        self.settings = settings
        self.kind = kind
        self.shared_base_url = shared_base_url
        self._client = client
        self._counter: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"], state["_counter"] = None, None
        return state

    def describe(self) -> dict[str, Any]:
        """What changes results (it goes into the run's config)."""
        return {"policy": self.kind, **(self.settings.agent.model_dump() if self.kind == "llm" else {})}

    @property
    def client(self) -> LLMClient:
        """The actor's client, built once per process."""
        if self._client is None:
            if self.shared_base_url:
                self._client = client_for_url(self.settings, self.shared_base_url)
            else:
                from awm.llm.factory import make_client

                self._client = make_client(self.settings)
        return self._client

    def for_workers(self) -> PolicyFactory:
        """A copy for worker processes: with the embedded model, its server is started here once (with
        the settings' `local_slots`) and every worker talks to it instead of loading its own."""
        if self.kind != "llm" or self.settings.llm.resolved_backend() != "local" or self.shared_base_url:
            return self
        from awm.llm.factory import local_server_url

        url = local_server_url(self.client)
        return PolicyFactory(self.settings, self.kind, shared_base_url=url) if url else self

    def __call__(self, task: Task, view: MemoryView | None) -> Policy:
        if self.kind == "scripted":
            from awm.webarena.policies import MiniWobScriptedPolicy

            check_policy_tasks("scripted", [task])
            if task.benchmark == "sites":
                return demonstration_policy(task)
            return MiniWobScriptedPolicy(memory=view)
        from awm.webarena.agent import LLMAgent

        client = self.client
        if self._counter is None:
            self._counter = client.token_counter()
        agent = self.settings.agent
        return LLMAgent(
            client,
            self._counter,
            settings=self.settings,
            memory=view,
            use_grammar=agent.use_grammar,
            prompt_order=agent.prompt_order,
            role_aware=agent.role_aware,
            target_first=agent.target_first,
            thought=agent.thought,
            guidance=agent.guidance,
            guidance_off=agent.guidance_off,
            answer_check=agent.answer_check,
        )


def demonstration_policy(task: Task) -> Policy:
    """The scripted policy of an arena task: its instance's demonstration, replayed as one workflow
    call with the instance's values (no model)."""
    from awm.webarena.policies import ReplayPolicy

    workflow, values = _demonstration(task)
    return ReplayPolicy(workflow, values, scope=task.scope)


def _demonstration(task: Task) -> tuple[Any, dict[str, str]]:
    """An arena task's demonstration and its values; a `ConfigError` when the instance has none."""
    from pathlib import Path

    from awm.sites.templates import load_templates

    files = (task.meta.get("task_kwargs") or {}).get("task_files") or []
    template = load_templates([Path(f) for f in files])[task.task_id.removeprefix("browsergym/sites.")]
    number = int(task.seed or 0)
    workflow = template.demonstration(number)
    if workflow is None:
        train = ", ".join(str(n) for n in template.numbers("train"))
        raise ConfigError(
            f"policy 'scripted' replays an arena task's demonstration, and {task.key} has none "
            f"(the train instances have one: {train})"
        )
    return workflow, template.values(number)


def check_policy_tasks(kind: PolicyKind, tasks: list[Task]) -> None:
    """Fail before any browser starts when the scripted policy cannot solve a task of the stream."""
    if kind != "scripted":
        return
    from awm.webarena.policies import MiniWobScriptedPolicy

    for task in tasks:
        if task.benchmark == "sites":
            _demonstration(task)
            continue
        name = task.task_id.rsplit(".", 1)[-1]
        if task.benchmark != "miniwob" or name not in MiniWobScriptedPolicy.TASKS:
            raise ConfigError(
                f"policy 'scripted' knows only MiniWoB {', '.join(MiniWobScriptedPolicy.TASKS)} "
                f"(got {task.task_id})"
            )


def client_for_url(settings: Settings, base_url: str) -> LLMClient:
    """A client for a llama.cpp server another process started (for worker processes)."""
    from awm.llm.cache import CachedClient, ResponseCache
    from awm.llm.openai_backend import OpenAICompatibleClient

    client: LLMClient = OpenAICompatibleClient(
        model=settings.model_file.stem,
        api_key="not-needed",
        settings=settings.llm,
        base_url=base_url,
        backend="local",
        llama_cpp=True,
    )
    return CachedClient(client, ResponseCache(settings.cache_db)) if settings.llm.cache else client
