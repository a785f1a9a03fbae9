"""Look-alike KB names share a skeleton; different names do not (issue 40 item 8)."""

from __future__ import annotations

import pytest

from docmind_core.accounts.names import name_skeleton, storable_name


@pytest.mark.parametrize("look_alike", [
    "Alice_priv", "ALICE_PRIV", "alice_pr\u0456v", "\u0430lice_priv", "alice\u200b_priv", "alice_priv\u202e",
    "\uff41lice_priv", "al\u0456ce_pr\u0456v", "  alice_priv ", "\u0430\u04cf\u0456\u0441\u0435_priv",
])
def test_look_alikes_share_the_skeleton(look_alike):
    assert name_skeleton(look_alike) == name_skeleton("alice_priv")


@pytest.mark.parametrize("other", ["alice_pub", "alice-priv", "alice_private", "bob_priv", "财务", "财务报告"])
def test_names_that_read_differently_do_not(other):
    assert name_skeleton(other) != name_skeleton("alice_priv")


def test_lone_surrogates_become_replacement_characters():
    assert storable_name("pl\ud800an\udcff.md") == "pl\ufffdan\ufffd.md"
    assert storable_name("计划 😀.md") == "计划 😀.md"
