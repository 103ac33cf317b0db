"""ssl.principal.mapping.rules, from Kafka's documented examples (security.html
§7.3 "Customizing SSL User Name") and its mapper's rules."""

from __future__ import annotations

import pytest

from odradek.broker.net.ssl_principal import NoMatchingRule, PrincipalMapper, RuleError

DOC_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
             "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
             "DEFAULT")


def test_the_documented_examples() -> None:
    mapper = PrincipalMapper.from_text(DOC_RULES)
    assert mapper.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,"
                       "C=Unknown") == "serviceuser"
    assert mapper.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,"
                       "C=Unknown") == "adminuser@admin"


def test_the_third_rule_and_default() -> None:
    mapper = PrincipalMapper.from_text(DOC_RULES)
    assert mapper.name("OU=x,cn=Some.Host,O=y") == "some.host"
    assert mapper.name("O=no common name") == "O=no common name"


def test_empty_rules_and_default_give_the_whole_dn() -> None:
    dn = "CN=writeuser,OU=Unknown,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
    assert PrincipalMapper.from_text("").name(dn) == dn
    assert PrincipalMapper.from_text("DEFAULT").name(dn) == dn


def test_upper_case_option() -> None:
    mapper = PrincipalMapper.from_text("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/U")
    assert mapper.name("CN=duke,OU=JavaSoft") == "DUKE@JAVASOFT"


def test_first_matching_rule_wins_and_rules_may_be_on_lines() -> None:
    mapper = PrincipalMapper.from_text(
        "RULE:^CN=(.*?),OU=A$/a-$1/\n  RULE:^CN=(.*?),OU=.*$/any-$1/ ,\nDEFAULT")
    assert mapper.name("CN=x,OU=A") == "a-x"
    assert mapper.name("CN=x,OU=B") == "any-x"


def test_no_matching_rule_refuses() -> None:
    mapper = PrincipalMapper.from_text("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule):
        mapper.name("CN=someone,OU=Other")


def test_a_rule_must_match_the_whole_dn() -> None:
    mapper = PrincipalMapper.from_text("RULE:CN=(\\w+)/$1/,DEFAULT")
    assert mapper.name("CN=alice,O=org") == "CN=alice,O=org"
    assert mapper.name("CN=alice") == "alice"


def test_escaped_slash_and_dollar() -> None:
    mapper = PrincipalMapper.from_text("RULE:^CN=(.*?)\\/x$/\\$$1\\/y/")
    assert mapper.name("CN=a/x") == "$a/y"


@pytest.mark.parametrize("bad", [
    "DEFAULTS", "RULE:", "RULE:/", "RULE:^CN=(.*?),OU=ServiceUsers.*$",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/LU", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/G",
    "RULE:^CN=(.*?/$1/", "DEFAULT,junk",
])
def test_invalid_rules_are_refused_with_the_key(bad: str) -> None:
    with pytest.raises(RuleError, match=r"ssl\.principal\.mapping\.rules"):
        PrincipalMapper.from_text(bad)
