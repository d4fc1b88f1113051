"""Time floors in UTC: the hour and day boundaries rollups, retention, the read side and
alerts all bucket by. One definition, so a bucket means the same everywhere."""

from __future__ import annotations

from datetime import UTC, datetime


def floor_hour(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def floor_day(when: datetime) -> datetime:
    return floor_hour(when).replace(hour=0)
