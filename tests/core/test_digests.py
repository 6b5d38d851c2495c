"""The one digest of a setting (skloes.core._digests)."""

from __future__ import annotations

import hashlib
import json

from skloes.core._digests import canonical_json, setting_digest

SETTING = {"b": [1, 2.5, None], "a": {"z": "é", "y": True}}


def test_canonical_json_sorts_keys_and_has_no_spaces():
    assert canonical_json(SETTING) == '{"a":{"y":true,"z":"\\u00e9"},"b":[1,2.5,null]}'
    assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1})


def test_the_digest_of_a_setting_is_the_sha256_of_its_canonical_json():
    text = canonical_json(SETTING).encode("utf-8")
    assert setting_digest(SETTING) == hashlib.sha256(text).hexdigest()
    assert setting_digest(SETTING, 32) == setting_digest(SETTING)[:32]
    assert setting_digest({"a": 1}) != setting_digest({"a": 2})


def test_the_cache_keeps_the_digest_that_names_its_folders():
    """The hidden-states cache names a settings folder by the spaced JSON it
    always hashed: a cache written before stays valid."""
    old = hashlib.sha256(json.dumps(SETTING, sort_keys=True).encode()).hexdigest()
    assert setting_digest(SETTING, 32, spaced=True) == old[:32]
    assert setting_digest(SETTING, 32, spaced=True) != setting_digest(SETTING, 32)
