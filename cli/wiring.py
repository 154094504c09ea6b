"""Wires concrete parts together from settings: a backend, a toolbox, a loop, a session."""

from __future__ import annotations

import datetime as dt
import os
import secrets
from collections.abc import Callable, Iterator
from typing import Any

from agent.backend import Backend
from agent.compaction import CompactionPolicy, Compactor
from agent.errors import UserError
from agent.events import Event
from agent.loop import AgentLoop, Decoding, LoopLimits
from agent.messages import Message
from agent.plugins import collect, plugin_manager
from agent.progress import GuardLimits
from agent.prompts import load_prompt
from agent.run_context import RunContext
from agent.runs import TracedRuns
from agent.session import Session, check_session_name
from agent.shots import ShotPicker, load_library
from agent.tool_selection import LexicalToolSelector
from agent.tools import Toolbox
from cli.budgets import budget_limits
from cli.config import Settings, SmallModelSettings
from sandbox.secrets import Redactor, find_secrets
from skills.context import SkillContext
from skills.guard import Approver
from skills.memory.config import MemorySettings
from skills.memory.prompt import MemoryPrompt
from skills.memory.tools import NOT_FOR_SMALL_MODELS, SMALL_MODEL_CUES
from skills.reader import READER_TOOL
from skills.simple import ANSWER_TOOL
from skills.simple_command import COMMAND_TOOL
from skills.toolbox import LiveToolbox, build_toolbox

SUMMARY_PROMPT = "compact"
# The context assumed for a backend that does not report one (an OpenAI-compatible server).
FALLBACK_CONTEXT = 8192


def backend_factories() -> dict[str, Any]:
    """Every registered backend factory, built-in and plugin, by name."""
    return collect(plugin_manager(groups=("clawloop.backends",)), "register_backends")


def build_backend(settings: Settings, extra: dict[str, Any] | None = None) -> Backend:
    """The backend named in settings, built with its options."""
    factories = backend_factories()
    factory = factories.get(settings.backend)
    if factory is None:
        known = ", ".join(sorted(factories)) or "(none: is clawloop installed?)"
        raise UserError(f"unknown backend {settings.backend!r}: choose one of {known}")
    options = {**settings.backend_options(), **(extra or {})}
    backend: Backend = factory(**options)
    return backend


def skill_context(settings: Settings, backend: Backend | None = None) -> SkillContext:
    """The skills' context for a run in the settings' workspace, checked before any model call.

    ``backend`` is the run's model, handed to the tools that ask it questions of their own (the
    quarantined reader); without it they say they cannot run.
    """
    workspace = settings.workspace.expanduser().resolve()
    if not workspace.is_dir():
        raise UserError(
            f"workspace {workspace} is not a folder: pass --workspace with an existing folder"
        )
    if settings.sandbox.mode != "read-only" and not os.access(workspace, os.W_OK):
        raise UserError(
            f"workspace {workspace} is not writable: pass --workspace with a folder you "
            "can write to, or use --mode read-only"
        )
    context = SkillContext.from_settings(
        settings.model_copy(update={"workspace": workspace, "memory": memory_settings(settings)})
    )
    context.backend = backend
    return context


def settings_toolbox(
    settings: Settings,
    approver: Approver | None,
    watch: Callable[[str], None] | None = None,
    backend: Backend | None = None,
) -> Toolbox:
    """:func:`skills.toolbox.build_toolbox` for the settings: their workspace, skills and
    config file (where "always" answers are saved); ``watch`` and ``backend`` as there and in
    :func:`skill_context`."""
    return build_toolbox(
        skill_context(settings, backend),
        approver,
        settings.skill_names,
        save_rule=_save_allow_rule(settings),
        watch=watch,
    )


def system_prompt(text: str, toolbox: Toolbox) -> str:
    """The prompt's text, with the instruction skills listed by name and description only."""
    from skills.library import catalog_text

    prompt = text
    skillset = getattr(toolbox, "skillset", None)
    skills = skillset.skills_with_instructions() if skillset is not None else {}
    if skills:
        prompt += "\n\nSkills (read one with skill_read before using it):\n" + catalog_text(skills)
    return prompt


def memory_settings(settings: Settings) -> MemorySettings:
    """``[memory]`` with what is left unset decided by the profile: the small model's memory
    tools take the user's own words (skills/memory/user_words.py)."""
    if settings.memory.user_words is not None:
        return settings.memory
    return settings.memory.model_copy(update={"user_words": settings.small_model})


def memory_prompt(settings: Settings) -> str:
    """The bounded part of memory every system prompt ends with ("" when off or empty)."""
    refresher = memory_refresher(settings)
    return refresher.block() if refresher is not None else ""


def with_memory(prompt: str | None, settings: Settings) -> str | None:
    """``prompt`` carrying the memory as it is now, in place of the memory it carried."""
    from skills.memory.recall import with_block

    return None if prompt is None else with_block(prompt, memory_prompt(settings))


def memory_refresher(settings: Settings) -> MemoryPrompt | None:
    """What keeps a long session's memory current: each request's system prompt gets the
    memory as it is then (None when memory is off). A session's stored prompt keeps the block
    it started with; while memory does not change, the request and the model's cached prefix
    stay the same from turn to turn, and a change costs one new prefill."""
    if not settings.memory.enabled or not settings.memory.prompt_chars:
        return None
    from skills.memory.tools import memory_folder

    return MemoryPrompt(
        memory_folder(settings.data_dir, settings.memory), settings.memory.prompt_chars
    )


def _save_allow_rule(settings: Settings) -> Any:
    from cli.config import add_rule

    def save(rule: str) -> None:
        add_rule("allow", rule, settings.config_path)

    return save


def _shot_picker(small: SmallModelSettings, fallback: list[Message]) -> ShotPicker | None:
    """Worked examples chosen per task (``[small] shots``), or None for the prompt's own."""
    if not small.shots:
        return None
    never = [*NOT_FOR_SMALL_MODELS, *([] if small.command_tool else [COMMAND_TOOL])]
    library = load_library(small.shot_library)
    return ShotPicker(
        library,
        small.shots,
        fallback=fallback,
        exclude=frozenset(never),
        leave_out=frozenset(small.shot_leave_out),
    )


def _recipe_names(small: SmallModelSettings) -> list[str]:
    """The recipe tools, ranked behind the narrow ones (loaded only when recipes are on)."""
    if not small.recipes:
        return []
    from skills.recipes.tools import recipe_names

    return recipe_names(small.recipe_file)


def build_loop(settings: Settings, backend: Backend, toolbox: Toolbox) -> AgentLoop:
    """The agent loop with the settings' limits and decoding."""
    d = settings.decoding
    prompt = load_prompt(settings.prompt_name)
    small = (
        settings.small
        if settings.small_model
        else SmallModelSettings(answer_tool=False, select_tools=0, grounded_calls=False)
    )
    loop = AgentLoop(
        backend=backend,
        toolbox=toolbox,
        system_prompt=with_memory(system_prompt(prompt.text, toolbox), settings),
        prompt_label=prompt.label,
        examples=prompt.examples,
        pick_examples=_shot_picker(small, prompt.examples),
        answer_tool=ANSWER_TOOL if small.answer_tool and toolbox.get(ANSWER_TOOL) else None,
        select_tools=(
            LexicalToolSelector(
                small.select_tools,
                always=[ANSWER_TOOL],
                general=[COMMAND_TOOL] if small.command_tool else [],
                never=[*NOT_FOR_SMALL_MODELS, *([] if small.command_tool else [COMMAND_TOOL])],
                look_first=small.look_first,
                cued=SMALL_MODEL_CUES,
                alone=list(SMALL_MODEL_CUES),
                secondary=_recipe_names(small),
                secondary_weight=small.recipe_weight,
                secondary_slots=small.recipe_slots,
                beside=small.recipes_beside,
                steps=small.step_tools,
            )
            if small.select_tools
            else None
        ),
        repeat_guard=small.repeat_guard,
        grounded_calls=small.grounded_calls,
        guards=_guard_limits(settings),
        limits=LoopLimits(
            max_steps=settings.max_steps,
            time_budget_s=settings.time_budget,
            tool_timeout_s=settings.tool_timeout,
        ),
        decoding=Decoding(
            temperature=d.temperature,
            top_p=d.top_p,
            top_k=d.top_k,
            max_tokens=d.max_tokens,
            seed=d.seed,
        ),
        compactor=build_compactor(settings, backend),
        refresh_system=memory_refresher(settings),
        untrusted_by_reference=settings.sandbox.dataflow.untrusted_results == "reference",
        reader_tool=READER_TOOL if toolbox.get(READER_TOOL) is not None else None,
    )
    if isinstance(toolbox, LiveToolbox):
        # After a reload, new sessions get the new skills list in their system prompt.
        toolbox.listeners.append(
            lambda: setattr(
                loop, "system_prompt", with_memory(system_prompt(prompt.text, toolbox), settings)
            )
        )
    return loop


def _guard_limits(settings: Settings) -> GuardLimits | None:
    g = settings.guards
    if not settings.guards_on:
        return None
    return GuardLimits(g.repeated_call, g.repeated_error, g.alternation, g.warn_first)


def build_compactor(settings: Settings, backend: Backend) -> Compactor | None:
    """The compactor the settings ask for, sized to the backend's context (None: off)."""
    c = settings.compaction
    if not c.enabled:
        return None
    context = c.context_tokens or getattr(backend, "context_tokens", None) or FALLBACK_CONTEXT
    method = (
        c.summary if c.summary != "auto" else ("extractive" if settings.small_model else "model")
    )
    policy = CompactionPolicy(
        budget_tokens=int(context * c.share),
        keep_turns=c.keep_turns,
        method=method,
        summary_chars=c.summary_chars,
    )
    return Compactor(policy, backend, load_prompt(SUMMARY_PROMPT))


def open_session(settings: Settings, name: str | None) -> tuple[str, Session]:
    """The named session (continued if it exists), or a new one with a fresh name."""
    if name is None:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        name = f"{stamp}-{secrets.token_hex(2)}"
    check_session_name(name)
    path = settings.sessions_dir / f"{name}.jsonl"
    try:
        settings.sessions_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot create the sessions folder {settings.sessions_dir}: {exc.strerror} "
            "(set CLAWLOOP_DATA_DIR to a writable folder)"
        ) from None
    return name, Session.open(path)


def redactor(settings: Settings) -> Redactor:
    """Removes every configured secret and credential variable from text."""
    return Redactor(find_secrets(settings.model_dump(), os.environ))


def traced_runs(settings: Settings, loop: AgentLoop) -> TracedRuns:
    """What starts the settings' traced runs of ``loop``: the traces folder, the redaction of
    every secret, the token budgets, the memory a new session starts with, and what the
    trace's first line says about the setting (workspace, profile, adapter, prices)."""
    backend = getattr(loop.backend, "name", settings.backend)
    prices = settings.usage.prices_for(backend, settings.backend_options().get("model"))
    option = settings.backend_options().get("adapter")
    return TracedRuns(
        loop,
        settings.traces_dir,
        backend,
        settings.model,
        redact=redactor(settings).redact,
        budgets=budget_limits(settings),
        fresh_prompt=memory_refresher(settings),
        details={
            "workspace": str(settings.workspace),
            "profile": "small" if settings.small_model else "standard",
            "adapter": None if option is None else str(option),
            "prices": prices.model_dump(exclude_none=True) if prices is not None else None,
        },
    )


def run_traced(
    settings: Settings,
    loop: AgentLoop,
    session: Session,
    task: str,
    extra: dict[str, Any] | None = None,
    context: RunContext | None = None,
) -> Iterator[Event]:
    """``loop.run`` with its trace written to the traces folder as it goes (:class:`TracedRuns`)."""
    return traced_runs(settings, loop).run(session, task, extra, context)
