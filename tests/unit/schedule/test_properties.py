"""Property tests: the engine agrees with the brute-force reference.

Random expressions (built as value sets, then rendered to text, so the
reference never goes through the engine's parser), random zones and random
instants, most of them within days of a real transition of the zone.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import assume, event, given
from hypothesis import strategies as st

from tickwheel_server.schedule import Engine, GapPolicy, RepeatPolicy, Schedule

from .reference import Rule, brute_force, transitions_in_year

UTC = timezone.utc
ENGINE = Engine()

DST_ZONES = [
    "Europe/London",
    "America/New_York",
    "Australia/Lord_Howe",
    "Africa/Cairo",
    "Asia/Beirut",
    "America/Santiago",
    "Australia/Sydney",
    "Pacific/Auckland",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Pacific/Apia",
    "Europe/Dublin",
    "Pacific/Chatham",
    "America/St_Johns",
    "America/Havana",
    "Antarctica/Troll",
    "America/Nuuk",
    "Africa/Casablanca",
    "Asia/Gaza",
    "UTC",
]
ZONES = DST_ZONES
MONTH_NAMES = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
DAY_NAMES = "SUN MON TUE WED THU FRI SAT".split()


@st.composite
def field(draw, lo: int, hi: int, names: list[str] | None = None, star_hi: int | None = None):
    """``(text, values)`` for one field; ``star_hi`` bounds ``*`` (6 for weekdays)."""
    top = hi if star_hi is None else star_hi

    def name(value: int) -> str:
        if names and value != 7 and draw(st.booleans()):  # SUN is 0 at the start of a range
            return names[(value - lo) % len(names)] if lo == 1 else names[value % 7]
        return str(value)

    form = draw(st.sampled_from(["star", "star_step", "list"]))
    if form == "star":
        return "*", frozenset(range(lo, top + 1))
    if form == "star_step":
        step = draw(st.integers(1, top - lo + 1))
        return f"*/{step}", frozenset(range(lo, top + 1, step))
    terms, values = [], set()
    for _ in range(draw(st.integers(1, 3))):
        a = draw(st.integers(lo, hi))
        kind = draw(st.sampled_from(["single", "range", "range_step"]))
        if kind == "single":
            terms.append(name(a))
            values.add(a)
        else:
            b = draw(st.integers(a, hi))
            step = draw(st.integers(1, top - lo + 1)) if kind == "range_step" else 1
            terms.append(f"{name(a)}-{name(b)}" + (f"/{step}" if kind == "range_step" else ""))
            values.update(range(a, b + 1, step))
    return ",".join(terms), frozenset(values)


@st.composite
def day_of_month_term(draw):
    """(text, term) of a Quartz day-of-month term, as reference.Rule holds it."""
    kind = draw(st.sampled_from(["L", "L-n", "nW", "LW"]))
    if kind == "L":
        return "L", ("L", 0)
    if kind == "L-n":
        n = draw(st.integers(0, 30))
        return f"L-{n}", ("L", n)
    if kind == "nW":
        n = draw(st.integers(1, 31))
        return f"{n}W", ("W", n)
    return "LW", ("LW",)


@st.composite
def day_of_week_term(draw):
    weekday = draw(st.integers(0, 7))
    text = DAY_NAMES[weekday % 7] if draw(st.booleans()) else str(weekday)
    if draw(st.booleans()):
        k = draw(st.integers(1, 5))
        return f"{text}#{k}", ("#", weekday % 7, k)
    return f"{text}L", ("DL", weekday % 7)


@st.composite
def with_terms(draw, plain: tuple[str, frozenset[int]], term):
    """A day field with 0-2 Quartz terms added; a ``*`` field becomes terms alone."""
    drawn = draw(st.lists(term(), max_size=2))
    if not drawn:
        return plain, ()
    texts = [text for text, _ in drawn]
    if plain[0].startswith("*"):
        return (",".join(texts), frozenset()), tuple(t for _, t in drawn)
    return (",".join([plain[0], *texts]), plain[1]), tuple(t for _, t in drawn)


@st.composite
def rules(draw, policies: bool = False, quartz: bool = False):
    minute = draw(field(0, 59))
    hour = draw(field(0, 23))
    dom = draw(field(1, 31))
    month = draw(field(1, 12, MONTH_NAMES))
    dow = draw(field(0, 7, DAY_NAMES, star_hi=6))
    dom_terms = dow_terms = ()
    if quartz:
        dom, dom_terms = draw(with_terms(dom, day_of_month_term))
        dow, dow_terms = draw(with_terms(dow, day_of_week_term))
        assume(dom_terms or dow_terms)
    weekdays = frozenset(v % 7 for v in dow[1])
    gap = draw(st.sampled_from(["auto", "shift", "skip"])) if policies else "auto"
    repeat = draw(st.sampled_from(["auto", "once", "both"])) if policies else "auto"
    rule = Rule(
        minutes=minute[1],
        hours=hour[1],
        days=dom[1],
        months=month[1],
        weekdays=weekdays,
        dom_star=dom[0].startswith("*"),
        dow_star=dow[0].startswith("*"),
        wild=minute[0].startswith("*") or hour[0].startswith("*"),
        gap=gap,
        repeat=repeat,
        dom_terms=dom_terms,
        dow_terms=dow_terms,
    )
    expression = " ".join(part[0] for part in (minute, hour, dom, month, dow))
    return expression, rule


@st.composite
def instants(draw, zone: str):
    """Mostly within days before a real transition of ``zone``; sometimes anywhere."""
    year = draw(st.integers(1975, 2045))
    near = transitions_in_year(zone, year)
    seconds = draw(st.one_of(st.integers(-3 * 86400, 3 * 3600), st.integers(-3 * 3600, 3600)))
    if near and draw(st.integers(0, 4)) > 0:
        return draw(st.sampled_from(near)) + timedelta(seconds=seconds)
    return datetime(year, 1, 1, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 365 * 86400)))


@st.composite
def before_transition(draw, zone: str):
    """An instant up to 26 hours before a transition of ``zone`` (any zone with one)."""
    near = [t for year in (2011, 2024, 2027, 2031, 2040) for t in transitions_in_year(zone, year)]
    if not near:
        near = [t for year in (2011, 2024, 2027, 2031, 2040) for t in transitions_in_year("America/Santiago", year)]
    return draw(st.sampled_from(near)) - timedelta(seconds=draw(st.integers(0, 26 * 3600)))


def engine_fires(schedule: Schedule, after: datetime, until: datetime, limit: int) -> list[datetime]:
    fires = []
    for fire in ENGINE.iter_fires(schedule, after):
        if fire.nominal_at > until or len(fires) >= limit:
            break
        fires.append(fire.nominal_at)
    return fires


def check_against_reference(expression: str, rule: Rule, zone: str, after: datetime, span: timedelta | None = None) -> None:
    """Engine and reference agree on the first 12 fires, or on every fire up to
    ``after + span`` when that is later."""
    schedule = Schedule.cron(
        expression, zone, exact=True, gap=GapPolicy(rule.gap), repeat=RepeatPolicy(rule.repeat)
    )
    horizon = after + timedelta(days=120)
    fires = engine_fires(schedule, after, horizon, limit=12)
    until = fires[-1] if len(fires) == 12 else horizon
    if span is not None and after + span > until:
        until = after + span
        fires = engine_fires(schedule, after, until, limit=10**6)
    expected = brute_force(rule, ZoneInfo(zone), after, until)
    near = [t for t in transitions_in_year(zone, after.year) if after <= t <= until + timedelta(hours=3)]
    if near:
        event("a transition lies inside the compared window")
    assert fires == expected, f"{expression!r} in {zone} after {after.isoformat()}"
    # The properties the issue names, checked directly as well.
    zi = ZoneInfo(zone)
    assert all(a < b for a, b in zip(fires, fires[1:]))
    assert all(f > after for f in fires)
    for f in fires:
        wall = f.astimezone(zi).replace(tzinfo=None)
        after_gap = (f - timedelta(seconds=1)).astimezone(zi).utcoffset() < f.astimezone(zi).utcoffset()
        assert rule.matches(wall) or after_gap, f"{f} is neither a matching wall time nor the end of a gap"


@given(data=st.data(), rule=rules(), zone=st.sampled_from(ZONES))
def test_auto_policy_matches_reference(data, rule, zone):
    expression, rule = rule
    assume(rule.ever_fires())
    after = data.draw(instants(zone))
    check_against_reference(expression, rule, zone, after)


@given(data=st.data(), rule=rules(quartz=True), zone=st.sampled_from(ZONES))
def test_quartz_day_terms_match_reference(data, rule, zone):
    """L, L-n, nW, LW, d#k and dL, alone and in lists with plain values, under
    Vixie's day rule, against the reference's own reading of each term."""
    expression, rule = rule
    assume(rule.ever_fires())
    after = data.draw(instants(zone))
    check_against_reference(expression, rule, zone, after)


@given(data=st.data(), rule=rules(policies=True), zone=st.sampled_from(ZONES))
def test_explicit_policies_match_reference(data, rule, zone):
    expression, rule = rule
    assume(rule.ever_fires())
    after = data.draw(before_transition(zone))
    check_against_reference(expression, rule, zone, after, span=timedelta(hours=30))


@given(
    data=st.data(),
    zone=st.sampled_from(ZONES),
    expression=st.sampled_from(["30 2 * * *", "0,30 2 * * *", "*/15 * * * *", "0 0 * * *", "30 23 * * *", "* 1 * * *", "45 1 * * 0"]),
)
def test_common_expressions_near_transitions(data, zone, expression):
    """The shapes that DST affects most, always next to a transition."""
    from tickwheel_server.schedule.cron import parse_cron

    parsed = parse_cron(expression).resolve()
    rule = Rule(
        minutes=parsed.minutes, hours=parsed.hours, days=parsed.days, months=parsed.months,
        weekdays=parsed.weekdays, dom_star=parsed.dom_star, dow_star=parsed.dow_star, wild=parsed.wild,
    )
    after = data.draw(before_transition(zone))
    check_against_reference(expression, rule, zone, after, span=timedelta(hours=30))
