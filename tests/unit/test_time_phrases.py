"""Dates in queries: each written form read as the day (plus the day after) it names,
relative phrases counted from the request's time, and nothing read from ordinary words."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memsvc.kernel.time_phrases import time_windows

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


def days(query: str) -> list[tuple[str, str]]:
    return [(w.start.date().isoformat(), w.end.date().isoformat()) for w in time_windows(query, NOW)]


@pytest.mark.parametrize(
    "query",
    [
        "What did Kate cook on 29 Dec 2023?",
        "on 29.12.2023",
        "on 2023-12-29",
        "on December 29th, 2023",
        "on the 29th of December 2023",
        "on Dec. 29 2023",
        "2023年12月29日に何を作った？",
        "что было 29 декабря 2023?",
        "29/12/2023",
    ],
)
def test_a_full_date_names_its_day_and_the_day_after(query):
    assert days(query) == [("2023-12-29", "2023-12-31")]


def test_a_slashed_date_that_reads_both_ways_names_both_days():
    assert days("on 1/5/2024") == [("2024-05-01", "2024-05-03"), ("2024-01-05", "2024-01-07")]


def test_a_month_of_a_year_names_the_month():
    assert days("Where was I in December 2023?") == [("2023-12-01", "2024-01-01")]
    assert days("2023年12月") == [("2023-12-01", "2024-01-01")]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("what did I eat yesterday", [("2026-11-30", "2026-12-01")]),
        ("the day before yesterday", [("2026-11-29", "2026-11-30")]),
        ("what happened today", [("2026-12-01", "2026-12-02")]),
        ("3 days ago", [("2026-11-28", "2026-11-29")]),
        ("two weeks ago", [("2026-11-17", "2026-11-24")]),
        ("last week", [("2026-11-24", "2026-12-01")]),
        ("last month", [("2026-11-01", "2026-12-01")]),
        ("last year", [("2025-01-01", "2026-01-01")]),
        ("last spring", [("2026-03-01", "2026-06-01")]),
        ("last winter", [("2025-12-01", "2026-03-01")]),
    ],
)
def test_relative_phrases_count_from_the_request(query, expected):
    assert days(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "I may go hiking",
        "march on",
        "31.02.2024",
        "13.13.2024",
        "version 1.2.2024x",
        "the second week",
        "what did Kate cook?",
        "room 2023",
        "Which place did Elise visit in the first week of 2024?",
    ],
)
def test_words_and_impossible_dates_name_no_time(query):
    assert days(query) == []


def test_several_dates_come_in_the_order_the_query_names_them():
    assert days("between 5 Jan 2024 and yesterday") == [("2024-01-05", "2024-01-07"), ("2026-11-30", "2026-12-01")]
