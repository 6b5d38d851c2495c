"""Length-sorted batches under a token budget, shared by every forward pass.

Pure Python (no numpy, no torch): the torch extractor and the exported-graph
server (:mod:`skloes.serving`) batch texts by the same rule.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

__all__ = ["token_batches"]


def token_batches(order, lengths, batch_size, max_tokens):
    """Split ``order`` into batches of at most ``batch_size`` inputs and
    ``max_tokens`` padded tokens (``n_inputs * longest length``).

    ``lengths[i]`` is the length of input ``order[i]``; batches are consecutive
    runs of ``order``, so under a longest-first order each is as large as the
    budget allows. An input longer than ``max_tokens`` forms a batch alone.
    """
    batches, start, n = [], 0, len(order)
    while start < n:
        stop, longest = start + 1, lengths[start]
        while stop < n and stop - start < batch_size:
            longest = max(longest, lengths[stop])
            if (stop - start + 1) * longest > max_tokens:
                break
            stop += 1
        batches.append(order[start:stop])
        start = stop
    return batches
