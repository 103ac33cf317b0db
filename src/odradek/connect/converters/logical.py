"""Connect's logical types as plain numbers and bytes (Kafka's ``Decimal``,
``Date``, ``Time``, ``Timestamp``): Decimal as the big-endian two's complement
bytes of its unscaled value, Date as int days since 1970-01-01, Time as int ms
since midnight, Timestamp as int ms since the epoch. Python values are
``decimal.Decimal``, ``date``, ``time`` and aware UTC ``datetime`` (naive
datetimes are taken as UTC). Milliseconds truncate microseconds (toward
the past).
"""

from __future__ import annotations

import datetime as dt
import decimal

from odradek.connect.converters.simple import DataError

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
EPOCH_DATE = dt.date(1970, 1, 1)


def decimal_to_bytes(value: decimal.Decimal, scale: int) -> bytes:
    """The big-endian two's complement bytes of ``value``'s unscaled value."""
    unscaled = value.scaleb(scale)
    if unscaled != unscaled.to_integral_value():
        raise DataError(f"Decimal value has mismatching scale for given Decimal schema: "
                        f"{value} with scale {scale}")
    n = int(unscaled)
    return n.to_bytes(((n if n >= 0 else ~n).bit_length() + 8) // 8, "big", signed=True)


def decimal_from_bytes(raw: bytes, scale: int) -> decimal.Decimal:
    return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)


def date_to_days(value: dt.date) -> int:
    if isinstance(value, dt.datetime):
        value = value.date()
    return (value - EPOCH_DATE).days


def time_to_ms(value: dt.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 \
        + value.microsecond // 1000


def datetime_to_ms(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def days_to_date(days: int) -> dt.date:
    return EPOCH_DATE + dt.timedelta(days=days)


def ms_to_time(ms: int) -> dt.time:
    if not 0 <= ms < 86_400_000:
        raise DataError(f"Time values must be within a day: {ms} ms")
    s, milli = divmod(ms, 1000)
    return dt.time(s // 3600, s // 60 % 60, s % 60, milli * 1000)


def ms_to_datetime(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)
