"""ErrorHandler: tolerance, retries of RetriableError with backoff (fake
clock), the DLQ headers."""

from __future__ import annotations

import pytest

from odradek.connect.config import ConfigError
from odradek.connect.errors import ErrorHandler, RetriableError, Skip, dlq_headers


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds * 1000))
        self.now += seconds


class Flaky:
    """Raises ``error`` the first ``times`` calls, then returns "ok"."""

    def __init__(self, times: int, error: Exception) -> None:
        self.left = times
        self.error = error
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise self.error
        return "ok"


def handler(t: FakeTime, **props: str) -> ErrorHandler:
    return ErrorHandler(props, sink=True, clock=t.clock, sleep=t.sleep)


def test_retriable_error_is_retried_with_doubling_backoff() -> None:
    t = FakeTime()
    h = handler(t, **{"errors.retry.timeout": "10000", "errors.retry.delay.max.ms": "1000"})
    fn = Flaky(4, RetriableError("down"))
    assert h.run("TASK_PUT", "Sink", fn) == "ok"
    assert t.sleeps == [300, 600, 1000, 1000] and fn.calls == 5
    assert h.failures == 0 and h.retries == 4


def test_retries_stop_at_the_timeout_then_tolerance_decides() -> None:
    t = FakeTime()
    h = handler(t, **{"errors.retry.timeout": "1000", "errors.tolerance": "all"})
    fn = Flaky(100, RetriableError("down"))
    with pytest.raises(Skip) as e:
        h.run("VALUE_CONVERTER", "JsonConverter", fn, topic="t", partition=1, offset=5)
    assert t.sleeps == [300, 600, 100]
    assert isinstance(e.value.failure.error, RetriableError)
    assert (h.failures, h.skipped) == (1, 1)
    strict = handler(FakeTime(), **{"errors.retry.timeout": "1000"})
    with pytest.raises(RetriableError):
        strict.run("VALUE_CONVERTER", "JsonConverter", Flaky(100, RetriableError("x")))


def test_no_retry_by_default_and_for_other_errors() -> None:
    t = FakeTime()
    fn = Flaky(1, RetriableError("down"))
    with pytest.raises(RetriableError):
        handler(t).run("TRANSFORMATION", "Cast", fn)
    assert fn.calls == 1 and t.sleeps == []
    other = Flaky(1, ValueError("bad"))
    with pytest.raises(ValueError):
        handler(t, **{"errors.retry.timeout": "-1"}).run("TRANSFORMATION", "Cast", other)
    assert other.calls == 1


def test_retry_forever_until_success_and_stop() -> None:
    t = FakeTime()
    h = handler(t, **{"errors.retry.timeout": "-1", "errors.retry.delay.max.ms": "500"})
    assert h.run("TASK_PUT", "Sink", Flaky(50, RetriableError("x"))) == "ok"
    assert t.sleeps[:3] == [300, 500, 500] and len(t.sleeps) == 50
    h.stop()
    with pytest.raises(RetriableError):
        h.run("TASK_PUT", "Sink", Flaky(1, RetriableError("x")))


def test_bad_error_settings_are_named() -> None:
    with pytest.raises(ConfigError) as e:
        handler(FakeTime(), **{"errors.retry.timeout": "-2"})
    assert e.value.name == "errors.retry.timeout"
    with pytest.raises(ConfigError) as e:
        handler(FakeTime(), **{"errors.tolerance": "some"})
    assert e.value.name == "errors.tolerance"


def test_dlq_headers() -> None:
    h = handler(FakeTime(), **{"errors.tolerance": "all"})
    with pytest.raises(Skip) as e:
        h.run("VALUE_CONVERTER", "JsonConverter", Flaky(1, ValueError("bad json")),
              topic="t", partition=2, offset=9)
    headers = dict(dlq_headers(e.value.failure, "c", 0))
    assert headers["__connect.errors.topic"] == b"t"
    assert headers["__connect.errors.partition"] == b"2"
    assert headers["__connect.errors.offset"] == b"9"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.exception.message"] == b"bad json"
