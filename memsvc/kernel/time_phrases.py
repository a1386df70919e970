"""Dates a query names ("on 31 Dec 2023", "02.01.2024", "yesterday", "last spring"), as time
windows that retrieval uses as a ranking signal on when a memory happened.

Only phrases that name a time without doubt are read: a full date in the usual written
forms (English and Russian month names, the Japanese and Chinese 年月日 form, ISO and
day.month.year digits), a month of a year, and a short list of relative phrases counted
from the request's time. A general date finder (dateparser's `search_dates`) was not used:
it takes tens of milliseconds per query, and it reads ordinary words ("may", "march",
"sat", "second") as dates, which would move every question's ranking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memsvc.kernel.text import normalize

# How long after a day a conversation still talks about it: "what did Kate cook on 29 Dec?"
# is usually answered by a turn of the 29th or of the day after ("yesterday I made...").
DAY_SPILL = timedelta(days=1)

_MONTHS = {
    "jan": 1,
    "january": 1,
    "feb": 2,
    "february": 2,
    "mar": 3,
    "march": 3,
    "apr": 4,
    "april": 4,
    "may": 5,
    "jun": 6,
    "june": 6,
    "jul": 7,
    "july": 7,
    "aug": 8,
    "august": 8,
    "sep": 9,
    "sept": 9,
    "september": 9,
    "oct": 10,
    "october": 10,
    "nov": 11,
    "november": 11,
    "dec": 12,
    "december": 12,
    "января": 1,
    "февраля": 2,
    "марта": 3,
    "апреля": 4,
    "мая": 5,
    "июня": 6,
    "июля": 7,
    "августа": 8,
    "сентября": 9,
    "октября": 10,
    "ноября": 11,
    "декабря": 12,
    "январь": 1,
    "февраль": 2,
    "март": 3,
    "апрель": 4,
    "май": 5,
    "июнь": 6,
    "июль": 7,
    "август": 8,
    "сентябрь": 9,
    "октябрь": 10,
    "ноябрь": 11,
    "декабрь": 12,
}
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th|-?го|-?е)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_B, _E = r"(?<![\w.])", r"(?![\w])"

# Each pattern names one day; the groups year, month (a name or digits) and day.
_DAY_PATTERNS = [
    re.compile(rf"{_B}{_YEAR}-(?P<m>[01]?\d)-{_DAY}{_E}"),  # 2024-01-05
    re.compile(rf"{_B}{_DAY}\.(?P<m>[01]?\d)\.{_YEAR}{_E}"),  # 05.01.2024
    re.compile(rf"{_B}{_DAY}/(?P<m>[01]?\d)/{_YEAR}{_E}"),  # 05/01/2024 (and 01/05)
    re.compile(rf"{_B}(?:the )?{_DAY}(?: of)? {_MONTH},? {_YEAR}{_E}"),  # 5 January 2024
    re.compile(rf"{_B}{_MONTH} (?:the )?{_DAY},? {_YEAR}{_E}"),  # January 5th, 2024
    re.compile(rf"{_YEAR}\s*年\s*(?P<m>[01]?\d)\s*月\s*(?P<day>[0-3]?\d)\s*日"),  # 2024年1月5日
]
_MONTH_PATTERNS = [
    re.compile(rf"{_B}{_MONTH},? (?:of )?{_YEAR}{_E}"),  # December 2023
    re.compile(rf"{_YEAR}\s*年\s*(?P<m>[01]?\d)\s*月(?!\s*[0-3]?\d\s*日)"),  # 2023年12月
]
_AGO = re.compile(rf"{_B}(?P<n>\d{{1,3}}|a|one|two|three) (?P<unit>days?|weeks?) ago{_E}")
_SEASON = re.compile(rf"{_B}last (?P<season>spring|summer|autumn|fall|winter){_E}")
# What every phrase above contains: a year's digits or a relative phrase's word.
_MAY_NAME_TIME = re.compile(r"\d|yesterday|today|last |ago")
_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3}
# Northern-hemisphere meteorological seasons: first month of each.
_SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


@dataclass(frozen=True)
class TimeWindow:
    """[start, end) in UTC: when the thing a query asks about happened, as far as the query says."""

    start: datetime
    end: datetime

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def time_windows(query: str, now: datetime) -> list[TimeWindow]:
    """The windows the query's date phrases name, in the order they occur; [] when it names
    none. Relative phrases count from `now` (the request's time, UTC)."""
    text = normalize(query)
    if not _MAY_NAME_TIME.search(text):  # most queries: one scan instead of every pattern's
        return []
    found: list[tuple[int, TimeWindow]] = []
    for pattern in _DAY_PATTERNS:
        for m in pattern.finditer(text):
            for day in _days(m, pattern):
                found.append((m.start(), TimeWindow(day, day + timedelta(days=1) + DAY_SPILL)))
    for pattern in _MONTH_PATTERNS:
        for m in pattern.finditer(text):
            first = _date(m, day=1)
            if first is not None and not any(
                w.start.year == first.year and w.start.month == first.month for _, w in found
            ):
                found.append((m.start(), TimeWindow(first, _add_month(first))))
    found += _relative(text, _midnight(now))
    return [w for _, w in sorted(found, key=lambda p: p[0])]


def _days(m: re.Match[str], pattern: re.Pattern[str]) -> list[datetime]:
    """The day a match names; with slashes, both readings (day/month and month/day) that are
    dates, since which one the writer meant is not written down."""
    days = [_date(m)]
    if "/" in m.group(0):
        days.append(_date(m, day=int(m["m"]), month=int(m["day"])))
    return list(dict.fromkeys(d for d in days if d is not None))


def _date(m: re.Match[str], day: int | None = None, month: int | None = None) -> datetime | None:
    groups = m.groupdict()
    if month is None:
        month = _MONTHS[groups["month"]] if groups.get("month") else int(groups["m"])
    try:
        return datetime(int(groups["year"]), month, day or int(groups["day"]), tzinfo=UTC)
    except ValueError:  # 31.02.2024, month 13: not a date
        return None


def _relative(text: str, today: datetime) -> list[tuple[int, TimeWindow]]:
    """yesterday, today, the day before yesterday, N days/weeks ago, last week/month/year, last <season>."""
    day = timedelta(days=1)
    fixed = {
        "the day before yesterday": (today - 2 * day, today - day),
        "yesterday": (today - day, today),
        "today": (today, today + day),
        "last week": (today - 7 * day, today),
        "last month": (_add_month(today.replace(day=1), -1), today.replace(day=1)),
        "last year": (today.replace(year=today.year - 1, month=1, day=1), today.replace(month=1, day=1)),
    }
    out: list[tuple[int, TimeWindow]] = []
    taken: list[tuple[int, int]] = []
    for phrase, (start, end) in fixed.items():
        for m in re.finditer(rf"{_B}{phrase}{_E}", text):
            if not any(a <= m.start() < b for a, b in taken):
                taken.append(m.span())
                out.append((m.start(), TimeWindow(start, end)))
    for m in _AGO.finditer(text):
        n = _WORDS.get(m["n"]) or int(m["n"])
        back = timedelta(days=n if m["unit"].startswith("day") else 7 * n)
        out.append(
            (m.start(), TimeWindow(today - back, today - back + (day if m["unit"].startswith("day") else 7 * day)))
        )
    for m in _SEASON.finditer(text):
        out.append((m.start(), _last_season(_SEASON_START[m["season"]], today)))
    return out


def _last_season(first_month: int, today: datetime) -> TimeWindow:
    """The latest three-month season starting in `first_month` that has ended by today."""
    start = today.replace(month=first_month, day=1)
    while _add_month(start, 3) > today:
        start = start.replace(year=start.year - 1)
    return TimeWindow(start, _add_month(start, 3))


def _add_month(moment: datetime, months: int = 1) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months
    return moment.replace(year=index // 12, month=index % 12 + 1)


def _midnight(now: datetime) -> datetime:
    now = now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)
    return now.replace(hour=0, minute=0, second=0, microsecond=0)
