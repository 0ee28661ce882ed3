"""Time windows for NodeNameFilter's maintenance entries: one-off (RFC 3339 instants) or weekly (wall-clock times).

Weekly windows are wall-clock times in an explicit IANA zone (UTC unless
``timeZone`` says otherwise), so "Saturday 22:00 in Europe/Berlin" follows
daylight saving time. A window whose ``to`` is not after its ``from`` runs
past midnight into the next day; ``days`` names the day it starts.

Daylight saving time changes make some wall-clock times ambiguous:

- spring forward (a gap, e.g. 02:00-03:00 does not exist): a ``from`` or ``to``
  inside the gap means the first instant after it (03:00); a window lying wholly
  inside the gap opens then, for its length in minutes;
- fall back (a fold, e.g. 02:00-03:00 happens twice): ``from`` and ``to`` mean the
  first occurrence, so a window inside the fold opens once, not twice.

The end a window reports is that instant in the window's zone, with the
UTC offset in force then.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from marshmallow import Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Length

from extender.framework.args import failed_fields
from extender.framework.clock import parse_instant

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_CLOCK_TIME = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$|^24:00$")
# 7:00: hours need two digits.
_SHORT_HOUR = re.compile(r"^[0-9]:[0-5][0-9]$")


class OneOffWindow(NamedTuple):
    start: dt.datetime
    end: dt.datetime

    def active_until(self, now: dt.datetime) -> dt.datetime | None:
        """The end of the window when ``now`` falls inside it (start inclusive, end exclusive)."""
        return self.end if self.start <= now < self.end else None


class WeeklyWindow(NamedTuple):
    days: frozenset[int]  # datetime.weekday() numbers: Monday is 0
    start: dt.time
    # Minutes after ``start`` (so "24:00" and windows past midnight need no special case).
    minutes: int
    zone: ZoneInfo

    def active_until(self, now: dt.datetime) -> dt.datetime | None:
        local = now.astimezone(self.zone)
        # Today's occurrence, or yesterday's when it runs past midnight.
        for days_back in (0, 1):
            day = local.date() - dt.timedelta(days=days_back)
            if day.weekday() not in self.days:
                continue
            # Wall-clock arithmetic on naive times, then placed in the zone: DST shifts the instant, not the hour.
            wall_start = dt.datetime.combine(day, self.start)
            start = first_instant(wall_start, self.zone)
            end = first_instant(wall_start + dt.timedelta(minutes=self.minutes), self.zone)
            if end <= start:  # the whole window lies in a spring-forward gap: it opens after it, for its length
                end = start + dt.timedelta(minutes=self.minutes)
            if start <= now < end:
                return end.astimezone(self.zone)
        return None


def first_instant(wall: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """The first instant (UTC) a clock in ``zone`` shows the naive time ``wall``: its first occurrence in a fall-back
    fold, and the first instant after a spring-forward gap for a time the clock skips."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(dt.UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # In a gap: fold=1 reads the time with the offset after the change, fold=0 with the one before, so the change
    # lies between these two instants. Halve the interval down to the second (changes fall on whole seconds).
    before, after = wall.replace(tzinfo=zone, fold=1).astimezone(dt.UTC), first
    offset_after = after.astimezone(zone).utcoffset()
    while after - before > dt.timedelta(seconds=1):
        middle = before + (after - before) / 2
        if middle.astimezone(zone).utcoffset() == offset_after:
            after = middle
        else:
            before = middle
    return after.replace(microsecond=0)


Window = OneOffWindow | WeeklyWindow


class Instant(fields.Field[dt.datetime]):
    """An RFC 3339 timestamp with a UTC offset; YAML may already have parsed it into a datetime."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dt.datetime:
        try:
            return parse_instant(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class ClockTime(fields.Field[int]):
    """A wall-clock time ``HH:MM``; ``24:00`` ends a window at midnight."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if not isinstance(value, str):
            # YAML 1.1 reads an unquoted 22:00 as the number 1320: the policy's loader says so (policy/yaml_hints.py).
            raise ValidationError('Not a valid string: a time of day is a quoted "HH:MM".')
        match = _CLOCK_TIME.match(value)
        if match is None:
            short = _SHORT_HOUR.match(value)
            fix = f": write '0{value}'" if short else ""
            raise ValidationError(f'{value!r} is not a time of day "HH:MM" (00:00..23:59, or 24:00 as an end){fix}')
        hours, minutes = (24, 0) if value == "24:00" else (int(match[1]), int(match[2]))
        return hours * 60 + minutes


def _validate_zone(name: str) -> None:
    # zoneinfo (and the sysconfig it reads) only for policies with weekly windows.
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC") from None


class WindowSchema(Schema):
    start = Instant()
    end = Instant()
    days = fields.List(fields.String(), validate=Length(min=1))
    from_ = ClockTime(data_key="from")
    to = ClockTime()
    timeZone = fields.String(validate=_validate_zone)

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def one_shape(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        broken = failed_fields(self, data, original)
        given = data.keys() | broken  # the shape is what the window sets, loaded or not
        one_off = {"start", "end"} & given
        weekly = {"days", "from_", "to", "timeZone"} & given
        if not one_off and not weekly:
            raise ValidationError("a window needs start and end (one-off) or from and to (weekly)")
        if one_off and weekly:
            raise ValidationError(
                "a window is either one-off (start, end) or weekly (days, from, to, timeZone), not both"
            )
        if one_off:
            missing = {"start", "end"} - one_off
            if missing:
                raise ValidationError("Missing data for required field.", missing.pop())
            if not broken and data["end"] <= data["start"]:
                raise ValidationError(f"must be after start ({data['start'].isoformat()})", "end")
            return
        errors: dict[str, list[str] | dict[int, list[str]]] = {}
        for key, name in (("from_", "from"), ("to", "to")):
            if key not in given:
                errors[name] = ["Missing data for required field."]
        if data.get("from_") == 24 * 60:
            errors["from"] = ["a window cannot start at 24:00: use 00:00"]
        if "from_" in data and data.get("from_") == data.get("to"):
            errors["to"] = ["must differ from from"]
        unknown = {
            index: [f"unknown day {day!r}: use {', '.join(DAYS)}"]
            for index, day in enumerate(data.get("days", ()))
            if day not in DAYS
        }
        if unknown:
            errors["days"] = unknown
        if errors:
            raise ValidationError(errors)

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> Window:
        from zoneinfo import ZoneInfo

        if "start" in data:
            return OneOffWindow(data["start"], data["end"])
        start, end = data["from_"], data["to"]
        return WeeklyWindow(
            days=frozenset(DAYS.index(day) for day in data.get("days", DAYS)),
            start=dt.time(start // 60, start % 60),
            minutes=(end - start) % (24 * 60) or 24 * 60,
            zone=ZoneInfo(data.get("timeZone", "UTC")),
        )
