"""The authorization decision (metadata/authorizer.py) and the ACL store
(metadata/acls.py): Kafka's rules case by case, then property tests against a
naive oracle written straight from the rules (research note §3.2)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from odradek.metadata.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclStore,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.metadata.authorizer import Policy, decide, decide_by_type, parse_super_users

T, G = ResourceType.TOPIC, ResourceType.GROUP
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
Op = AclOperation
ALICE, BOB = "User:alice", "User:bob"


def store(*bindings: AclBinding) -> AclStore:
    s = AclStore()
    for b in bindings:
        s.add(uuid.uuid4(), b)
    return s


def acl(rtype: int, name: str, op: int, perm: int = ALLOW, principal: str = ALICE,
        pattern: int = LIT, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


STRICT = Policy()
OPEN = Policy(allow_if_no_acl=True)


def ok(s: AclStore, op: int, rtype: int, name: str, principal: str = ALICE,
       host: str = "10.0.0.1", policy: Policy = STRICT) -> bool:
    return decide(s, policy, principal, host, op, rtype, name)


def test_no_acl_falls_back_to_allow_everyone_if_no_acl_found() -> None:
    assert not ok(store(), Op.READ, T, "t")
    assert ok(store(), Op.READ, T, "t", policy=OPEN)


def test_an_acl_on_the_resource_for_someone_else_denies_even_when_open() -> None:
    s = store(acl(T, "t", Op.READ, principal=BOB))
    assert not ok(s, Op.READ, T, "t", policy=OPEN)
    assert ok(s, Op.READ, T, "other", policy=OPEN)  # per resource


def test_deny_beats_allow() -> None:
    s = store(acl(T, "t", Op.READ), acl(T, "t", Op.READ, DENY))
    assert not ok(s, Op.READ, T, "t")
    s = store(acl(T, "*", Op.ALL), acl(T, "t", Op.WRITE, DENY, principal="User:*"))
    assert not ok(s, Op.WRITE, T, "t")
    assert ok(s, Op.READ, T, "t")


def test_literal_wildcard_and_prefixed_patterns() -> None:
    s = store(acl(T, "*", Op.READ), acl(T, "pay", Op.WRITE, pattern=PRE))
    assert ok(s, Op.READ, T, "anything")
    assert ok(s, Op.WRITE, T, "payments")
    assert ok(s, Op.WRITE, T, "pay")
    assert not ok(s, Op.WRITE, T, "pa")
    assert not ok(s, Op.WRITE, G, "payments")  # resource types apart


def test_principal_wildcard_and_hosts() -> None:
    s = store(acl(T, "t", Op.READ, principal="User:*", host="10.0.0.1"))
    assert ok(s, Op.READ, T, "t", principal=BOB, host="10.0.0.1")
    assert not ok(s, Op.READ, T, "t", principal=BOB, host="10.0.0.2")


def test_implied_operations_only_for_allow() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert ok(store(acl(T, "t", op)), Op.DESCRIBE, T, "t")
    assert ok(store(acl(T, "t", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, T, "t")
    assert not ok(store(acl(T, "t", Op.READ)), Op.WRITE, T, "t")
    assert not ok(store(acl(T, "t", Op.CREATE)), Op.DESCRIBE, T, "t")
    # DENY READ does not deny DESCRIBE; DENY ALL does
    s = store(acl(T, "t", Op.ALL), acl(T, "t", Op.READ, DENY))
    assert ok(s, Op.DESCRIBE, T, "t") and not ok(s, Op.READ, T, "t")
    assert not ok(store(acl(T, "t", Op.ALL), acl(T, "t", Op.ALL, DENY)), Op.DESCRIBE, T, "t")


def test_super_users_bypass_everything() -> None:
    policy = Policy(parse_super_users("User:admin; User:CN=broker,O=x"))
    s = store(acl(T, "t", Op.ALL, DENY, principal="User:*"))
    assert decide(s, policy, "User:admin", "h", Op.READ, T, "t")
    assert decide(s, policy, "User:CN=broker,O=x", "h", Op.READ, T, "t")
    assert not decide(s, policy, ALICE, "h", Op.READ, T, "t")


def test_by_resource_type() -> None:
    def any_ok(s: AclStore, policy: Policy = STRICT) -> bool:
        return decide_by_type(s, policy, ALICE, "h", Op.WRITE, T)
    assert not any_ok(store())
    assert any_ok(store(acl(T, "t", Op.WRITE)))
    assert any_ok(store(acl(T, "p", Op.WRITE, pattern=PRE)))
    assert not any_ok(store(acl(T, "t", Op.WRITE), acl(T, "t", Op.WRITE, DENY)))
    assert not any_ok(store(acl(T, "pay-1", Op.WRITE), acl(T, "pay", Op.ALL, DENY, pattern=PRE)))
    assert not any_ok(store(acl(T, "t", Op.WRITE), acl(T, "*", Op.WRITE, DENY)))
    assert any_ok(store(), OPEN)
    assert not any_ok(store(acl(T, "*", Op.WRITE, DENY)), OPEN)


def test_store_add_remove_and_identical_binding_once() -> None:
    s = AclStore()
    b = acl(T, "p", Op.READ, pattern=PRE)
    i1, i2 = uuid.uuid4(), uuid.uuid4()
    s.add(i1, b)
    s.add(i2, b)
    assert len(s) == 1 and list(s.applying(T, "px")) == [b]
    assert s.remove(i2) == b
    assert len(s) == 0 and not s.prefixed and not s.literal


def test_filters() -> None:
    lit = acl(T, "t", Op.READ)
    star = acl(T, "*", Op.READ)
    pre = acl(T, "t", Op.WRITE, DENY, pattern=PRE)
    grp = acl(G, "t", Op.READ, principal=BOB)
    s = store(lit, star, pre, grp)

    def names(f: AclFilter) -> set[AclBinding]:
        return {b for _i, b in s.matching(f)}

    assert names(AclFilter()) == {lit, star, pre, grp}
    assert names(AclFilter(T)) == {lit, star, pre}
    assert names(AclFilter(T, "t")) == {lit, pre}  # ANY pattern: exact name
    assert names(AclFilter(T, "t", LIT)) == {lit}
    assert names(AclFilter(T, "tx", PatternType.MATCH)) == {star, pre}
    assert names(AclFilter(T, "t", PatternType.MATCH)) == {lit, star, pre}
    assert names(AclFilter(principal=BOB)) == {grp}
    assert names(AclFilter(permission=DENY)) == {pre}
    assert names(AclFilter(operation=Op.WRITE)) == {pre}
    assert AclFilter(resource_type=ResourceType.UNKNOWN).unknown()
    assert AclFilter(pattern_type=PatternType.UNKNOWN).unknown()
    assert not AclFilter().unknown()


# -- against a naive oracle ----------------------------------------------------

NAMES = ["a", "ab", "abc", "b", "*"]
PRINCIPALS = [ALICE, BOB, "User:*"]
HOSTS = ["*", "h1", "h2"]
OPS = [Op.ALL, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.CREATE,
       Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]
bindings = st.builds(AclBinding, st.sampled_from([T, G]), st.sampled_from(NAMES),
                     st.sampled_from([LIT, PRE]), st.sampled_from(PRINCIPALS),
                     st.sampled_from(HOSTS), st.sampled_from(OPS), st.sampled_from([ALLOW, DENY]))


def covers(b: AclBinding, rtype: int, name: str) -> bool:
    if b.resource_type != rtype:
        return False
    if b.pattern_type == LIT:
        return b.name in (name, "*")
    return name.startswith(b.name)


def grants(b: AclBinding, op: int) -> bool:
    if b.operation in (op, Op.ALL):
        return True
    if b.permission == DENY:
        return False
    if op == Op.DESCRIBE:
        return b.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    return op == Op.DESCRIBE_CONFIGS and b.operation == Op.ALTER_CONFIGS


def oracle(acls: list[AclBinding], policy: Policy, principal: str, host: str, op: int,
           rtype: int, name: str) -> bool:
    if principal in policy.super_users:
        return True
    on_resource = [b for b in set(acls) if covers(b, rtype, name)]
    counting = [b for b in on_resource if b.principal in (principal, "User:*")
                and b.host in ("*", host) and grants(b, op)]
    if any(b.permission == DENY for b in counting):
        return False
    if counting:
        return True
    return not on_resource and policy.allow_if_no_acl


@given(st.lists(bindings, max_size=12), st.booleans(), st.sampled_from([ALICE, BOB]),
       st.sampled_from(["h1", "h2"]), st.sampled_from(OPS[1:]), st.sampled_from([T, G]),
       st.sampled_from([*NAMES[:4], "abcd", "c"]))
def test_decide_agrees_with_the_oracle(acls: list[AclBinding], open_: bool, principal: str,
                                      host: str, op: int, rtype: int, name: str) -> None:
    policy = Policy(frozenset({BOB}) if name == "c" else frozenset(), open_)
    assert decide(store(*acls), policy, principal, host, op, rtype, name) == oracle(
        acls, policy, principal, host, op, rtype, name)


@given(st.lists(bindings, max_size=12), st.lists(st.integers(0, 11), max_size=6))
def test_store_indexes_follow_adds_and_removes(acls: list[AclBinding], drops: list[int]) -> None:
    s = AclStore()
    ids = [uuid.UUID(int=i + 1) for i in range(len(acls))]
    for i, b in zip(ids, acls, strict=True):
        s.add(i, b)
    for d in drops:
        if d < len(ids):
            s.remove(ids[d])
    kept = set(s.by_id.values())
    for rtype in (T, G):
        for name in [*NAMES, "abcd"]:
            assert set(s.applying(rtype, name)) == {b for b in kept if covers(b, rtype, name)}
    assert set(AclFilter().matches(b) for b in kept) <= {True}
