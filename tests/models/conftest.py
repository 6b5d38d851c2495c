"""Fixtures of the model tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty SKLOES_HOME of this test (bundles, conversions, caches)."""
    folder = tmp_path / "home"
    monkeypatch.setenv("SKLOES_HOME", str(folder))
    return folder
