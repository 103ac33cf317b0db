"""``ssl.principal.mapping.rules``: a TLS client's certificate subject to a user name.

Pure: strings in, strings out. The subject DN is the RFC 2253 string, most
specific attribute first, as Java's ``X500Principal.getName()`` gives it and
Kafka's ``SslPrincipalMapper`` sees it (``CN=alice,OU=ops,O=org,C=US``).

The rules (Kafka's syntax) are a list separated by commas or newlines; a
regular expression may itself hold commas, so the list is read rule by rule,
not split:

* ``DEFAULT``: the whole DN;
* ``RULE:<regex>/<replacement>/`` with an optional ``L`` or ``U`` after the
  last slash (lower- or upper-case the result). ``\\/`` is a slash inside the
  regex or replacement. The rule applies when the regex matches the *whole*
  DN; every match is then replaced (Java's ``replaceAll``), ``$1`` naming a
  group.

The first rule that applies wins; when none does, the connection is refused
(:class:`NoMatchingRule`), as Kafka refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEY = "ssl.principal.mapping.rules"

_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)"
    r"|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU]?))"
    r"\s*(?:[,\n]|$)")


class RuleError(ValueError):
    """The rules do not parse; the message is one line naming the key."""


class NoMatchingRule(Exception):
    """No rule applies to a DN (Kafka refuses the connection)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule; ``pattern`` None is ``DEFAULT``."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""
    """"L", "U" or ""."""

    def apply(self, dn: str) -> str | None:
        """The mapped name, or None when this rule does not apply to ``dn``."""
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        template = self.replacement
        result = self.pattern.sub(lambda m: _expand(template, m), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _expand(template: str, match: re.Match[str]) -> str:
    """Java's replacement syntax: ``$n`` is group n (as many digits as name a
    group), ``\\x`` is a literal x, anything else is itself."""
    out: list[str] = []
    i, n = 0, len(template)
    groups = match.re.groups
    while i < n:
        ch = template[i]
        if ch == "\\" and i + 1 < n:
            out.append(template[i + 1])
            i += 2
        elif ch == "$" and i + 1 < n and template[i + 1].isdigit():
            j = i + 2
            number = int(template[i + 1])
            while j < n and template[j].isdigit() and number * 10 + int(template[j]) <= groups:
                number = number * 10 + int(template[j])
                j += 1
            if number > groups:
                raise NoMatchingRule(f"{KEY}: no group {number} in {match.re.pattern!r}")
            out.append(match.group(number) or "")
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Kafka's rule list → rules in order (RuleError, one line, when it does not parse)."""
    if not text.strip():
        return (Rule(),)
    rules: list[Rule] = []
    at = 0
    while at < len(text):
        if not text[at:].strip():
            break
        match = _RULE.match(text, at)
        if match is None or match.end() == at:
            raise RuleError(f"{KEY}: invalid rule at {text[at:].strip()[:40]!r}; expected "
                            "RULE:regex/replacement/[LU] or DEFAULT, separated by commas")
        if match.group("default"):
            rules.append(Rule())
        else:
            try:
                pattern = re.compile(match.group("pattern"))
            except re.error as exc:
                raise RuleError(f"{KEY}: bad regular expression "
                                f"{match.group('pattern')!r}: {exc}") from None
            rules.append(Rule(pattern, match.group("replacement"), match.group("case")))
        at = match.end()
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class PrincipalMapper:
    """The parsed rules of one listener."""

    rules: tuple[Rule, ...] = (Rule(),)

    @classmethod
    def from_text(cls, text: str) -> PrincipalMapper:
        return cls(parse_rules(text))

    def name(self, dn: str) -> str:
        """The user name of subject ``dn`` (NoMatchingRule when no rule applies)."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"no rule of {KEY} applies to {dn!r}")
