"""Models: from a name to a loaded backbone, from raw inputs to its hidden states.

Owns the offline bundles and the user model cache (``_registry``), model
resolution and loading (``_loading``: folders, hub ids, GGUF files, configs,
processors, safetensors), input encoding (``_inputs``: checks, tokenization,
batches), the forward pass that stops after the deepest needed block
(``_forward``), its compute precision (``_precision``: int8 and bfloat16
linear layers) and the tiny random models of the tests (``_testing``). A new
model loader goes here.

May import: utils, core.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause
