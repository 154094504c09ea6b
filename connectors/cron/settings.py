"""The ``[cron]`` table of the config file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CronSettings(BaseModel):
    """``[cron]``: the time zone schedules are read in, and when a slot counts as missed."""

    model_config = ConfigDict(extra="forbid")

    timezone: str | None = Field(
        default=None, description="an IANA zone such as 'Europe/Paris'; default: the system's"
    )
    grace_minutes: float = Field(
        default=10.0,
        ge=0,
        description="a slot this late when the scheduler sees it is still run as on time",
    )
