"""What vLLM V0's eager profile-run forward keeps alive because of Python's references.

vLLM V0 runs its profile run (``ModelRunner.profile_run`` → ``_dummy_run`` → ``execute_model``)
without torch.compile: ``CompilationConfig.level`` defaults to 0 and only ``VLLM_USE_V1`` raises
it to PIECEWISE (0.7.1 and 0.7.3 config.py ``CompilationConfig`` / ``VllmConfig.__post_init__``;
0.6.x has no compilation of the model by default), and ``support_torch_compile`` models then call
``forward`` as it is (0.7.3 compilation/decorators.py ``do_not_compile``). So a tensor lives
exactly as long as a Python name holds it, and two such names set the MLP stage's live set:

1. The model's layer loop (``hidden_states, residual = layer(positions, hidden_states, ...)``:
   0.6.0, 0.6.5, 0.7.1, 0.7.3 and 0.8.5 models/llama.py ``LlamaModel.forward``, qwen2.py
   ``Qwen2Model.forward``, 0.7.3 deepseek_v2.py ``DeepseekV2Model.forward``) keeps the layer's
   input while the layer runs. The input is normed in place (``fused_add_rms_norm``) and is the
   attention's input; the attention's output, normed in place, is the MLP's. So while the MLP or
   MoE block runs, three [T, H] tensors are alive beside its own: the residual, the MLP input and
   the loop's layer input (``V0_EAGER_LAYER_INPUT``). V1's compiled graph frees a buffer at its
   last use and has no such frame (memprof's V1 stages are unchanged).
2. The MLP's own locals, by family and release (``Family.v0_mlp_gate_up``, made by
   memprof/core/models/families/row.py ``v0_gate_up_rows``):
   ``"kept"``: ``gate_up, _ = self.gate_up_proj(x); x = self.act_fn(gate_up); x, _ =
   self.down_proj(x)`` holds gate_up [T, 2I] through down_proj and its all-reduce;
   ``"rebound"``: ``x, _ = self.gate_up_proj(x); x = self.act_fn(x)`` frees gate_up once act_fn
   has made its output, so the stage peaks at max(gate_up + act, act + down out (+ the
   all-reduce's out-of-place output)).

Measured by the engine itself: published row 1203 (Qwen2.5-32B-Instruct, TP 2, vLLM 0.7.1 V0,
T = 10,000) logs the non-driver worker's peak as 1.26 GiB: residual, layer input, MLP input,
down_proj out and the all-reduce out (5 × [T, 5120] bf16) + gate_up [T, 27648] + act
[T, 13824] + the 8 MiB cuBLAS workspace = 1.257 GiB, where two [T, H] fewer than that (memprof
before this rule) print 1.16. tests/test_v0_eager_forward.py holds it.
"""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.models.families.row import V0_MLP_KEPT as KEPT
from memprof.core.models.families.row import V0_MLP_REBOUND as REBOUND
from memprof.core.versions import Rule, rule_in_force

__all__ = ["KEPT", "REBOUND", "V0_EAGER_LAYER_INPUT", "mlp_gate_up_form", "v0_layer_input_held"]

V0_EAGER_LAYER_INPUT: tuple[Rule, ...] = (
    Rule(name="v0_eager_layer_input", changes="activation peak: MLP / MoE stage",
         since="0.6.0", until="0.11.0", value=1,
         introduced_by="V0 engine's eager profile run (read from 0.6.0 on)",
         removed_by="V0 engine removed (0.11.0); V1 runs the compiled model",
         source="0.6.0, 0.6.5, 0.7.1, 0.7.3 and 0.8.5 model_executor/models/llama.py "
         "LlamaModel.forward and qwen2.py Qwen2Model.forward, 0.7.3 deepseek_v2.py "
         "DeepseekV2Model.forward (hidden_states, residual = layer(positions, hidden_states, "
         "...)); 0.7.1 and 0.7.3 config.py CompilationConfig.level = 0 unless VLLM_USE_V1; "
         "0.7.3 compilation/decorators.py support_torch_compile (do_not_compile: forward as is)",
         generation="v0"),
)


def v0_layer_input_held(dep: Deployment) -> bool:
    """Does the deployment's profile run keep the layer loop's input alive through the MLP
    (``V0_EAGER_LAYER_INPUT``: vLLM V0's eager forward)?"""
    return rule_in_force(V0_EAGER_LAYER_INPUT, dep.engine_version, dep.engine) is not None


def mlp_gate_up_form(rows: tuple[Rule, ...], dep: Deployment) -> tuple[str, bool]:
    """(form, read): the family's MLP form at the deployment's release; ``KEPT`` with read
    False where its rows say nothing there (the larger live set, and the stage's label says it
    was assumed)."""
    rule = rule_in_force(rows, dep.engine_version, dep.engine)
    return (KEPT, False) if rule is None else (str(rule.value), True)
