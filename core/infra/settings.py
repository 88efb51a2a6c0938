"""Settings shared by every process: frozen sections by tier and engine (core/infra/sections.py),
read from `CHATTTS_*` environment variables (one flat name per setting, whatever its section)."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_type_hints

from pydantic import TypeAdapter, ValidationError

from core.infra.sections import (
    CallbackSettings,
    LimitSettings,
    RedisSettings,
    SchedulingSettings,
    StoreSettings,
    WebSettings,
)
from core.infra.worker_sections import (
    ChatTTSSettings,
    CheckSettings,
    EngineSettings,
    WorkerSettings,
)

ENV_PREFIX = "CHATTTS_"


@dataclass(frozen=True)
class Setting:
    """One knob (SETTINGS holds each by its variable's name, less the prefix): its section and
    its field there."""

    section: str | None  # None: one of Settings' own fields
    field: str
    hint: Any


@dataclass(frozen=True)
class Settings:
    """Every knob of the service, by section: each field is read from `CHATTTS_<ITS NAME>`
    (`Settings.of(max_batch=4)` and `replace` take the same flat names)."""

    redis: RedisSettings = field(default_factory=RedisSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    scheduling: SchedulingSettings = field(default_factory=SchedulingSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    chattts: ChatTTSSettings = field(default_factory=ChatTTSSettings)
    checks: CheckSettings = field(default_factory=CheckSettings)
    web: WebSettings = field(default_factory=WebSettings)
    callbacks: CallbackSettings = field(default_factory=CallbackSettings)
    data_dir: str = "./data"
    log_level: str = "INFO"
    # "text" for people at a terminal, "json" (one object per line) for log collectors.
    log_format: Literal["text", "json"] = "text"

    @classmethod
    def of(cls, **flat: Any) -> Settings:
        """Settings from flat names (as the variables say them: `max_batch`, `engine`)."""
        return cls().replace(**flat)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from the environment, then apply explicit overrides (command line)."""
        values = _convert(os.environ if env is None else env)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.of(**values)

    def replace(self, **flat: Any) -> Settings:
        """A copy with the settings `flat` names changed (TypeError for an unknown name)."""
        unknown = set(flat) - set(SETTINGS)
        if unknown:
            raise TypeError(f"no such setting: {', '.join(sorted(unknown))}")
        changes: dict[str, dict[str, Any]] = {}
        own: dict[str, Any] = {}
        for name, value in flat.items():
            setting = SETTINGS[name]
            if setting.section is None:
                own[setting.field] = value
            else:
                changes.setdefault(setting.section, {})[setting.field] = value
        for section, values in changes.items():
            own[section] = dataclasses.replace(getattr(self, section), **values)
        return dataclasses.replace(self, **own)

    def value(self, name: str) -> Any:
        """The setting a flat name says (`max_batch`: engine.max_batch)."""
        setting = SETTINGS[name]
        holder = self if setting.section is None else getattr(self, setting.section)
        return getattr(holder, setting.field)

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces these settings in a child process."""
        out: dict[str, str] = {}
        for name in SETTINGS:
            value = self.value(name)
            if value is None:
                continue
            out[ENV_PREFIX + name.upper()] = (
                ("1" if value else "0") if isinstance(value, bool) else str(value)
            )
        return out


def _settings() -> dict[str, Setting]:
    """Every section's fields (a dataclass field of Settings is a section), then its own."""
    out: dict[str, Setting] = {}
    hints = get_type_hints(Settings)
    for section in fields(Settings):
        kind = hints[section.name]
        if not dataclasses.is_dataclass(kind):
            out[section.name] = Setting(None, section.name, kind)
            continue
        section_hints = get_type_hints(kind)
        for f in fields(kind):
            name = f.metadata.get("env", f.name.upper()).lower()
            out[name] = Setting(section.name, f.name, section_hints[f.name])
    return out


# Every setting by its flat name: CHATTTS_<NAME> is its variable.
SETTINGS = _settings()


def _convert(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings `env` names, converted and validated by pydantic (lax mode: "8000" is an
    int, "yes" a bool). An empty value is None for a field that may be None, False for a flag.

    Not pydantic-settings: its sources read the process environment whenever a Settings is
    built, so that every `Settings(...)` in code and tests, and every child process, would take
    the caller's environment too; we read one explicit mapping (a child's environment, a test's).
    """
    values: dict[str, Any] = {}
    for name, setting in SETTINGS.items():
        variable = ENV_PREFIX + name.upper()
        raw = env.get(variable)
        if raw is None and name == "redis_url":
            variable, raw = "REDIS_URL", env.get("REDIS_URL")  # the name every Redis tool knows
        if raw is None:
            continue
        hint, text = setting.hint, raw.strip()
        if text == "" and "None" in str(hint):
            values[name] = None
            continue
        try:
            value = (text or "0") if hint is bool else text
            values[name] = TypeAdapter(hint).validate_python(value)
        except ValidationError:
            kind = getattr(hint, "__name__", str(hint))
            raise ValueError(f"{variable}={raw!r} is not a valid {kind}") from None
        if isinstance(values[name], float) and not math.isfinite(values[name]):
            # pydantic reads "nan" and "inf" as floats: no rate, share or time means either.
            raise ValueError(f"{variable}={raw!r} is not a finite number")
    return values
