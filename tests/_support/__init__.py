"""Helpers the tests share (importable as ``_support``: tests/conftest.py puts
the tests folder on ``sys.path``)."""
