"""Kafka's JAAS strings read by odradek.common.jaas."""

from __future__ import annotations

import pytest

from odradek.common.jaas import PLAIN_MODULE, JaasError, first_module, parse_jaas


def test_a_plain_module_with_users_and_escapes() -> None:
    module = first_module(
        f'{PLAIN_MODULE} required username="admin" password="a\\"b;c" user_admin="x y" '
        "user_bob=bare;")
    assert module.name == PLAIN_MODULE and module.flag == "required"
    assert module.short_name == "PlainLoginModule"
    assert module.options == {"username": "admin", "password": 'a"b;c', "user_admin": "x y",
                              "user_bob": "bare"}


def test_several_modules_are_kept_in_order_and_the_flag_is_case_free() -> None:
    modules = parse_jaas("a.B REQUIRED k=v; c.D optional;")
    assert [(m.name, m.flag, m.options) for m in modules] == [
        ("a.B", "required", {"k": "v"}), ("c.D", "optional", {})]


def test_secrets_stay_out_of_repr() -> None:
    assert "hunter2" not in repr(first_module(f'{PLAIN_MODULE} required password="hunter2";'))


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"),
    (f"{PLAIN_MODULE} username=\"a\";", "control flag"),
    (f'{PLAIN_MODULE} required username="a"', "must end with ';'"),
    (f'{PLAIN_MODULE} required username="a;', "not closed"),
    (f"{PLAIN_MODULE} required username;", "key=value"),
    ('"quoted" required;', "class name"),
])
def test_malformed_strings_are_refused_without_quoting_values(text: str, message: str) -> None:
    with pytest.raises(JaasError, match=message) as info:
        parse_jaas(text)
    assert '"a' not in str(info.value)
