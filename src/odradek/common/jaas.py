"""Kafka's ``sasl.jaas.config`` strings, read without a JVM.

Format (Kafka's ``JaasConfig``): one or more login modules, each
``<module class> <flag> [<key>=<value> ...];`` where the flag is ``required``,
``requisite``, ``sufficient`` or ``optional`` and a value is a bare word or a
double-quoted string (``\\"`` and ``\\\\`` escapes inside). Example::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Options are kept as strings; a :class:`LoginModule`'s ``repr`` never shows
their values (they hold passwords), and no :class:`JaasError` quotes one.
The broker's SASL listeners, the client's ``sasl.jaas.config`` property and the
Spark options all read JAAS strings here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class JaasError(ValueError):
    """The JAAS string does not parse; the message says where."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    module: str
    flag: str
    options: dict[str, str] = field(repr=False)

    @property
    def short_name(self) -> str:
        """``PlainLoginModule`` for ``org.apache....PlainLoginModule``."""
        return self.module.rsplit(".", 1)[-1]

    def __repr__(self) -> str:
        return f"LoginModule({self.module!r}, {self.flag!r}, keys={sorted(self.options)})"


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value): kind is "word", "string" or one of ``=`` ``;``."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "=;":
            out.append((ch, ch))
            i += 1
        elif ch == '"':
            i += 1
            buf = []
            while True:
                if i >= n:
                    raise JaasError("sasl.jaas.config: a quoted value is not closed")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    buf.append(text[i + 1])
                    i += 2
                    continue
                if c == '"':
                    i += 1
                    break
                buf.append(c)
                i += 1
            out.append(("string", "".join(buf)))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append(("word", text[start:i]))
    return out


def parse_jaas(text: str) -> list[LoginModule]:
    """Every login module of ``text``; JaasError on a malformed string."""
    toks = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(toks):
        kind, module = toks[i]
        if kind != "word":
            raise JaasError("sasl.jaas.config: expected a login module class name")
        if i + 1 >= len(toks) or toks[i + 1][0] != "word":
            raise JaasError(f"sasl.jaas.config: {module} needs a flag ({', '.join(FLAGS)})")
        flag = toks[i + 1][1].lower()
        if flag not in FLAGS:
            raise JaasError(f"sasl.jaas.config: bad flag {toks[i + 1][1]!r} after {module} "
                            f"({', '.join(FLAGS)})")
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(toks):
                raise JaasError(f"sasl.jaas.config: {module} must end with ';'")
            kind, value = toks[i]
            if kind == ";":
                i += 1
                break
            if (kind != "word" or i + 2 >= len(toks) or toks[i + 1][0] != "="
                    or toks[i + 2][0] not in ("word", "string")):
                raise JaasError(f"sasl.jaas.config: expected key=value in the options of "
                                f"{module}")
            options[value] = toks[i + 2][1]
            i += 3
        modules.append(LoginModule(module, flag, options))
    if not modules:
        raise JaasError("sasl.jaas.config: no login module")
    return modules


def single_module(text: str) -> LoginModule:
    """The login module of a ``sasl.jaas.config`` value (Kafka allows exactly one there)."""
    modules = parse_jaas(text)
    if len(modules) != 1:
        raise JaasError(f"sasl.jaas.config: one login module expected, found {len(modules)}")
    return modules[0]
