from __future__ import annotations

import re

from orchestrator.hub.names import MAX_TOOL_NAME, namespaced, server_of

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_plain_names_are_joined_with_a_double_underscore() -> None:
    assert namespaced("fs", "read") == "fs__read"
    assert server_of("fs__read") == "fs" and server_of("plain") == ""


def test_characters_model_apis_reject_are_replaced() -> None:
    name = namespaced("my.server", "tools/list files")
    assert name == "my_server__tools_list_files" and VALID.match(name)


def test_long_names_are_shortened_with_a_stable_distinct_suffix() -> None:
    a = namespaced("server", "x" * 100)
    b = namespaced("server", "x" * 99 + "y")
    assert len(a) == MAX_TOOL_NAME and VALID.match(a)
    assert a != b and a == namespaced("server", "x" * 100)


def test_collisions_get_a_suffix() -> None:
    first = namespaced("a.b", "c")
    second = namespaced("a_b", "c", frozenset({first}))
    assert first == "a_b__c" and second != first and VALID.match(second)
