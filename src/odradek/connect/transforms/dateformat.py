"""Java ``SimpleDateFormat`` patterns, for TimestampConverter and
TimestampRouter: formatting and parsing in UTC (Kafka sets the format's time
zone to UTC).

Supported letters (a run of one letter is one field; its length matters as in
Java): ``y`` year (``yy`` two digits, read as 1970-2069; otherwise at least
that many digits), ``M`` month (``M``/``MM`` number, ``MMM`` short name,
``MMMM`` full name), ``d`` day of month, ``D`` day of year, ``H`` hour 0-23,
``k`` hour 1-24, ``K`` hour 0-11, ``h`` hour 1-12, ``m`` minute, ``s``
second, ``S`` millisecond (a number: ``SSS`` is three digits), ``E`` day name
(``EEE`` short, ``EEEE`` full), ``a`` AM/PM, ``Z`` zone as ``+0000``, ``X``
zone as ``Z`` in UTC (parsing also ``+hh``, ``+hhmm``, ``+hh:mm``), ``z``
zone name ``UTC``. Text in single quotes is literal (``''`` is a quote);
other non-letters are literal. Any other letter is refused. Names are
English. Numbers are read with as many digits as given unless the next field
is also a number (then exactly the pattern's width).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

SUPPORTED = "yMdDHkKhmsSEaZXz"
_NUMERIC = "ydDHkKhmsS"
_MONTHS = list(calendar.month_name)[1:]
_DAYS = list(calendar.day_name)


class PatternError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class _Token:
    letter: str  # "" for a literal
    count: int
    text: str = ""

    @property
    def numeric(self) -> bool:
        return self.letter in _NUMERIC or (self.letter == "M" and self.count <= 2)


def _tokens(pattern: str) -> list[_Token]:
    out: list[_Token] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            if pattern.startswith("''", i):
                out.append(_Token("", 0, "'"))
                i += 2
                continue
            text, j = [], i + 1
            while True:
                if j >= len(pattern):
                    raise PatternError(f"Unterminated quote in pattern {pattern!r}")
                if pattern.startswith("''", j):
                    text.append("'")
                    j += 2
                elif pattern[j] == "'":
                    break
                else:
                    text.append(pattern[j])
                    j += 1
            out.append(_Token("", 0, "".join(text)))
            i = j + 1
        elif c.isascii() and c.isalpha():
            if c not in SUPPORTED:
                raise PatternError(f"Illegal pattern character '{c}'")
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            out.append(_Token(c, j - i))
            i = j
        else:
            out.append(_Token("", 0, c))
            i += 1
    return out


class DateFormat:
    """One compiled pattern."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.tokens = _tokens(pattern)
        parts = []
        for i, t in enumerate(self.tokens):
            nxt = self.tokens[i + 1] if i + 1 < len(self.tokens) else None
            parts.append(self._regex(t, nxt is not None and nxt.numeric and nxt.letter != ""))
        self._re = re.compile("".join(parts), re.IGNORECASE)

    @staticmethod
    def _regex(t: _Token, adjacent: bool) -> str:
        if not t.letter:
            return re.escape(t.text)
        g = f"(?P<{t.letter}>"
        if t.numeric:
            digits = f"\\d{{{t.count}}}" if adjacent or (t.letter == "y" and t.count == 2) \
                else "\\d+"
            return g + digits + ")"
        if t.letter == "M":
            names = _MONTHS if t.count >= 4 else [m[:3] for m in _MONTHS]
        elif t.letter == "E":
            names = _DAYS if t.count >= 4 else [x[:3] for x in _DAYS]
        elif t.letter == "a":
            names = ["AM", "PM"]
        elif t.letter == "z":
            return g + "UTC|GMT)"
        else:  # Z, X
            return g + "Z|[+-]\\d{2}(?::?\\d{2})?)"
        return g + "|".join(names) + ")"

    def format(self, when: dt.datetime) -> str:
        """``when`` (naive: UTC) as text in UTC."""
        when = when.astimezone(dt.UTC) if when.tzinfo else when
        out = []
        for t in self.tokens:
            if not t.letter:
                out.append(t.text)
                continue
            n = t.count
            match t.letter:
                case "y":
                    out.append(f"{when.year % 100:02d}" if n == 2 else f"{when.year:0{n}d}")
                case "M":
                    out.append(_MONTHS[when.month - 1] if n >= 4 else
                               _MONTHS[when.month - 1][:3] if n == 3 else
                               f"{when.month:0{n}d}")
                case "d":
                    out.append(f"{when.day:0{n}d}")
                case "D":
                    out.append(f"{when.timetuple().tm_yday:0{n}d}")
                case "H":
                    out.append(f"{when.hour:0{n}d}")
                case "k":
                    out.append(f"{when.hour or 24:0{n}d}")
                case "K":
                    out.append(f"{when.hour % 12:0{n}d}")
                case "h":
                    out.append(f"{when.hour % 12 or 12:0{n}d}")
                case "m":
                    out.append(f"{when.minute:0{n}d}")
                case "s":
                    out.append(f"{when.second:0{n}d}")
                case "S":
                    out.append(f"{when.microsecond // 1000:0{n}d}")
                case "E":
                    name = _DAYS[when.weekday()]
                    out.append(name if n >= 4 else name[:3])
                case "a":
                    out.append("AM" if when.hour < 12 else "PM")
                case "Z":
                    out.append("+0000")
                case "X":
                    out.append("Z")
                case _:
                    out.append("UTC")
        return "".join(out)

    def parse(self, text: str) -> dt.datetime:
        """The aware UTC datetime ``text`` denotes (ValueError if it does not match)."""
        m = self._re.fullmatch(text.strip())
        if m is None:
            raise ValueError(f"Unparseable date: {text!r} (pattern {self.pattern!r})")
        g = m.groupdict()
        year = int(g["y"]) if g.get("y") else 1970
        if g.get("y") and len(g["y"]) == 2:
            year += 2000 if year < 70 else 1900
        month = 1
        if g.get("M"):
            raw = g["M"]
            month = int(raw) if raw.isdigit() else next(
                i + 1 for i, name in enumerate(_MONTHS) if name.lower().startswith(
                    raw.lower()[:3]))
        hour = 0
        for letter in "HkKh":
            if g.get(letter):
                hour = int(g[letter]) % (24 if letter in "Hk" else 12)
        if g.get("a") and g["a"].upper() == "PM" and hour < 12:
            hour += 12
        base = dt.datetime(year, month, int(g.get("d") or 1), hour, int(g.get("m") or 0),
                           int(g.get("s") or 0), int(g.get("S") or 0) * 1000, tzinfo=dt.UTC)
        if g.get("D"):
            base = base.replace(month=1, day=1) + dt.timedelta(days=int(g["D"]) - 1)
        zone = g.get("Z") or g.get("X")
        if zone and zone.upper() != "Z":
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
            base -= sign * offset
        return base
