"""MTP speculation's proposer (memprof/core/terms/draft_head.py ``PROPOSER_BUFFERS``' mtp rows,
memprof/core/terms/mtp_drafter.py): vLLM drafts ``--speculative-config '{"method": "mtp"}'``
with the EAGLE proposer (V1 ``EagleProposer``, Model Runner V2 ``MTPSpeculator``, an
``AutoRegressiveSpeculator``), whose persistent buffers and profile-run forward are checked
here by hand with the shapes of the 0.28.0, 0.30.0 and 0.33.0 wheels (v1/spec_decode/
llm_base_proposer.py, v1/worker/gpu/spec_decode/, deepseek_mtp.py, qwen3_5_mtp.py)."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.models import load_model
from memprof.core.terms.activation import activation_stages
from memprof.core.terms.draft_head import BUFFERS, proposer_buffer_parts
from memprof.core.version_diff import applies, tags

MTP = Deployment(engine_version="0.30.0", tp=8, max_model_len=16384, max_num_seqs=256,
                 max_num_batched_tokens=8192, num_speculative_tokens=1,
                 speculative_method="mtp")
N, R = 8192, 256


def _ctx(model: str, dep: Deployment, gpu: str = "H200"):  # type: ignore[no-untyped-def]
    e = estimate(model, dep, gpu_name=gpu)
    return rank_context(e, e.ranks[0])


def _buffers(model: str, dep: Deployment) -> dict[str, int]:
    return dict(proposer_buffer_parts(_ctx(model, dep)))


def _stages(model: str, dep: Deployment) -> dict[str, int]:
    return {st.name: st.bytes for st in activation_stages(_ctx(model, dep))}


def test_v2_mtp_speculator_buffers_by_hand() -> None:
    # DeepSeek-R1 runs Model Runner V2 at 0.30.0: MTPSpeculator is an AutoRegressiveSpeculator,
    # the EAGLE list with H = the target's 7168 (the draft config is the target's), bf16
    got = _buffers("deepseek-r1", MTP)
    assert got["hidden_states [N,H]"] == N * 7168 * 2
    assert got["idx_mapping int32 [R]"] == R * 4
    assert sum(got.values()) == (N * 4 + N * 8 + N + 1536 + 1024 + 1024 + 1024 + 1024 + 2048
                                 + 2048 + 1024 + N * 7168 * 2 + 512 + 2048 + 2048)
    # 0.33.0: TargetDependentARSpeculator, idx_mapping int64
    assert "idx_mapping int64 [R]" in _buffers("deepseek-r1", MTP.with_(engine_version="0.33.0"))
    e = estimate("deepseek-r1", MTP, gpu_name="H200")
    [c] = [c for c in e.ranks[0].components if c.name == BUFFERS]
    assert c.bytes == sum(got.values()) and "MTPSpeculator" in c.formula


def test_v1_eagle_proposer_drafts_mtp_by_hand() -> None:
    # 0.28.0 runs DeepSeek-R1 in the V1 runner: SpecDecodeBaseProposer's buffers, H = 7168
    got = _buffers("deepseek-r1", MTP.with_(engine_version="0.28.0"))
    assert got == {"input_ids int32 [N]": N * 4, "positions int64 [N]": N * 8,
                   "hidden_states [N,H]": N * 7168 * 2, "arange int32 [max(R+1,N)]": N * 4,
                   "inputs_embeds [N,H]": N * 7168 * 2,
                   "backup_next_token_ids int32 [R]": 1024, "slot_mapping int64 [N]": N * 8}


def test_an_mrope_target_drafts_with_mrope_positions() -> None:
    # Qwen3.5's MTP config is the target's: uses_mrope, mrope_section [11, 11, 10] → V1's
    # mrope_positions int64 [3, N + 1] in place of positions [N] (rounded to 512 B)
    got = _buffers("qwen3.5-27b", MTP.with_(engine_version="0.28.0", tp=1))
    assert "positions int64 [N]" not in got
    assert got["mrope_positions int64 [3,N+1]"] == -(-3 * (N + 1) * 8 // 512) * 512
    # Model Runner V2 (0.30.0): Qwen3_5MTP embeds multimodal inputs, so load_model makes
    # inputs_embeds [N, H]; not where every modality is limited to 0, nor for DeepSeek
    v2 = _buffers("qwen3.5-27b", MTP.with_(tp=1))
    assert v2["inputs_embeds [N,H] (load_model)"] == N * 5120 * 2
    off = _buffers("qwen3.5-27b", MTP.with_(tp=1, limit_mm_per_prompt='{"image": 0, "video": 0}'))
    assert "inputs_embeds [N,H] (load_model)" not in off
    assert "inputs_embeds [N,H] (load_model)" not in _buffers("deepseek-r1", MTP)


def test_no_drafter_no_buffers_and_none_before_027() -> None:
    # without draft tokens the MTP layer is not loaded; 0.26.x charges no constructor buffer
    plain = estimate("deepseek-r1", MTP.with_(num_speculative_tokens=0), gpu_name="H200")
    assert BUFFERS not in {c.name for c in plain.ranks[0].components}
    old = estimate("deepseek-r1", MTP.with_(engine_version="0.26.0"), gpu_name="H200")
    assert BUFFERS not in {c.name for c in old.ranks[0].components}


def test_the_mtp_forward_in_the_profile_run_by_hand() -> None:
    # DeepSeek-R1 (deepseek_mtp.py): the runner holds the target's output; the predictor's
    # embeds, enorm and hnorm outputs, their [T, 2H] concatenation and eh_proj's output
    row = N * 7168 * 2
    got = _stages("deepseek-r1", MTP)
    assert got["MTP eh_proj (profile run)"] == 7 * row
    # the MTP layer's own stages carry four [T, H] more than the target's same-kind layer
    plain = _stages("deepseek-r1", MTP.with_(num_speculative_tokens=0))
    assert "MTP eh_proj (profile run)" not in plain
    assert got["MoE"] == plain["MoE"] + 4 * row
    # Qwen3.5 (qwen3_5_mtp.py): the normed embeddings, the concatenation and fc, with TP 2 its
    # shard, the all-gather's buffer and the gathered output (H = 2048 for the 35B-A3B)
    row = N * 2048 * 2
    got = _stages("qwen3.5-35b-a3b", MTP.with_(tp=2))
    assert got["MTP fc (profile run)"] == row + row + 2 * row + row // 2 + row + row


def test_multi_module_mtp_is_refused_on_v2() -> None:
    # two MTP layers and two draft tokens: Model Runner V2 drafts with MultiModuleMTPSpeculator
    # (0.28.0 on), whose buffers memprof does not size; one draft token keeps MTPSpeculator
    two = MTP.with_(hf_overrides='{"num_nextn_predict_layers": 2}')
    with pytest.raises(BadInput, match="MultiModuleMTPSpeculator"):
        estimate("deepseek-r1", two.with_(num_speculative_tokens=2), gpu_name="H200")
    assert _buffers("deepseek-r1", two)["hidden_states [N,H]"] == N * 7168 * 2


def test_the_rules_apply_to_mtp_deployments_only() -> None:
    from memprof.core.terms.draft_head import PROPOSER_BUFFERS

    spec = load_model("deepseek-r1", speculative_mtp=True)
    mtp_rows = PROPOSER_BUFFERS["mtp"]
    assert mtp_rows and "mtp" in tags(spec, MTP)
    assert all(applies(r, spec, MTP) for r in mtp_rows)
    plain = MTP.with_(num_speculative_tokens=0)
    assert not any(applies(r, load_model("deepseek-r1"), plain) for r in mtp_rows)
    # one table: the two methods' rows hold over the same releases with the same values
    eagle = PROPOSER_BUFFERS["eagle"]
    assert [(r.since, r.until, r.value) for r in eagle] == [(r.since, r.until, r.value)
                                                            for r in mtp_rows]


def test_versions_lists_the_mtp_rows(capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(["versions"]) == 0
    out = capsys.readouterr().out
    assert "mtp_proposer_buffers" in out and "multi_module_mtp_speculator" in out


def test_trace_refuses_the_mtp_drafter(capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    code = run(["trace", "-m", "deepseek-r1", "--gpu", "H200", "-tp", "8", "--device", "fake",
                "--num-speculative-tokens", "1", "--speculative-method", "mtp"])
    err = capsys.readouterr().err
    assert code == 2 and "error:" in err and "hint:" in err
    assert "Traceback" not in err


def test_the_estimate_says_what_the_mtp_drafter_sizes() -> None:
    e = estimate("deepseek-r1", MTP, gpu_name="H200")
    [note] = [n for n in e.notes if n.startswith("--speculative-method mtp")]
    assert "proposer's buffers" in note and "forward in the profile run are sized" in note
    assert "not modelled" in note
    # no draft tokens: no drafter, no note
    assert not [n for n in estimate("deepseek-r1", MTP.with_(num_speculative_tokens=0),
                                    gpu_name="H200").notes
                if n.startswith("--speculative-method mtp")]


def test_deepseek_v4_drafts_over_its_hc_wide_residual() -> None:
    # DeepSeek-V4 hands the drafter its pre-hc_head residual [T, hc_mult × H]: the proposer's
    # hidden_states buffer is 4 × 4096 wide (V2 _target_feeds_hc_residual); its predictor's
    # forward is not read, and the note says so
    dep = MTP.with_(tp=4)
    assert _buffers("deepseek-v4-flash", dep)["hidden_states [N,H]"] == N * 4 * 4096 * 2
    e = estimate("deepseek-v4-flash", dep, gpu_name="H200")
    [note] = [n for n in e.notes if n.startswith("--speculative-method mtp")]
    assert "not read for deepseek_v4" in note
    assert not [s for s in activation_stages(rank_context(e, e.ranks[0])) if "MTP" in s.name]
