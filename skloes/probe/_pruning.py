"""Pruning a fitted pipeline to the layers its selector kept.

A fitted ``HiddenStatesTransformer → selector → ...`` pipeline extracts every
layer and runs every block for each new input, although the selector reads a
few. :func:`prune_layers` returns the equivalent pipeline whose extractor asks
only for the selected layers, so its forward pass stops after the deepest of
them and pools only those.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy

from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from skloes.extraction import HiddenStatesTransformer
from skloes.probe._concatenation import SelectedLayerConcatenation
from skloes.selection._base import LayerSelectorMixin

__all__ = ["prune_layers"]


def _check_pipeline(pipeline):
    name = "prune_layers"
    if not isinstance(pipeline, Pipeline) or len(pipeline.steps) < 2:
        raise TypeError(
            f"{name}: `pipeline` must be a fitted Pipeline whose first steps are a "
            "HiddenStatesTransformer and a skloes layer selector; got "
            f"{type(pipeline).__name__}."
        )
    (_, extractor), (_, selector) = pipeline.steps[:2]
    if not isinstance(extractor, HiddenStatesTransformer):
        raise TypeError(
            f"{name}: the first step of `pipeline` must be a HiddenStatesTransformer; "
            f"got {type(extractor).__name__}."
        )
    if not isinstance(selector, LayerSelectorMixin):
        raise TypeError(
            f"{name}: the second step of `pipeline` must be a skloes layer selector "
            f"(skloes.selection); got {type(selector).__name__}."
        )
    check_is_fitted(extractor)
    check_is_fitted(selector)
    if selector.n_layers_in_ != extractor.n_layers_:
        raise ValueError(
            f"{name}: the selector was fitted on {selector.n_layers_in_} layers but "
            f"the extractor returns {extractor.n_layers_}; the pipeline is not "
            "fitted as one."
        )
    return extractor, selector


def prune_layers(pipeline):
    """The pipeline that extracts only the layers its selector kept.

    The returned pipeline predicts what ``pipeline`` predicts, but its
    extractor requests only the selected layers: the forward pass stops after
    the deepest selected block and pools only the selected layers. The
    selector step becomes a :class:`SelectedLayerConcatenation` that
    concatenates them as the selector did; every later step is kept (a copy).
    The loaded model is shared, not reloaded. With a ``cache``, the pruned
    extractor also reads the every-layer entries its full twin wrote.

    Read more in the :ref:`User Guide <probe>`.

    Parameters
    ----------
    pipeline : sklearn.pipeline.Pipeline
        Fitted; its first step a :class:`~skloes.extraction.HiddenStatesTransformer`
        and its second a fitted skloes layer selector (:mod:`skloes.selection`).

    Returns
    -------
    pruned : sklearn.pipeline.Pipeline
        Fitted, with the same step names.

    See Also
    --------
    LayerProbeClassifier : Fits and prunes in one estimator.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from skloes.extraction import HiddenStatesTransformer
    >>> from skloes.probe import prune_layers
    >>> from skloes.selection import LOESSelector
    >>> pipe = make_pipeline(HiddenStatesTransformer(),
    ...                      LOESSelector(n_layers_to_select=2),
    ...                      LogisticRegression())  # doctest: +SKIP
    >>> pruned = prune_layers(pipe.fit(texts, y))  # doctest: +SKIP
    >>> pruned[0].layers_  # doctest: +SKIP
    array([2, 3])
    """
    extractor, selector = _check_pipeline(pipeline)
    pruned = extractor._with_layers(extractor.layers_[selector.selected_layers_])
    concatenation = SelectedLayerConcatenation(selector).fit()
    (first, _), (second, _) = pipeline.steps[:2]
    rest = [(name, copy.deepcopy(step)) for name, step in pipeline.steps[2:]]
    return Pipeline(
        [(first, pruned), (second, concatenation), *rest],
        memory=pipeline.memory,
        verbose=pipeline.verbose,
    )
