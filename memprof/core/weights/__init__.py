"""Weights of each rank, tensor by tensor, sharded as vLLM shards them, one module per block type.

- ``formats``: bytes of a linear under each quantisation scheme;
- ``shard``: the tensor record and the TP/DP split of linears, vectors, embeddings;
- ``attention`` / ``mlp``: the blocks of a layer;
- ``rank``: a rank's layers, embeddings and head, aggregated into report rows.
"""

from memprof.core.weights.mlp import mxfp4_moe_layout
from memprof.core.weights.rank import (
    WeightGroup,
    group_weights,
    rank_weights,
    unsharded_total,
    weights_in_order,
    weights_key,
)
from memprof.core.weights.shard import WeightTensor, model_dtype

__all__ = ["WeightGroup", "WeightTensor", "group_weights", "model_dtype", "mxfp4_moe_layout",
           "rank_weights", "unsharded_total", "weights_in_order", "weights_key"]
