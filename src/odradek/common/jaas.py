"""Kafka's JAAS configuration strings, read without a JVM.

Format (``sasl.jaas.config`` and ``listener.name.<l>.<mech>.sasl.jaas.config``)::

    <login module class> <flag> [<key>=<value> ...];

``flag`` is ``required``, ``requisite``, ``sufficient`` or ``optional``; a value
is a double-quoted string (backslash escapes the next character) or a bare
token. Several modules may follow one another, each ended by ``;`` (Kafka uses
the first). Passwords pass through here: nothing in this module logs, and
:class:`JaasError` messages never quote a value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class JaasError(ValueError):
    """A JAAS string that cannot be read (the message names the place, not the value)."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str
    """The login module's class name."""
    flag: str
    options: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def short_name(self) -> str:
        """``PlainLoginModule`` for ``org.apache....PlainLoginModule``."""
        return self.name.rsplit(".", 1)[-1]


def parse_jaas(text: str) -> list[LoginModule]:
    """Every login module in ``text``, in order; JaasError when malformed."""
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind != "word":
            raise JaasError("a JAAS entry must start with a login module class name")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word" or \
                tokens[i + 1][1].lower() not in FLAGS:
            raise JaasError(f"login module {value}: expected a control flag "
                            f"({', '.join(FLAGS)})")
        name, flag, i = value, tokens[i + 1][1].lower(), i + 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            if (tokens[i][0] != "word" or i + 2 >= len(tokens) or tokens[i + 1][0] != "="
                    or tokens[i + 2][0] not in ("word", "quoted")):
                raise JaasError(f"login module {name}: expected key=value options")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError(f"login module {name}: the entry must end with ';'")
        modules.append(LoginModule(name, flag, options))
        i += 1
    if not modules:
        raise JaasError("the JAAS configuration is empty")
    return modules


def first_module(text: str) -> LoginModule:
    """The login module Kafka uses: the first one of ``text``."""
    return parse_jaas(text)[0]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in ";=":
            out.append((c, c))
            i += 1
        elif c == '"':
            i += 1
            chars: list[str] = []
            while True:
                if i >= n:
                    raise JaasError("a quoted value is not closed")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    chars.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    chars.append(c)
                    i += 1
            out.append(("quoted", "".join(chars)))
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in ';="':
                j += 1
            out.append(("word", text[i:j]))
            i = j
    return out
