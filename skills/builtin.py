"""The built-in skills, registered through the same hook a third-party plugin uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agent.plugins import hookimpl
from skills.default_rules import FILES_RULES, MAIL_RULES, SHELL_RULES, SIMPLE_RULES
from skills.files import make_files_tools
from skills.memory.tools import MEMORY_CONSEQUENTIAL, MEMORY_RULES, make_memory_tools
from skills.reader import READER_RULES, make_reader_tools
from skills.shell import make_shell_tools
from skills.simple import make_simple_tools
from skills.skill import Skill

if TYPE_CHECKING:
    from agent.tools import Tool
    from skills.context import SkillContext


# The mail and web tools (and their protocol modules) are imported when the skill starts, so a
# run with neither skill, such as the small-model profile's, does not load them.
def make_mail_tools(context: SkillContext) -> list[Tool]:
    """:func:`skills.mail.tools.make_mail_tools`."""
    from skills.mail.tools import make_mail_tools as make

    return make(context)


def make_recipe_tools(context: SkillContext) -> list[Tool]:
    """:func:`skills.recipes.tools.make_recipe_tools`."""
    from skills.recipes.tools import make_recipe_tools as make

    return make(context)


def make_web_tools(context: SkillContext) -> list[Tool]:
    """:func:`skills.web.tools.make_web_tools`."""
    from skills.web.tools import make_web_tools as make

    return make(context)


@hookimpl
def register_skills(register: Callable[[Skill], None]) -> None:
    """``shell``, ``files``, ``mail``, ``web``, ``reader``, ``memory``, ``simple`` and
    ``recipes``; each ``start`` takes a :class:`SkillContext`."""
    register(
        Skill("shell", make_shell_tools, "Run bash commands in the sandbox.", rules=SHELL_RULES)
    )
    register(Skill("files", make_files_tools, "Read, write and search files.", rules=FILES_RULES))
    register(Skill("mail", make_mail_tools, "Send, search and read e-mail.", rules=MAIL_RULES))
    # Its tools exist only once ``[web] enabled = true``; its rules depend on ``[web] hosts``.
    register(Skill("web", make_web_tools, "Fetch web pages as text, and search the web."))
    register(
        Skill(
            "reader",
            make_reader_tools,
            "Answer a question about untrusted text through a separate, tool-less model call.",
            rules=READER_RULES,
        )
    )
    register(
        Skill(
            "memory",
            make_memory_tools,
            "Remember, recall and forget what matters to the user; search past sessions.",
            rules=MEMORY_RULES,
            consequential=MEMORY_CONSEQUENTIAL,
        )
    )
    register(
        Skill(
            "simple",
            make_simple_tools,
            "Narrow file tools and an answer tool, for small models.",
            # run_command is the shell tool under another name, so the shell's rules come along.
            rules=SIMPLE_RULES,
            by_default=False,  # the small-model profile enables it by name
        )
    )
    register(
        Skill(
            "recipes",
            make_recipe_tools,
            "Everyday shell commands as tools with plain arguments, for small models.",
            rules=FILES_RULES,
            by_default=False,  # the small-model profile enables it with [small] recipes
        )
    )
