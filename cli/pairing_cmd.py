"""`agent pairing`: who may talk to the chat bots besides their owners."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer
from rich.table import Table

from cli.config import load_settings
from cli.console import SafeConsole
from cli.gateway_cmd import access_list

pairing_app = typer.Typer(
    help="Pair chat users with the bots: list codes, approve or deny them, revoke users.",
    no_args_is_help=True,
)
console = SafeConsole(highlight=False)


@pairing_app.command("list")
def list_pairings() -> None:
    """Show pending pairing codes and paired users."""
    access = access_list(load_settings())
    pending = access.pending()
    paired = access.paired()
    if not pending and not paired:
        console.print("no pairing codes waiting and no paired users")
        return
    table = Table("code / user", "name", "since", "state")
    for p in pending:
        table.add_row(p.code, f"{p.name} ({p.user})", local_time(p.created), "waiting")
    for user, info in sorted(paired.items()):
        table.add_row(
            user, str(info.get("name", "")), local_time(float(info.get("since", 0))), "paired"
        )
    console.print(table)


@pairing_app.command("approve")
def approve(code: Annotated[str, typer.Argument(help="The code the bot gave the sender.")]) -> None:
    """Let the sender who was given CODE talk to the bots."""
    user = access_list(load_settings()).approve(code)
    console.print(f"paired {user}")


@pairing_app.command("deny")
def deny(code: Annotated[str, typer.Argument(help="The code the bot gave the sender.")]) -> None:
    """Drop the code CODE: its sender stays unpaired (and may ask again)."""
    user = access_list(load_settings()).deny(code)
    console.print(f"denied {user}")


@pairing_app.command("revoke")
def revoke(
    user: Annotated[str, typer.Argument(help="platform:id (e.g. telegram:12345), or the id.")],
) -> None:
    """Stop a paired user from talking to the bots."""
    removed = access_list(load_settings()).revoke(user)
    console.print(f"revoked {removed}")


def local_time(stamp: float) -> str:
    """A pairing time stamp as `agent pairing list` shows it."""
    return dt.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M")
