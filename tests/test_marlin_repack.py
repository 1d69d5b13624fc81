"""The AWQ / GPTQ → Marlin repack of vLLM 0.8.x replayed into the 0.8-era reserved charge
(``memprof.core.terms.marlin_repack``, ``memprof.core.terms.reserved_charge``): each layer's
allocation sequence as the source writes it, the holes it leaves by hand, and the charge and
the workspaces of an AWQ / GPTQ deployment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memprof.base.units import KiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.marlin_repack import MarlinLinear, repack_ops
from memprof.core.terms.reserved_charge import NAME, holes_after_empty_cache

ROOT = Path(__file__).resolve().parents[1]

# Llama-3.1-8B's gate_up_proj as AWQ 4-bit g128 creates it on one GPU: N = 2 × 14336, K = 4096,
# G = 32; qweight (K, N/8) int32 = 56 MiB, qzeros (G, N/8) int32 = 448 KiB, scales (G, N) fp16
# = 1.75 MiB; one unpacked zero-point tensor U = G·N·4 = 3.5 MiB
GATE_UP = MarlinLinear(name="m", kind="awq", out=28672, inn=4096, groups=32, qweight=56 * MiB,
                       scales=1792 * KiB, qzeros=448 * KiB, bits=4, desc_act=False)


def test_awq_sequence_is_the_source_order() -> None:
    # created: qweight 0, qzeros 1, scales 2 (awq_marlin.py create_weights)
    load = [(0, 56 * MiB), (0, 448 * KiB), (0, 1792 * KiB)]
    ops = repack_ops([GATE_UP], {"m.qweight": 0, "m.qzeros": 1, "m.scales": 2}, load, 3, None,
                     "0.8.5")
    u = 3584 * KiB
    assert ops[3:] == [
        (0, 28672 // 64 * 16 * 4),  # 3: marlin_make_workspace(N), kept
        (0, 56 * MiB), (1, 0),  # 4: awq_marlin_repack; the old qweight freed
        (0, 512), (0, 1792 * KiB), (1, 5), (1, 2),  # scale_perm (64 int64), scales', old freed
        (0, u), (0, 64), (0, u), (1, 8), (1, 7),  # unpack_cols U0; undo-interleave → U1; U0 freed
        (0, 512), (0, u), (1, 10),  # marlin_zero_points: scale_perm → U2
        (0, 64), (0, u), (1, 12), (1, 11),  # interleave → U3; U2 freed
        (0, 448 * KiB), (1, 13), (1, 9), (1, 1),  # pack_cols → qzeros'; U3, U1, old qzeros freed
    ]


def test_awq_one_layer_holes_by_hand() -> None:
    # Load alone: qweight a 56 MiB segment of its own; scales (1–10 MiB) a 20 MiB segment with
    # 18.25 MiB free; qzeros a 2 MiB small segment with 1600 KiB free.
    load = [(0, 56 * MiB), (0, 448 * KiB), (0, 1792 * KiB)]
    assert holes_after_empty_cache(tuple(load)) == 18688 * KiB + 1600 * KiB
    # Repack: qweight' gets a new 56 MiB segment and the old one is returned whole. scales' is
    # best-fit into the 20 MiB segment's free 18.25 MiB, the four 3.5 MiB zero-point
    # temporaries come and go behind it, and the old scales are freed: that segment holds
    # scales' alone, 18.25 MiB free. The small segment keeps the workspace (28 KiB) and
    # qzeros' (448 KiB): 2048 − 476 = 1572 KiB free. The 512/64 B index tensors are freed.
    ops = repack_ops([GATE_UP], {"m.qweight": 0, "m.qzeros": 1, "m.scales": 2}, load, 3, None,
                     "0.8.5")
    assert holes_after_empty_cache(tuple(ops)) == 18688 * KiB + 1572 * KiB


def test_gptq_desc_act_sequence_and_holes_by_hand() -> None:
    # a 4096 × 4096 GPTQ 4-bit g128 desc_act layer at 0.9.0.1 on 108 SMs, as gptq_marlin.py
    # create_weights allocates it: qweight 8 MiB, g_idx 16 KiB, qzeros 64 KiB, scales 256 KiB
    g = MarlinLinear(name="g", kind="gptq", out=4096, inn=4096, groups=32, qweight=8 * MiB,
                     scales=256 * KiB, qzeros=64 * KiB, bits=4, desc_act=True)
    assert [n for n, _ in g.created()] == ["g.qweight", "g.g_idx", "g.qzeros", "g.scales"]
    load = [(0, 8 * MiB), (0, 16 * KiB), (0, 64 * KiB), (0, 256 * KiB)]
    ops = repack_ops([g], {"g.qweight": 0, "g.g_idx": 1, "g.qzeros": 2, "g.scales": 3}, load,
                     4, 108, "0.9.0.1")
    assert ops[4:] == [
        (0, 432),  # marlin_make_workspace_new: 108 SMs × 4 B
        (0, 16 * KiB), (0, 32 * KiB), (1, 5),  # argsort: sort values (dropped), int64 indices
        (0, 16 * KiB), (1, 6), (0, 16 * KiB),  # .to(int) (kept), int64 freed; sorted g_idx
        (1, 1), (1, 2),  # the old g_idx, the qzeros (empty for a symmetric type)
        (0, 8 * MiB), (1, 0), (0, 512), (0, 256 * KiB), (1, 10), (1, 3),
    ]
    # qweight' lands in the 20 MiB segment beside the old qweight, which is then freed: 12 MiB
    # free there; the one 2 MiB small segment keeps the workspace (432 B → a 512 B block),
    # g_idx_sort_indices and the sorted g_idx (16 KiB each) and scales' (256 KiB)
    assert holes_after_empty_cache(tuple(ops)) == 12 * MiB + 2048 * KiB - (512 + 288 * KiB)


def _config(tmp_path: Path, quant: dict[str, Any]) -> str:
    cfg = json.loads((ROOT / "configs/models/llama-3.1-8b.json").read_text())
    cfg["quantization_config"] = quant
    cfg["torch_dtype"] = "float16"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
       "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


def _parts(model: str, version: str, gpu: str) -> dict[str, int]:
    e = estimate(model, Deployment(engine_version=version), gpu_name=gpu)
    return {c.name: c.bytes for c in e.ranks[0].components}


def test_awq_deployment_charge_and_workspaces(tmp_path: Path) -> None:
    model = _config(tmp_path, AWQ)
    # the pre-0.9.0 workspaces by hand: per layer (qkv 6144 + o 4096 + gate_up 28672 + down
    # 4096) // 64 × 16 int32 = 43,008 B, × 32 layers
    assert _parts(model, "0.8.5", "A100-80GB")["Marlin workspaces"] == 43008 * 32
    # 0.9.0 on: one int32 per SM for each of the 128 linears (A100: 108 SMs)
    assert _parts(model, "0.9.0.1", "A100-80GB")["Marlin workspaces"] == 128 * 108 * 4
    # the repack adds holes to the 0.8-era charge: more than the load's own (1.49 MiB on
    # this rank before the repack was replayed), gone from 0.9.1
    charged = _parts(model, "0.8.5", "A100-80GB")[NAME]
    assert charged > 8 * MiB
    assert NAME not in _parts(model, "0.9.2", "A100-80GB")
    # a V0 run of the same release charges nothing of the kind
    assert NAME not in _parts(model, "0.8.5+v0", "A100-80GB")


@pytest.mark.parametrize(("gpu", "replayed"), [("A100-80GB", True), ("H100", False)])
def test_gptq_repack_replayed_where_marlin_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                gpu: str, replayed: bool) -> None:
    # sm80: MarlinLinearKernel; sm90: 0.8.x picks Machete first (not replayed), so the charge
    # there is the load's alone, as before this replay
    import memprof.core.terms.marlin_repack as repack

    model = _config(tmp_path, GPTQ)
    with_repack = _parts(model, "0.8.5", gpu)[NAME]
    monkeypatch.setattr(repack, "marlin_linears", lambda ctx: [])
    load_only = _parts(model, "0.8.5", gpu)[NAME]
    assert (with_repack > load_only) is replayed
    assert with_repack >= load_only


def test_moe_marlin_workspace_from_0_8_5(tmp_path: Path) -> None:
    # Mixtral-8x7B as AWQ (AWQMoEMethod experts) at TP2 on an A100 (108 SMs): 0.8.5's
    # create_weights adds torch.zeros(sms * 4) int32 per FusedMoE layer, absent in 0.8.4
    cfg = json.loads((ROOT / "configs/models/mixtral-8x7b.json").read_text())
    cfg["quantization_config"] = AWQ
    cfg["torch_dtype"] = "float16"
    (tmp_path / "config.json").write_text(json.dumps(cfg))

    def ws(version: str) -> int:
        e = estimate(str(tmp_path), Deployment(engine_version=version, tp=2),
                     gpu_name="A100-80GB")
        return sum(c.bytes for c in e.ranks[0].components if c.name == "Marlin workspaces")

    # at 0.8.4 the 64 attention linears per rank alone, each (N // 64) × 16 int32: qkv_proj
    # N = 2048 (16 of 32 heads × 128) + 2 × 512 (4 of 8 KV heads × 128) = 3072, o_proj N = 4096
    assert ws("0.8.4") == 32 * (3072 // 64 + 4096 // 64) * 16 * 4
    assert ws("0.8.5") - ws("0.8.4") == 32 * 108 * 4 * 4
    # from 0.9.0 every Marlin layer's workspace is per SM: 32 qkv + 32 o_proj × 108 × 4 B
    # + 32 MoE layers × 108 × 16 B
    assert ws("0.9.0.1") == 64 * 108 * 4 + 32 * 108 * 16
