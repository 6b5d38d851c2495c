"""The bad-input cases' probes: one layer of the given (tiny) model, on the CPU."""

from __future__ import annotations

from skloes.probe import LayerProbeClassifier
from skloes.selection import LastKSelector


def first_layer():
    """A selector of the model's last layer alone (the fastest probe)."""
    return LastKSelector(n_layers_to_select=1)


def tiny_probe(model, **params):
    """A LayerProbeClassifier on the CPU of :func:`first_layer` (or ``params``)."""
    params.setdefault("device", "cpu")
    params.setdefault("selector", first_layer())
    return LayerProbeClassifier(model, **params)
