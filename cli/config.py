"""Settings: defaults, then the TOML config file, then CLAWLOOP_* variables, then flags.

The config file lives in the user config folder (``agent config path`` prints it); every
important option also has an environment variable, listed in ``ENV_VARS``.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.errors import ConfigError
from connectors.cron.settings import CronSettings
from connectors.settings import ConnectorsSettings, GatewaySettings
from sandbox.settings import SandboxSettings
from skills.mail.config import MailSettings
from skills.mcp.config import McpServer
from skills.memory.config import MemorySettings
from skills.web.config import WebSettings

APP = "clawloop"


class DecodingSettings(BaseModel):
    """Decoding settings sent with every request (unset = the backend's default)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(default=0.0, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=1024, ge=1)
    seed: int | None = None


class BackendOptions(BaseModel):
    """Options for one backend, passed to its factory as keyword arguments."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    device: str | None = None


class SmallModelSettings(BaseModel):
    """What the small-model profile does for the model; each part is measured on a suite."""

    model_config = ConfigDict(extra="forbid")

    answer_tool: bool = True  # every reply is a tool call; `answer` is the final one
    select_tools: int = Field(default=2, ge=0)  # offer only the best-matching N tools (0: all)
    # a request of several steps ("copy ..., then replace ...") keeps each step's best tool
    # beside the N (agent/tool_selection.py)
    step_tools: bool = True
    repeat_guard: bool = True  # a repeated call is not run again; the answer tool comes next
    look_first: bool = True  # a task that matches a tool starts with a tool, not the answer
    # a call whose short values appear nowhere in the conversation is not run; the model is
    # offered only the answer next (agent/grounding.py)
    grounded_calls: bool = True
    # offer run_command beside the narrow tools whenever one matches, with the prompt that shows
    # it (small-command); off by default until an adapter trained for it wins (docs/flywheel.md)
    command_tool: bool = False
    # worked examples chosen per task from a library of solved tasks (agent/shots.py), in place
    # of the prompt's fixed ones: how many (0: the prompt's own), and the library (a JSONL
    # path; unset: the bundled one)
    shots: int = Field(default=0, ge=0, le=8)
    shot_library: str | None = None
    # families whose solved tasks are never shown (gold runs for training add the task's own)
    shot_leave_out: list[str] = Field(default_factory=list)
    # command recipes (skills/recipes/): everyday shell work as tools with plain arguments,
    # offered beside the narrow tools; recipe_file adds the user's own recipes (TOML)
    recipes: bool = True
    recipe_file: str | None = None
    # how a recipe is offered (agent/tool_selection.py): the share of its score that must still
    # match the best narrow tool, how many may come, and whether they come beside the narrow
    # tools' N or in their place
    recipe_weight: float = Field(default=0.6, gt=0, le=2)
    recipe_slots: int = Field(default=1, ge=0, le=4)
    recipes_beside: bool = False


class GuardSettings(BaseModel):
    """Loop guards: stop a run that keeps doing the same thing (see docs/assistant.md)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = None  # unset: on for the small-model profile, off for the others
    repeated_call: int = Field(default=3, ge=0)  # the same call, the same result (0: off)
    repeated_error: int = Field(default=3, ge=0)  # the same error, whatever the call
    alternation: int = Field(default=3, ge=0)  # A B A B A: the first call made this many times
    warn_first: bool = True  # one step before a limit, the observation says so

    @field_validator("repeated_call", "repeated_error", "alternation")
    @classmethod
    def _not_one(cls, value: int) -> int:
        if value == 1:
            raise ValueError("must be 0 (off) or at least 2: 1 would stop at the first call")
        return value


class Prices(BaseModel):
    """What a model's tokens cost, per million (unset: not counted)."""

    model_config = ConfigDict(extra="forbid")

    price_prompt_per_mtok: float | None = Field(default=None, ge=0)
    price_completion_per_mtok: float | None = Field(default=None, ge=0)
    # Prompt tokens the server had cached, where it charges less (unset: the prompt price).
    price_cached_per_mtok: float | None = Field(default=None, ge=0)

    def given(self) -> bool:
        return self.price_prompt_per_mtok is not None or self.price_completion_per_mtok is not None


class UsageSettings(Prices):
    """Token prices for `agent usage`: these, or a model's or backend's own table."""

    # [usage.models."gpt-4o-mini"] or [usage.models.openai]: prices for one model or backend.
    models: dict[str, Prices] = Field(default_factory=dict)

    def prices_for(self, backend: str | None, model: str | None) -> Prices | None:
        """The prices of ``model`` on ``backend``: its own table, the backend's, else these."""
        for name in (model, backend):
            if name and name in self.models:
                return self.models[name]
        return self if self.given() else None


class BudgetSettings(BaseModel):
    """Token limits (prompt plus completion), checked before each model call (unset: none)."""

    model_config = ConfigDict(extra="forbid")

    run_tokens: int | None = Field(default=None, ge=1)
    day_tokens: int | None = Field(default=None, ge=1)  # all runs since local midnight
    chat_day_tokens: int | None = Field(default=None, ge=1)  # each gateway chat, since midnight


class CompactionSettings(BaseModel):
    """When a conversation's older turns are replaced by a summary (docs/assistant.md)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # Compact when the next request would pass this share of the model's context.
    share: float = Field(default=0.75, gt=0.0, le=0.95)
    # The model's context in tokens (unset: what the backend reports, else 8192).
    context_tokens: int | None = Field(default=None, ge=512)
    keep_turns: int = Field(default=2, ge=1)  # the latest user turns, always kept whole
    # Who writes the summary: "model", "extractive" (no model call), or "auto": extractive for
    # the small-model profile, whose own summaries lose facts, and the model otherwise.
    summary: Literal["auto", "model", "extractive"] = "auto"
    summary_chars: int = Field(default=2400, ge=200)


class Settings(BaseModel):
    """Everything a run needs to know, validated."""

    model_config = ConfigDict(extra="forbid")

    backend: str = "llamacpp"
    model: str | None = None
    # A GGUF LoRA adapter for the local backends ("none": no adapter).
    adapter: str | None = None
    # "small": the narrow `simple` tools, an answer tool and the small prompt, for the embedded
    # 135M model; "standard": shell and files with free-form answers. "auto" picks "small"
    # for the bundled model and "standard" for any other.
    profile: Literal["auto", "small", "standard"] = "auto"
    prompt: str | None = None
    small: SmallModelSettings = Field(default_factory=SmallModelSettings)
    guards: GuardSettings = Field(default_factory=GuardSettings)
    usage: UsageSettings = Field(default_factory=UsageSettings)
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)

    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    workspace: Path = Field(default_factory=Path.cwd)
    max_steps: int = Field(default=12, ge=1)
    time_budget: float | None = Field(default=None, gt=0)
    tool_timeout: float = Field(default=300.0, gt=0)
    approval_timeout: float = Field(default=600.0, gt=0)
    skills: list[str] | None = None
    skills_dir: Path | None = None
    mail: MailSettings = Field(default_factory=MailSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    mcp: dict[str, McpServer] = Field(default_factory=dict)
    decoding: DecodingSettings = Field(default_factory=DecodingSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    backends: dict[str, BackendOptions] = Field(default_factory=dict)
    connectors: ConnectorsSettings = Field(default_factory=ConnectorsSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    cron: CronSettings = Field(default_factory=CronSettings)
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir(APP)))
    config_path: Path | None = None
    # Terminal control sequences in output are shown (as ^[) unless this is set (or --raw).
    raw_output: bool = False
    # [memory]: the memory skill and the share of memory every system prompt carries.
    memory: MemorySettings = Field(default_factory=MemorySettings)

    @property
    def small_model(self) -> bool:
        """Whether the small-model profile is in effect."""
        if self.profile != "auto":
            return self.profile == "small"
        own = self.backends.get(self.backend, BackendOptions()).model
        return self.backend in {"llamacpp", "engine"} and not (self.model or own)

    @property
    def guards_on(self) -> bool:
        """Whether the loop guards watch runs: as set, else with the small-model profile."""
        return self.guards.enabled if self.guards.enabled is not None else self.small_model

    @property
    def prompt_name(self) -> str:
        """The prompt in effect: the configured one, else the profile's."""
        if self.prompt:
            return self.prompt
        if not self.small_model:
            return "default"
        return "small-command" if self.small.command_tool else "small-shots"

    @property
    def skill_names(self) -> list[str] | None:
        """The skills in effect: the configured list, else the profile's (None: the defaults)."""
        if self.skills is not None:
            return self.skills
        if not self.small_model:
            return None
        names = ["simple", *(["recipes"] if self.small.recipes else [])]
        return [*names, "memory"] if self.memory.enabled else names

    @property
    def sessions_dir(self) -> Path:
        return self.data_dir / "sessions"

    @property
    def traces_dir(self) -> Path:
        return self.data_dir / "traces"

    @property
    def skills_path(self) -> Path:
        """The folder installed skills live in (``skills_dir``, else ``skills`` in data_dir)."""
        return self.skills_dir or self.data_dir / "skills"

    @property
    def audit_path(self) -> Path:
        return self.data_dir / "audit.jsonl"

    def backend_options(self) -> dict[str, Any]:
        """The keyword options for the chosen backend: its table, with ``model`` filled in."""
        opts = self.backends.get(self.backend, BackendOptions()).model_dump(exclude_none=True)
        if self.model is not None:
            opts["model"] = self.model
        if self.adapter is not None:
            opts["adapter"] = self.adapter
        return opts


# Environment variables, each mapped to a dotted settings key.
ENV_VARS: dict[str, str] = {
    "CLAWLOOP_BACKEND": "backend",
    "CLAWLOOP_MODEL": "model",
    "CLAWLOOP_ADAPTER": "adapter",
    "CLAWLOOP_PROMPT": "prompt",
    "CLAWLOOP_PROFILE": "profile",
    "CLAWLOOP_WORKSPACE": "workspace",
    "CLAWLOOP_MAX_STEPS": "max_steps",
    "CLAWLOOP_TIME_BUDGET": "time_budget",
    "CLAWLOOP_TOOL_TIMEOUT": "tool_timeout",
    "CLAWLOOP_APPROVAL_TIMEOUT": "approval_timeout",
    "CLAWLOOP_SKILLS": "skills",
    "CLAWLOOP_TEMPERATURE": "decoding.temperature",
    "CLAWLOOP_MAX_TOKENS": "decoding.max_tokens",
    "CLAWLOOP_SEED": "decoding.seed",
    "CLAWLOOP_SANDBOX_MODE": "sandbox.mode",
    "CLAWLOOP_SANDBOX": "sandbox.backend",
    "CLAWLOOP_DATA_DIR": "data_dir",
    "CLAWLOOP_TELEGRAM_TOKEN": "connectors.telegram.token",
    "CLAWLOOP_DISCORD_TOKEN": "connectors.discord.token",
}


def config_path() -> Path:
    """The config file: ``$CLAWLOOP_CONFIG`` or ``config.toml`` in the user config folder."""
    explicit = os.environ.get("CLAWLOOP_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    return Path(platformdirs.user_config_dir(APP)) / "config.toml"


def load_settings(overrides: dict[str, Any] | None = None, path: Path | None = None) -> Settings:
    """Merge defaults, the config file, the environment and ``overrides`` (dotted keys)."""
    path = path or config_path()
    text = _read(path)
    data = _parse_toml(text, path)
    for var, key in ENV_VARS.items():
        value = os.environ.get(var)
        if value not in (None, ""):
            _set(data, key, value.split(",") if key == "skills" else value)
    for key, value in (overrides or {}).items():
        if value is not None:
            _set(data, key, value)
    data.setdefault("config_path", str(path))
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise _config_error(exc, path, text) from None


def add_rule(kind: str, pattern: str, path: Path | None = None) -> Path:
    """Append a sandbox rule (``allow``, ``ask`` or ``deny``) to the config file and return it."""
    if kind not in ("allow", "ask", "deny"):
        raise ValueError(f"unknown rule kind {kind!r}")
    path = path or config_path()
    text = _read(path)
    data = _parse_toml(text, path)
    rules = list(data.get("sandbox", {}).get(kind, []))
    if pattern not in rules:
        rules.append(pattern)
    _set(data, f"sandbox.{kind}", rules)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_toml(data), encoding="utf-8")
    return path


def dump_toml(data: dict[str, Any], prefix: str = "") -> str:
    """A small TOML writer for the config file's shapes (scalars, lists, nested tables)."""
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars]
    out = "\n".join(lines) + ("\n" if lines else "")
    for key, table in tables:
        name = f"{prefix}{_toml_key(key)}"
        body = dump_toml(table, name + ".")
        out += (
            f"\n[{name}]\n{body}" if any(not isinstance(v, dict) for v in table.values()) else body
        )
    return out


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def _config_error(exc: ValidationError, path: Path, text: str) -> ConfigError:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    key = ".".join(loc)
    line = _line_of(text, loc[-1]) if loc else None
    where = f"{path}, line {line}" if line else str(path)
    env = next((var for var, k in ENV_VARS.items() if k == key and os.environ.get(var)), None)
    if env:
        where = f"environment variable {env}"
    hint = "" if err["type"] != "extra_forbidden" else " (unknown key: check the spelling)"
    return ConfigError(f"invalid setting {key!r} in {where}: {err['msg']}{hint}")


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number, raw in enumerate(text.splitlines(), start=1):
        if pattern.match(raw):
            return number
    return None
