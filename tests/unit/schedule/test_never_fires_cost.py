"""Deciding that a cron with Quartz day terms never fires costs a few
month masks, not the matcher's 400-year search.

``m h L-30 2 *`` (the 30th-from-last day of February) never fires. The
check once searched 400 years of Februaries for it (one month mask each, and
about 0.5 ms of CPU), so a BatchCreateJobs of 1 000 such jobs took a second
of a server's CPU for one request of its tenant's quota, and wrote nothing.
Which days match depends only on a month's length and first weekday, so at
most 4 x 7 masks decide it; the answers are checked against the search."""

from __future__ import annotations

import pytest

from tickwheel_server.schedule import cron
from tickwheel_server.schedule.errors import ScheduleError

NEVER = ["5 3 L-30 2 *", "0 0 L-29 2 *", "0 0 L-30 4,6,9,11 *", "0 0 30W 2 *", "0 0 L-30 2,4 *"]
SOMETIMES = ["0 0 L-28 2 *", "0 0 L-30 1 *", "0 0 * 2 1#5", "0 0 29W 2 *", "0 0 LW 2 *", "0 0 L-30 2 1", "0 0 L-30 2 1#5"]


def masks_counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Month masks evaluated through ``cron.month_mask_function``, counted."""
    calls = [0]
    real = cron.month_mask_function

    def counting(*args):
        mask = real(*args)

        def counted(length: int, first_weekday: int) -> int:
            calls[0] += 1
            return mask(length, first_weekday)

        return counted

    monkeypatch.setattr(cron, "month_mask_function", counting)
    return calls


@pytest.mark.parametrize("text", NEVER)
def test_never_firing_day_terms_are_refused_in_a_few_masks(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    calls = masks_counted(monkeypatch)
    with pytest.raises(ScheduleError, match="never fires") as error:
        cron.parse_cron(text).resolve("job-1")
    assert error.value.field == cron.EXPRESSION_FIELD
    assert calls[0] <= 28


@pytest.mark.parametrize("text", SOMETIMES)
def test_firing_day_terms_are_accepted_in_a_few_masks(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    calls = masks_counted(monkeypatch)
    cron.parse_cron(text).resolve("job-1")
    assert calls[0] <= 28


def _terms():
    for n in (0, 1, 27, 28, 29, 30):
        yield f"L-{n}", "*"
    for day in (1, 28, 29, 30, 31):
        yield f"{day}W", "*"
    yield "LW", "*"
    for k in (1, 4, 5):
        yield "*", f"1#{k}"
    yield "*", "5L"
    yield "L-30", "1#5"
    yield "31", "1#5"
    yield "L-29", "0,6"


@pytest.mark.parametrize("months", ["2", "4", "2,4", "1", "4,6,9,11", "*"])
@pytest.mark.parametrize(("dom", "dow"), list(_terms()))
def test_the_check_agrees_with_the_400_year_search(monkeypatch: pytest.MonkeyPatch, months, dom, dow) -> None:
    """Refused exactly when the matcher finds no match from 1970 (its 400 years)."""
    monkeypatch.setattr(cron, "_check_fires", lambda fields: None)
    fields = cron.parse_cron(f"0 0 {dom} {months} {dow}").resolve("job-1")
    monkeypatch.undo()
    assert cron._day_terms_match(fields) == (cron.CronMatcher(fields).next_match(0) is not None)
