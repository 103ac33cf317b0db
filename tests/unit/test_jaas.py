"""Kafka's JAAS strings read by odradek.common.jaas."""

from __future__ import annotations

import pytest

from odradek.common.jaas import PLAIN_MODULE, JaasError, parse_jaas, single_module


def test_a_plain_module_with_users_and_escapes() -> None:
    module = single_module(
        f'{PLAIN_MODULE} required username="admin" password="a\\"b;c" user_admin="x y" '
        "user_bob=bare;")
    assert module.module == PLAIN_MODULE and module.flag == "required"
    assert module.short_name == "PlainLoginModule"
    assert module.options == {"username": "admin", "password": 'a"b;c', "user_admin": "x y",
                              "user_bob": "bare"}


def test_several_modules_are_kept_in_order_and_the_flag_is_case_free() -> None:
    modules = parse_jaas("a.B REQUIRED k=v; c.D optional;")
    assert [(m.module, m.flag, m.options) for m in modules] == [
        ("a.B", "required", {"k": "v"}), ("c.D", "optional", {})]


def test_secrets_stay_out_of_repr() -> None:
    assert "hunter2" not in repr(single_module(f'{PLAIN_MODULE} required password="hunter2";'))


@pytest.mark.parametrize(("text", "message"), [
    ("", "no login module"),
    (f"{PLAIN_MODULE} username=\"a\";", "bad flag"),
    (f'{PLAIN_MODULE} required username="a"', "must end with ';'"),
    (f'{PLAIN_MODULE} required username="a;', "not closed"),
    (f"{PLAIN_MODULE} required username;", "key=value"),
    (f"{PLAIN_MODULE} required; {PLAIN_MODULE} required;", None),
    ('"quoted" required;', "class name"),
])
def test_malformed_strings_are_refused_without_quoting_values(text: str,
                                                              message: str | None) -> None:
    with pytest.raises(JaasError, match=message or "one login module") as info:
        if message is None:  # well formed, but a sasl.jaas.config value holds one module
            single_module(text)
        else:
            parse_jaas(text)
    assert '"a' not in str(info.value)
