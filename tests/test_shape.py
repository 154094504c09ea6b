"""The code's shape: no product file over 500 lines, no function over 8 parameters.

A long parameter list is usually several things that belong together; they are grouped into a
small typed object instead. Two kinds of function are exempt, each found precisely on the
source with ``ast``:

- Typer commands and group callbacks of the CLI: each parameter is a declared command-line
  option. They are the functions given to ``<app>.command(...)`` or ``<app>.callback(...)`` of a
  ``typer.Typer`` object, as a decorator or registered by a call (``app.command()(run)``), and
  those a ``LazyCommand`` names (``"cli.run_cmd:run"``: cli/lazy_group.py mounts it when it is
  used); the list is checked against what the real ``agent`` app registers and mounts.
- Triton kernels, ``triton.jit`` as a decorator or called on the function: their parameters are
  the kernel's launch arguments.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "sandbox", "backends", "skills", "connectors", "cli")
MAX_LINES = 500
MAX_PARAMETERS = 8

AnyFunction = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True, slots=True)
class Source:
    """One module: its dotted name and parsed tree."""

    module: str
    tree: ast.Module


@dataclass(frozen=True, slots=True)
class Definition:
    """A function as Python names it (``module:Class.method``, ``module:f.<locals>.g``)."""

    name: str
    node: AnyFunction
    method: bool  # defined in a class body and not a staticmethod: its first parameter is bound
    scope: str  # the qualified name of the enclosing function or class ("" at module level)


def product_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def load(path: Path) -> Source:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return Source(module, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))


def parse(module: str, text: str) -> Source:
    return Source(module, ast.parse(text))


# -- functions and their parameters --------------------------------------------------------------


def definitions(source: Source) -> Iterator[Definition]:
    """Every function and method, nested ones included, with its qualified name."""

    def walk(body: list[ast.stmt], scope: str, in_class: bool) -> Iterator[Definition]:
        for node in body:
            for child in _blocks(node):
                yield from walk(child, scope, in_class)
            if isinstance(node, ast.ClassDef):
                yield from walk(node.body, _join(scope, node.name), True)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = _join(scope, node.name)
                static = any(_dotted(d) == "staticmethod" for d in node.decorator_list)
                yield Definition(f"{source.module}:{name}", node, in_class and not static, scope)
                yield from walk(node.body, f"{name}.<locals>", False)

    yield from walk(source.tree.body, "", False)


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested in a compound statement other than a def or class."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    blocks = [getattr(node, f) for f in ("body", "orelse", "finalbody") if hasattr(node, f)]
    blocks += [h.body for h in getattr(node, "handlers", [])]
    blocks += [c.body for c in getattr(node, "cases", [])]
    return [b for b in blocks if isinstance(b, list)]


def _join(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def parameter_count(definition: Definition) -> int:
    """Positional-only, positional, keyword-only, ``*args`` and ``**kwargs``; a method's
    ``self`` or ``cls`` is not counted."""
    args = definition.node.args
    count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
    count += (args.vararg is not None) + (args.kwarg is not None)
    return count - 1 if definition.method and (args.posonlyargs or args.args) else count


# -- the exemptions ------------------------------------------------------------------------------


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a name or attribute chain, the callee's for a call, else ""."""
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _imports(source: Source) -> dict[str, str]:
    """Local name → ``module:name`` (or ``module`` for a module), from every import in the file,
    lazy ones inside functions included."""
    names: dict[str, str] = {}
    for node in ast.walk(source.tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name
    return names


def typer_apps(sources: list[Source]) -> set[str]:
    """``module:name`` of every module-level ``name = typer.Typer(...)``."""
    apps = set()
    for source in sources:
        for node in source.tree.body:
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
                continue
            if _dotted(node.value) == "typer.Typer":
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                apps.update(f"{source.module}:{name}" for name in names)
    return apps


def typer_commands(sources: list[Source]) -> set[str]:
    """The functions registered as commands or group callbacks on a Typer app, anywhere."""
    apps = typer_apps(sources)
    by_module = {source.module: source for source in sources}
    found: set[str] = set()
    for source in sources:
        imports = _imports(source)
        for definition in definitions(source):
            if any(_registers(d, source, imports, apps) for d in definition.node.decorator_list):
                found.add(definition.name)
        for node in ast.walk(source.tree):
            # app.command("name")(function): the registration, called on the function.
            if not isinstance(node, ast.Call) or not node.args:
                continue
            if _registers(node.func, source, imports, apps):
                found.add(_resolve(node.args[0], source.module, imports))
            target = _lazy_target(node, imports)
            if target and not _is_app(target, by_module, apps):  # an app's own are found above
                found.add(target)
    return found - {""}


def _lazy_target(node: ast.Call, imports: dict[str, str]) -> str:
    """The ``"module:name"`` of ``LazyCommand(name, "module:name", ...)``, else ""."""
    if imports.get(_dotted(node.func)) != "cli.lazy_group:LazyCommand" or len(node.args) < 2:
        return ""
    target = node.args[1]
    return (
        target.value if isinstance(target, ast.Constant) and isinstance(target.value, str) else ""
    )


def _is_app(target: str, by_module: dict[str, Source], apps: set[str]) -> bool:
    """Whether ``module:name`` is a Typer app, defined there or imported there from elsewhere."""
    module, _, name = target.partition(":")
    source = by_module.get(module)
    return target in apps or (source is not None and _imports(source).get(name) in apps)


def _registers(node: ast.expr, source: Source, imports: dict[str, str], apps: set[str]) -> bool:
    """Whether ``node`` is ``<app>.command(...)`` or ``<app>.callback(...)`` on a Typer app
    defined in this module or imported from another."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    if node.func.attr not in ("command", "callback"):
        return False
    owner = _dotted(node.func.value)
    return f"{source.module}:{owner}" in apps or imports.get(owner) in apps


def _resolve(node: ast.expr, module: str, imports: dict[str, str]) -> str:
    """``module:name`` of a function named in ``module`` (``run``, ``run_cmd.run``)."""
    dotted = _dotted(node)
    head, _, rest = dotted.partition(".")
    if not dotted or head not in imports:
        return f"{module}:{dotted}" if dotted and not rest else ""
    origin = imports[head]
    if not rest:
        return origin
    # ``from cli import run_cmd`` then ``run_cmd.run``: the module is cli.run_cmd.
    return f"{origin.replace(':', '.')}:{rest}"


def triton_kernels(source: Source) -> set[str]:
    """Functions decorated with ``triton.jit`` or given to a ``triton.jit(...)`` call in the
    scope that defines them."""
    every = list(definitions(source))
    jitted = {("", name) for name in _jitted_names(source.tree)}  # (scope, name)
    for definition in every:
        scope = definition.name.split(":", 1)[1] + ".<locals>"
        jitted.update((scope, name) for name in _jitted_names(definition.node))
    return {
        d.name
        for d in every
        if (d.scope, d.node.name) in jitted
        or any(_dotted(decorator) == "triton.jit" for decorator in d.node.decorator_list)
    }


def _jitted_names(root: ast.AST) -> set[str]:
    """Names given as the function to ``triton.jit(...)`` in ``root``'s own body."""
    return {
        node.args[0].id
        for node in _own_nodes(root)
        if isinstance(node, ast.Call)
        and _dotted(node) == "triton.jit"
        and node.args
        and isinstance(node.args[0], ast.Name)
    }


def _own_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``root``'s own body, not those inside nested functions or classes."""
    for child in ast.iter_child_nodes(root):
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from _own_nodes(child)


# -- the check -----------------------------------------------------------------------------------


def long_signatures(sources: list[Source]) -> list[str]:
    """Functions over MAX_PARAMETERS parameters that are neither CLI commands nor kernels."""
    exempt = typer_commands(sources)
    for source in sources:
        exempt |= triton_kernels(source)
    found = []
    for source in sources:
        for definition in definitions(source):
            count = parameter_count(definition)
            if count > MAX_PARAMETERS and definition.name not in exempt:
                found.append(f"{definition.name} (line {definition.node.lineno}): {count}")
    return found


def test_no_product_file_is_over_500_lines() -> None:
    files = product_files()
    assert len(files) > 100, "the packages moved: update this test"
    long = []
    for path in files:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not long, f"files over {MAX_LINES} lines (split them by concept):\n" + "\n".join(long)


def test_no_product_function_takes_more_than_8_parameters() -> None:
    found = long_signatures([load(p) for p in product_files()])
    assert not found, (
        f"functions over {MAX_PARAMETERS} parameters (group the ones that belong together into "
        "a small typed object):\n" + "\n".join(found)
    )


def test_the_exemptions_are_what_the_cli_and_the_kernels_really_are() -> None:
    """The commands found on the source are exactly the callbacks the real app registers, and
    the kernels found are the two Triton kernels."""
    import importlib

    import typer

    from cli.main import COMMANDS, app

    registered: set[str] = set()

    def collect(group: typer.Typer) -> None:
        callbacks = [c.callback for c in group.registered_commands]
        if group.registered_callback is not None:
            callbacks.append(group.registered_callback.callback)
        registered.update(f"{f.__module__}:{f.__qualname__}" for f in callbacks if f)
        for sub in group.registered_groups:
            if sub.typer_instance is not None:
                collect(sub.typer_instance)

    collect(app)
    for entry in COMMANDS:  # mounted when used
        module, _, name = entry.target.partition(":")
        target = getattr(importlib.import_module(module), name)
        if isinstance(target, typer.Typer):
            collect(target)
        else:
            registered.add(f"{target.__module__}:{target.__qualname__}")
    sources = [load(p) for p in product_files()]
    assert typer_commands(sources) == registered
    assert len(registered) > 40
    kernels = set().union(*(triton_kernels(s) for s in sources))
    assert kernels == {
        "backends.engine.model.triton_attention:_kernel.<locals>.paged_attention_kernel",
        "backends.engine.model.triton_store:_kernel.<locals>.store_kv_kernel",
    }


SYNTHETIC = {
    "cli.things_cmd": """
import typer
things_app = typer.Typer()

@things_app.command("make")
def make(a, b, c, d, e, f, g, h, i): ...

def listed(a, b, c, d, e, f, g, h, i): ...

def later(a, b, c, d, e, f, g, h, i): ...

def helper(a, b, c, d, e, f, g, h, i): ...
""",
    "cli.root": """
import typer
from cli import things_cmd
from cli.things_cmd import things_app
from cli.lazy_group import LazyCommand
app = typer.Typer()
app.command("list")(things_cmd.listed)
LAZY = (
    LazyCommand("later", "cli.things_cmd:later", "Mounted when used."),
    LazyCommand("things", "cli.things_cmd:things_app", "An app: its commands are its own."),
    LazyCommand("again", "cli.root:things_app", "The same app, imported here."),
)

@things_app.callback()
def options(a, b, c, d, e, f, g, h, *rest): ...
""",
    "backends.kernels": """
import triton

@triton.jit
def decorated(a, b, c, d, e, f, g, h, i): ...

def build():
    def kernel(a, b, c, d, e, f, g, h, i): ...
    return triton.jit(kernel, do_not_specialize=["a"])

def kernel(a, b, c, d, e, f, g, h, i): ...

class Plans:
    def method(self, a, b, c, d, e, f, g, h): ...
    @classmethod
    def made(cls, a, b, c, d, e, f, g, *, h, **rest): ...
    @staticmethod
    def static(a, b, c, d, e, f, g, h, i): ...
    async def later(self, a, b, c, d, e, f, g, h, /, i): ...

def nine(a, /, b, c=1, *d, e, f, g=2, h, **i): ...

def eight(a, b, c, d, e, f, g, h): ...
""",
}


def test_the_checker_on_a_small_source() -> None:
    sources = [parse(module, text) for module, text in SYNTHETIC.items()]
    found = {line.split(" ")[0]: line.rsplit(": ", 1)[1] for line in long_signatures(sources)}
    assert found == {
        # A function of a command module that no app registers is counted like any other.
        "cli.things_cmd:helper": "9",
        # The same name as a jitted kernel, in another scope: not the kernel.
        "backends.kernels:kernel": "9",
        "backends.kernels:Plans.made": "9",
        "backends.kernels:Plans.static": "9",
        "backends.kernels:Plans.later": "9",
        "backends.kernels:nine": "9",
    }
    assert typer_commands(sources) == {
        "cli.things_cmd:make",
        "cli.things_cmd:listed",
        "cli.things_cmd:later",
        "cli.root:options",
    }
    assert triton_kernels(sources[2]) == {
        "backends.kernels:decorated",
        "backends.kernels:build.<locals>.kernel",
    }
