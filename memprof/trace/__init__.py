"""``memprof trace``: one rank of a deployment at its true shapes on a GPU (or on the fake
device through the allocator simulator), recorded phase by phase against the estimate.

- ``tracker``: every allocation torch dispatches, charged to an estimate component;
- ``device``: the GPU or the fake device, and every ``torch.cuda`` memory call;
- ``replica``: the rank's tensors and forward passes;
- ``run``: the phases and the result;
- ``dist``: the process group of a trace under torchrun.

Imports torch; nothing below this layer does.
"""
