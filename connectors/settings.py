"""The ``[connectors.*]`` and ``[gateway]`` tables of the config file."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _ids(value: object) -> object:
    """Ids may be written as numbers or strings, as a list or one comma-separated string."""
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return value


Ids = Annotated[list[str], BeforeValidator(_ids)]


class TelegramSettings(BaseModel):
    """``[connectors.telegram]``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    token: str | None = Field(default=None, description="or CLAWLOOP_TELEGRAM_TOKEN")
    base_url: str = "https://api.telegram.org/bot"
    owner_ids: Ids = Field(default_factory=list)
    allow_ids: Ids = Field(default_factory=list)
    poll_timeout: int = Field(default=30, ge=0, le=50)


class DiscordSettings(BaseModel):
    """``[connectors.discord]``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    token: str | None = Field(default=None, description="or CLAWLOOP_DISCORD_TOKEN")
    api_base: str = "https://discord.com/api/v10"
    gateway_url: str = "wss://gateway.discord.gg/"
    owner_ids: Ids = Field(default_factory=list)
    allow_ids: Ids = Field(default_factory=list)


class WebSettings(BaseModel):
    """``[connectors.web]``: the web page of `agent web`, served by `agent gateway` too."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)
    token_env: str | None = Field(
        default=None, description="the environment variable holding the page's access token"
    )


class ConnectorsSettings(BaseModel):
    """``[connectors]``: one table per chat platform, and the web page."""

    model_config = ConfigDict(extra="forbid")

    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    web: WebSettings = Field(default_factory=WebSettings)


class GatewaySettings(BaseModel):
    """``[gateway]``: how the gateway treats every chat."""

    model_config = ConfigDict(extra="forbid")

    rate_per_minute: float = Field(default=20.0, gt=0)
    rate_burst: int = Field(default=5, ge=1)
    max_turns_at_once: int = Field(default=64, ge=1)
    accept_files: bool = Field(
        default=False, description="save files the owner sends into the workspace's inbox/"
    )
    max_file_mb: float = Field(default=20.0, gt=0, le=2000)
