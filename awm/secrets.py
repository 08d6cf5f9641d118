"""Secrets an agent may type but nobody may read: a password named by a placeholder (`{password}`).

The model sees and writes only the placeholder; the executor types the value into a password field;
every text the run records (observations, prompts, feedback, errors, page HTML, trajectories, workflows,
exports) passes through `Secrets.redact`, which puts the placeholder back wherever the value appears.
A workflow learned from a login therefore keeps `{password}`, and a run folder can be shared.

Where values come from: an arena task's seeded account (`awm.sites.task.SiteTask.secrets`), or, for a
page a user names, an environment variable (`awm run --url ... --secret password=SHOP_PASSWORD`), so the
value is never on a command line or in a config file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from awm.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
M = TypeVar("M", bound=BaseModel)


def is_placeholder(value: str) -> bool:
    """Is this recorded value a secret's placeholder (`{password}`)? A run records what it typed, and
    the only typed value it records as a placeholder is a secret's (`Secrets.redact`)."""
    return _PLACEHOLDER.fullmatch(value.strip()) is not None


class Secrets:
    """Named secret values for one episode (empty: nothing is secret, every value is typed as given)."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values = {name: value for name, value in (values or {}).items() if value}
        # Longest first, so a value that contains another is replaced whole.
        self._order = sorted(self._values.items(), key=lambda item: -len(item[1]))

    def __bool__(self) -> bool:
        return bool(self._values)

    @property
    def names(self) -> list[str]:
        return sorted(self._values)

    def placeholder(self, name: str) -> str:
        return "{" + name + "}"

    def named(self, value: str) -> str | None:
        """The secret's name when `value` is exactly one placeholder of a known secret (`{password}`)."""
        match = _PLACEHOLDER.fullmatch(value.strip())
        return match.group(1) if match and match.group(1) in self._values else None

    def named_in_password_field(self, value: str) -> str | None:
        """`named`, or the secret whose bare name `value` is (`password` for `{password}`): only for a
        password field.

        Why: a small model reads "password {password}" in a goal and types the word `password`, is told
        to use the placeholder, and types the word again (the 1.5B model did, three times in one Trac
        episode). A password field here takes nothing but a named secret, on any website, so the bare
        name of one of the run's secrets can mean nothing else; any other value is still refused."""
        bare = value.strip().strip("{}").strip().lower()
        return self.named(value) or next((n for n in self._values if n.lower() == bare), None)

    def value_of(self, name: str) -> str:
        return self._values[name]

    def is_value(self, text: str) -> bool:
        """Whether `text` is exactly one secret's value (the executor's fill after the placeholder)."""
        return bool(text) and text in self._values.values()

    def redact(self, text: str) -> str:
        """`text` with every secret value replaced by its placeholder."""
        if not self._values or not text:
            return text
        for name, value in self._order:
            if value in text:
                text = text.replace(value, self.placeholder(name))
        return text

    def redact_data(self, data: Any) -> Any:
        """Every string inside `data` (dicts, lists, tuples) redacted."""
        if not self._values:
            return data
        if isinstance(data, str):
            return self.redact(data)
        if isinstance(data, dict):
            return {key: self.redact_data(value) for key, value in data.items()}
        if isinstance(data, list | tuple):
            return type(data)(self.redact_data(value) for value in data)
        return data

    def redact_model(self, model: M) -> M:
        """A copy of a pydantic model whose strings are redacted (the same model when nothing is secret)."""
        if not self._values:
            return model
        return type(model).model_validate(self.redact_data(model.model_dump()))


def secrets_from_env(
    pairs: list[str] | Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """{name: the value of its environment variable} from `NAME=ENV_VAR` pairs (`--secret
    password=SHOP_PASSWORD`) or a {name: ENV_VAR} table (`[browser.rails] secrets`); a malformed pair, a
    bad name or an unset variable is a `ConfigError` naming it."""
    env = os.environ if environ is None else environ
    items = list(pairs.items()) if isinstance(pairs, Mapping) else [p.partition("=")[::2] for p in pairs]
    values: dict[str, str] = {}
    for name, variable in items:
        name, variable = name.strip(), variable.strip()
        if not _NAME.match(name) or not variable:
            raise ConfigError(
                f"secret {name}={variable!r}: expected NAME=ENV_VAR, e.g. --secret password=SHOP_PASSWORD"
            )
        value = env.get(variable, "")
        if not value:
            raise ConfigError(f"secret {name}={variable}: the environment variable {variable} is not set or empty")
        values[name] = value
    return values
