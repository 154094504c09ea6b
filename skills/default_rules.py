"""The default rules the built-in skills ship (``shell``, ``files``, ``simple``, ``mail``),
merged into the policy.

Read-only commands run without asking. Options that make them write or run other programs are
sent back to "ask" by the ask list, which is checked before any allow rule.
"""

from __future__ import annotations

from sandbox.rules import Kind
from skills.skill import DefaultRules

SHELL_RULES = DefaultRules(
    allow=[
        "shell(ls *)",
        "shell(cat *)",
        "shell(head *)",
        "shell(tail *)",
        "shell(wc *)",
        "shell(grep *)",
        "shell(rg *)",
        "shell(pwd)",
        "shell(echo *)",
        "shell(find *)",
        "shell(tree *)",
        "shell(file *)",
        "shell(stat *)",
        "shell(du *)",
        "shell(diff *)",
        "shell(which *)",
        "shell(sort *)",
        "shell(uniq *)",
        "shell(cut *)",
        "shell(nl *)",
        "shell(git status*)",
        "shell(git diff*)",
        "shell(git log*)",
        "shell(git show*)",
        "shell(git branch)",
        "shell(git rev-parse*)",
    ],
    ask=[
        "shell(find * -exec *)",
        "shell(find * -execdir *)",
        "shell(find * -ok *)",
        "shell(find * -okdir *)",
        "shell(find * -delete *)",
        "shell(find * -fprint* *)",
        "shell(find * -fls *)",
        "shell(git * --output* *)",
        "shell(* --ext-diff *)",
        "shell(tail * -f *)",
        "shell(tail * --follow* *)",
        "shell(sort * -o *)",
        "shell(sort * --output*)",
    ],
    deny=[
        # Deleting the root or the home folder.
        "shell(rm * / *)",
        "shell(rm * /[*] *)",
        "shell(rm * ~ *)",
        "shell(rm * ~/ *)",
        "shell(rm * ~/[*] *)",
        "shell(rm * $HOME *)",
        "shell(rm * $HOME/ *)",
        "shell(rm * $HOME/[*] *)",
        "shell(rm * --no-preserve-root *)",
        # Running whatever a download says.
        "shell(* | sh *)",
        "shell(* | bash *)",
        "shell(* | zsh *)",
        "shell(* | dash *)",
        "shell(* | sudo *)",
        "shell(* | python* -)",
        "shell(sh -c *curl*)",
        "shell(bash -c *curl*)",
        # Privilege and disk-level damage.
        "shell(sudo *)",
        "shell(su *)",
        "shell(mkfs*)",
        "shell(dd * of=/dev/*)",
        "shell(chmod * -R * / *)",
        "shell(chown * -R * / *)",
    ],
)

FILES_RULES = DefaultRules(
    allow=[
        "files.read",
        "files.list",
        "files.search",
    ],
    ask=[
        # Secrets in the workspace: reading them is the user's call.
        "files.read(**/.env)",
        "files.read(**/.env.*)",
        "files.read(**/*.pem)",
        "files.read(**/id_rsa*)",
        "files.read(**/id_ed25519*)",
    ],
)

# The small-model profile's skill: narrow file tools and run_command, which runs as `shell`.
SIMPLE_RULES = DefaultRules(
    allow=[*SHELL_RULES.allow, *FILES_RULES.allow],
    ask=[*SHELL_RULES.ask, *FILES_RULES.ask],
    deny=[*SHELL_RULES.deny, *FILES_RULES.deny],
)

# Reading mail runs without asking; sending asks.
MAIL_RULES = DefaultRules(
    allow=["mail.search", "mail.read", "mail.folders"],
    ask=["mail.send"],
)


def as_policy_rules(name: str, rules: DefaultRules) -> list[tuple[Kind, str, str]]:
    """A skill's rules in the form :meth:`sandbox.policy.Policy.merge_defaults` takes."""
    kinds: tuple[Kind, ...] = ("deny", "ask", "allow")
    return [(kind, text, f"skill {name}") for kind in kinds for text in getattr(rules, kind)]


def builtin_rules() -> list[tuple[Kind, str, str]]:
    """The rules of the built-in shell and files skills."""
    return as_policy_rules("shell", SHELL_RULES) + as_policy_rules("files", FILES_RULES)
