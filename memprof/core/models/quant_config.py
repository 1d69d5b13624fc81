"""The quantisation a checkpoint declares (``quantization_config``) or ``--quantization`` asks
for, as vLLM reads them."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from memprof.base.errors import ConfigError
from memprof.core.models.spec import ModelSpec, QuantConfig
from memprof.core.versions import Rule, rule_in_force

# --- quantisation --------------------------------------------------------------------------------

QUANT_METHODS = ("none", "fp8", "fp8_per_channel", "mxfp4", "nvfp4", "awq", "gptq", "wna16",
                 "int8_w8a8", "bnb4", "gguf")
_FLAG_ALIASES = {
    "modelopt_fp4": "nvfp4",
    "nvfp4": "nvfp4",
    "modelopt": "fp8_per_channel",
    "fp8": "fp8",
    "mxfp4": "mxfp4",
    "awq": "awq",
    "awq_marlin": "awq",
    "gptq": "gptq",
    "gptq_marlin": "gptq",
    "compressed-tensors": "compressed-tensors",
    "compressed_tensors": "compressed-tensors",
    "gguf": "gguf",
    "bitsandbytes": "bnb4",
    "none": "none",
}


def renamed(name: str, prefixes: tuple[tuple[str, str], ...]) -> str:
    """A checkpoint module name under the model's names (the first prefix it starts with
    replaced, as ``WeightsMapper.apply_list`` does)."""
    for orig, new in prefixes:
        if name.startswith(orig):
            return new + name[len(orig):]
    return name


def quant_from_config(cfg: dict[str, Any],
                      prefixes: tuple[tuple[str, str], ...] = ()) -> QuantConfig | None:
    """Read ``quantization_config`` as vLLM reads it (method, block/group, excluded modules,
    each renamed by the family's ``weight_prefixes``)."""
    q = cfg.get("quantization_config")
    if not q:
        return None
    if not isinstance(q, dict):
        raise ConfigError("quantization_config must be an object", hint="fix config.json")
    method = str(q.get("quant_method", "")).lower()
    exclude = tuple(
        renamed(str(p), prefixes)
        for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules")
        for p in (q.get(key) or [])
    )
    if method == "fp8":
        block = q.get("weight_block_size")
        return QuantConfig(
            method="fp8" if block else "fp8_per_tensor",
            block=(int(block[0]), int(block[1])) if block else None,
            exclude=exclude, expert_dtype=cfg.get("expert_dtype"),
        )
    if method == "mxfp4":
        return QuantConfig(method="mxfp4", group_size=32, bits=4, exclude=exclude)
    if method in ("awq", "gptq"):
        # vLLM reads both with get_from_keys, which raises when none of the keys is there
        # (model_executor/layers/quantization/awq.py AWQConfig.from_config: ["w_bit", "bits"],
        # ["q_group_size", "group_size"]; gptq.py GPTQConfig.from_config: ["bits"],
        # ["group_size"], v0.11.0): a checkpoint without them is refused, not given 4/128
        bits_keys = ("w_bit", "bits") if method == "awq" else ("bits",)
        group_keys = ("q_group_size", "group_size") if method == "awq" else ("group_size",)
        bits = next((q[k] for k in bits_keys if q.get(k) is not None), None)
        group = next((q[k] for k in group_keys if q.get(k) is not None), None)
        for keys, value in ((bits_keys, bits), (group_keys, group)):
            if value is None:
                raise ConfigError(
                    f"quantization_config ({method}) has no {' or '.join(map(repr, keys))}",
                    hint=f"vLLM's {method.upper()} config requires it; use the checkpoint's "
                    "own config.json")
        assert bits is not None and group is not None
        # GPTQMarlinConfig.is_gptq_marlin_compatible (gptq_marlin.py, v0.11.0): bits,
        # group_size, sym and desc_act all stated, (bits, sym) in TYPE_MAP {(4, True),
        # (8, True)}, group_size in MARLIN_SUPPORTED_GROUP_SIZES (-1, 32, 64, 128)
        sym = q.get("sym")
        marlin = (method == "gptq" and sym is True and q.get("desc_act") is not None
                  and int(bits) in (4, 8) and int(group) in (-1, 32, 64, 128))
        return QuantConfig(method=method, group_size=int(group), bits=int(bits),
                           exclude=exclude,
                           desc_act=bool(q.get("desc_act", False)),
                           zero_point=method == "awq" or sym is not True, marlin=marlin)
    if method == "compressed-tensors":
        return compressed_tensors(q, exclude)
    if method == "bitsandbytes":
        return bitsandbytes(q, exclude)
    if method == "gguf":
        return gguf(q, cfg)
    if method == "modelopt":
        return modelopt(q, exclude)
    raise ConfigError(
        f"memprof does not know the quantization method {method!r}",
        hint="known: fp8 (block or per-tensor), mxfp4, modelopt (nvfp4/fp8), awq, gptq, "
        "compressed-tensors, bitsandbytes (4-bit); or override with --quantization",
    )


# vLLM's --quantization gptq / awq, the plain name, on a checkpoint of that method (or on none):
# up to these releases it forces the plain kernels over Marlin (GPTQMarlinConfig /
# AWQMarlinConfig.override_quantization_method take it as the user's choice: "forcing gptq",
# "forcing awq"; get_quantization_config maps "gptq" to GPTQConfig, "awq" to AWQConfig). From
# them one config serves every spelling: quantization/__init__.py maps "gptq", "gptq_marlin" and
# "auto_gptq" to AutoGPTQConfig (0.22.0), "awq", "awq_marlin" and "auto_awq" to AutoAWQConfig
# (0.24.0), whose override_quantization_method takes the plain name as valid and whose
# get_quant_method runs the Marlin kernel where check_marlin_supported holds on CUDA
GPTQ_FLAG_FORCES_PLAIN: tuple[Rule, ...] = (
    Rule(name="gptq_flag_forces_plain",
         changes="--quantization gptq: the GPTQ linear (exllama), not Marlin",
         since=None, until="0.22.0", value=True,
         introduced_by="read first in 0.6.5 (earlier releases not read)",
         removed_by="AutoGPTQConfig serves gptq, gptq_marlin and auto_gptq (first released in "
         "0.22.0)",
         source="0.6.5 / 0.11.0 / 0.21.0 model_executor/layers/quantization/gptq_marlin.py "
         "GPTQMarlinConfig.override_quantization_method ('forcing gptq'), __init__.py "
         "get_quantization_config 'gptq': GPTQConfig; 0.22.0 / 0.23.0 __init__.py 'gptq': "
         "AutoGPTQConfig, auto_gptq.py override_quantization_method (user_quant in gptq, "
         "gptq_marlin, auto_gptq, marlin)", applies_to="marlin"),
)
AWQ_FLAG_FORCES_PLAIN: tuple[Rule, ...] = (
    Rule(name="awq_flag_forces_plain",
         changes="--quantization awq: the AWQ linear, not Marlin",
         since=None, until="0.24.0", value=True,
         introduced_by="read first in 0.6.5 (earlier releases not read)",
         removed_by="AutoAWQConfig serves awq, awq_marlin and auto_awq (first released in "
         "0.24.0)",
         source="0.6.5 / 0.13.0 / 0.21.0 / 0.23.0 model_executor/layers/quantization/"
         "awq_marlin.py AWQMarlinConfig.override_quantization_method ('forcing awq'), "
         "__init__.py get_quantization_config 'awq': AWQConfig; 0.24.0 / 0.28.0 __init__.py "
         "'awq': AutoAWQConfig, auto_awq.py override_quantization_method (user_quant in awq, "
         "awq_marlin, auto_awq, marlin) and get_quant_method (AutoAWQMarlinLinearMethod where "
         "check_marlin_supported)", applies_to="marlin"),
)
RULES = (GPTQ_FLAG_FORCES_PLAIN, AWQ_FLAG_FORCES_PLAIN)


def plain_name_forced(flag: str, version: str | None, by_release: bool = True) -> bool:
    """Does ``--quantization gptq`` / ``awq`` (the plain name) keep the checkpoint off Marlin at
    ``version`` (``None``: the newest release)? Any other flag: no. ``by_release`` False (an
    engine whose releases are not read here, ``Engine.quant_flag_by_release``: SGLang): the
    spelling is read as vLLM's before the merge."""
    rules = {"gptq": GPTQ_FLAG_FORCES_PLAIN, "awq": AWQ_FLAG_FORCES_PLAIN}.get(flag.lower())
    if rules is None:
        return False
    if not by_release:
        return True
    return rule_in_force(rules, version) is not None


def quant_from_flag(flag: str, spec: ModelSpec, version: str | None = None,
                    by_release: bool = True) -> QuantConfig | None:
    """``--quantization`` as vLLM takes it.

    A method the checkpoint already declares keeps the checkpoint's details. On an unquantised
    config, ``fp8`` is vLLM's online dynamic per-tensor fp8; the weight-only methods are sized as
    the usual checkpoints of that method ship (awq/gptq 4-bit, group 128; nvfp4 group 16; mxfp4
    group 32), with embeddings, lm_head and routers left in the model dtype. ``gptq`` / ``awq``
    keep the plain kernels only at the releases where vLLM forces them (``plain_name_forced``
    at ``version``; ``by_release``: whether the engine's releases are read; ``None``: the
    newest release).
    """
    method = _FLAG_ALIASES.get(flag.lower())
    if method is None:
        raise ConfigError(
            f"unknown --quantization {flag!r}",
            hint="one of: " + ", ".join(sorted(_FLAG_ALIASES)),
        )
    if method == "none":
        return None
    if (spec.quant is not None and spec.quant.checkpoint_format == "modelopt"
            and flag.lower() in ("modelopt", "modelopt_fp4", "nvfp4")):
        return spec.quant
    if method == "gguf" and (spec.quant is None or spec.quant.method != "gguf"):
        raise ConfigError(
            "--quantization gguf needs the GGUF file's tensor types",
            hint="vLLM reads them from the .gguf file; give them as the config's "
            "quantization_config {\"quant_method\": \"gguf\", \"file_type\": \"Q8_0\"} "
            "or {..., \"tensor_types\": {...}} (e.g. with --hf-overrides)")
    if method == _CT:
        if spec.quant is not None and spec.quant.checkpoint_format == _CT:
            return spec.quant
        raise ConfigError(
            "--quantization compressed-tensors needs a checkpoint that declares it",
            hint="vLLM reads compressed-tensors from the checkpoint's quantization_config; "
            "drop the flag or point --model at such a checkpoint")
    if (spec.quant is not None and spec.quant.method.startswith(method)
            and spec.quant.checkpoint_format != _CT):
        forced = plain_name_forced(flag, version, by_release)
        if flag.lower() == "gptq" and spec.quant.marlin and forced:
            # an explicit ``gptq`` keeps vLLM off gptq_marlin
            # (GPTQMarlinConfig.override_quantization_method, v0.11.0: "forcing gptq")
            return replace(spec.quant, marlin=False)
        if flag.lower() == "awq" and spec.quant.method == "awq" and forced:
            # likewise an explicit ``awq`` keeps an AWQ checkpoint off awq_marlin
            # (AWQMarlinConfig.override_quantization_method, v0.13.0: "forcing awq"): its own
            # format, read as no Marlin kernel's (``source`` "forced": not "config")
            return replace(spec.quant, source="forced")
        return spec.quant
    if spec.quant is not None:
        raise ConfigError(
            f"the checkpoint is already quantised with {spec.quant.method}; "
            f"--quantization {flag} does not match it",
            hint="drop --quantization, or point --model at the other checkpoint's config.json",
        )
    if method == "fp8":
        return QuantConfig(method="fp8_per_tensor", source="flag")
    if method == "fp8_per_channel":
        return QuantConfig(method="fp8_per_channel", source="flag")
    if method in ("awq", "gptq"):
        # ``gptq_marlin`` names vLLM's GPTQMarlinConfig, which serves only a Marlin-compatible
        # checkpoint (symmetric 4/8-bit, group -1/32/64/128: is_gptq_marlin_compatible,
        # gptq_marlin.py, v0.6.5 and v0.11.0): the usual 4-bit group-128 one, on Marlin
        # the plain name from the release that serves every spelling with one config runs
        # Marlin as the _marlin name does (GPTQ_FLAG_FORCES_PLAIN, AWQ_FLAG_FORCES_PLAIN)
        return QuantConfig(method=method, group_size=128, bits=4, source="flag",
                           marlin=flag.lower() in ("gptq_marlin", "awq_marlin")
                           or not plain_name_forced(flag, version, by_release))
    if method == "nvfp4":
        return QuantConfig(method="nvfp4", group_size=16, bits=4, source="flag")
    if method == "bnb4":
        # in-flight: the loader quantises every linear's bf16 weight on the GPU with
        # quantize_4bit(compress_statistics=True, quant_type="nf4") and bitsandbytes' default
        # block of 64 (BitsAndBytesModelLoader._unquantized_generator,
        # model_executor/model_loader/loader.py v0.7.3, bitsandbytes_loader.py v0.11.0);
        # embeddings and lm_head are not LinearBase and stay in the model dtype
        return QuantConfig(method="bnb4", bits=4, group_size=64, strategy="nf4",
                           double_quant=True, source="flag")
    return QuantConfig(method="mxfp4", group_size=32, bits=4, source="flag")


# --- compressed-tensors ---------------------------------------------------------------------------
#
# vLLM v0.11.0 picks one scheme per layer from the ``config_groups`` entry whose ``targets`` match
# it (model_executor/layers/quantization/compressed_tensors/compressed_tensors.py,
# CompressedTensorsConfig._get_scheme_from_parts). memprof models the schemes below, each sized in
# memprof.core.weights.formats; any other combination is refused by name.

_CT = "compressed-tensors"
_CT_FORMATS = ("pack-quantized", "float-quantized", "naive-quantized", "int-quantized",
               "nvfp4-pack-quantized")
_CT_ACT_FORMATS = ("float-quantized", "naive-quantized", "int-quantized", "nvfp4-pack-quantized")


def _ct_bad(what: str) -> ConfigError:
    return ConfigError(f"quantization_config (compressed-tensors): {what}",
                       hint="use the checkpoint's own config.json as compressed-tensors wrote it")


def _ct_args(group: dict[str, Any], key: str) -> dict[str, Any] | None:
    args = group.get(key)
    if args is None:
        return None
    if not isinstance(args, dict):
        raise _ct_bad(f"'{key}' must be an object")
    bits = args.get("num_bits")
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 16:
        raise _ct_bad(f"'{key}.num_bits' must be an integer from 1 to 16, not {bits!r}")
    gs = args.get("group_size")
    if gs is not None and (isinstance(gs, bool) or not isinstance(gs, int)
                           or (gs < 1 and gs != -1)):
        raise _ct_bad(f"'{key}.group_size' must be a positive integer, not {gs!r}")
    return {
        "num_bits": bits,
        "type": str(args.get("type", "int")).lower(),
        "strategy": str(args.get("strategy", "tensor")).lower(),
        "group_size": gs,
        "symmetric": bool(args.get("symmetric", True)),
        "dynamic": args.get("dynamic", False),
        "actorder": args.get("actorder"),
        "block_structure": args.get("block_structure"),
    }


def _ct_name(w: dict[str, Any], a: dict[str, Any] | None) -> str:
    act = "A16" if a is None else f"A{a['num_bits']} {a['type']} {a['strategy']}"
    return f"W{w['num_bits']} {w['type']} {w['strategy']} / {act}"


def compressed_tensors(q: dict[str, Any], exclude: tuple[str, ...]) -> QuantConfig:
    """One ``compressed-tensors`` ``quantization_config`` as the scheme vLLM v0.11.0 builds for
    it (``CompressedTensorsConfig._get_scheme_from_parts``): W8A8 fp8 (tensor / channel / block,
    dynamic or static input), W8A8 int8 (tensor / channel weights; static per-tensor or dynamic
    per-token input), W4A16 / W8A16 int (``pack-quantized``, group or channel, optional zero
    points and ``actorder: group``) and NVFP4 W4A4 (``nvfp4-pack-quantized``). A checkpoint whose
    groups declare different schemes, or any other scheme (W4A8, 2:4 sparsity, MXFP4, W8A16
    fp8, ...), is refused naming it."""
    for pat in exclude:
        if pat.startswith("re:"):
            try:
                re.compile(pat[3:])
            except re.error as e:
                raise _ct_bad(f"the ignore entry {pat!r} is not a regular expression "
                              f"({e})") from None
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise _ct_bad("'config_groups' must be a non-empty object")
    top_format = q.get("format")
    schemes: dict[str, str] = {}
    parsed: dict[str, tuple[dict[str, Any], dict[str, Any] | None, str]] = {}
    for name, group in groups.items():
        if not isinstance(group, dict):
            raise _ct_bad(f"config_groups.{name} must be an object")
        targets = group.get("targets") or []
        if not isinstance(targets, list) or "Linear" not in targets:
            # vLLM matches targets per layer (find_matched_target); a group naming some
            # layers only would be sized here as if it covered every linear
            raise ConfigError(
                f"quantization_config (compressed-tensors) group {name} targets {targets!r}, "
                "not every Linear; memprof sizes one scheme for all linear layers",
                hint="size it with targets [\"Linear\"] and add the difference by hand")
        w = _ct_args(group, "weights")
        if w is None:
            raise _ct_bad(f"config_groups.{name} has no 'weights'")
        a = _ct_args(group, "input_activations")
        fmt = str(group.get("format") or top_format or "").lower()
        key = json.dumps([w, a, fmt], sort_keys=True, default=str)
        schemes[key] = name
        parsed[key] = (w, a, fmt)
    if len(schemes) > 1:
        raise ConfigError(
            "quantization_config (compressed-tensors) declares several schemes for different "
            f"layers ({', '.join(sorted(schemes.values()))}); memprof sizes one scheme per model",
            hint="size it with the scheme of its largest layers (edit config_groups) and add the "
            "difference by hand")
    ((w, a, fmt),) = parsed.values()
    if fmt and fmt not in _CT_FORMATS:
        raise ConfigError(
            f"memprof does not model the compressed-tensors format {fmt!r} "
            f"(scheme {_ct_name(w, a)})",
            hint="modelled formats: " + ", ".join(_CT_FORMATS))
    scheme = f"compressed-tensors {_ct_name(w, a)}"
    # CompressedTensorsWNA16: weight-only int, channel or group, format pack-quantized
    # (_is_wNa16_group_channel; WNA16_SUPPORTED_BITS = 4, 8)
    if (a is None and w["type"] == "int" and w["strategy"] in ("channel", "group")
            and not w["dynamic"] and fmt in ("pack-quantized", "") and w["num_bits"] in (4, 8)):
        if w["strategy"] == "group" and not w["group_size"]:
            raise _ct_bad("the group strategy needs 'weights.group_size'")
        group = w["group_size"] if w["strategy"] == "group" else -1
        return QuantConfig(method="wna16", bits=w["num_bits"], group_size=group,
                           zero_point=not w["symmetric"], desc_act=w["actorder"] == "group",
                           strategy=w["strategy"], scheme=scheme,
                           checkpoint_format=_CT, exclude=exclude)
    if a is not None and fmt in (*_CT_ACT_FORMATS, ""):
        # CompressedTensorsW4A4Fp4 (_is_fp4a4_nvfp4: float 4-bit, tensor_group, group 16,
        # symmetric weights and inputs)
        if (w["type"] == a["type"] == "float" and w["num_bits"] == a["num_bits"] == 4
                and w["strategy"] == a["strategy"] == "tensor_group"
                and w["group_size"] == a["group_size"] == 16
                and w["symmetric"] and a["symmetric"]):
            return QuantConfig(method="nvfp4", bits=4, group_size=16, strategy="tensor_group",
                               scheme=scheme, checkpoint_format=_CT,
                               exclude=exclude)
        # CompressedTensorsW8A8Fp8 (_is_fp8_w8a8: float 8-bit, symmetric static weights,
        # tensor / channel / block; static inputs only per tensor)
        if (w["type"] == a["type"] == "float" and w["num_bits"] == a["num_bits"] == 8
                and w["symmetric"] and not w["dynamic"]
                and w["strategy"] in ("tensor", "channel", "block")
                and (a["dynamic"] is True or (a["strategy"] == "tensor" and a["symmetric"]))):
            static = a["dynamic"] is not True
            if w["strategy"] == "block":
                block = w["block_structure"]
                if (not isinstance(block, list) or len(block) != 2
                        or not all(isinstance(x, int) and x > 0 for x in block)):
                    raise _ct_bad("the block strategy needs 'weights.block_structure' "
                                  "[rows, cols]")
                return QuantConfig(method="fp8", block=(block[0], block[1]), strategy="block",
                                   scheme=scheme, checkpoint_format=_CT,
                                   exclude=exclude)
            method = "fp8_per_tensor" if w["strategy"] == "tensor" else "fp8_per_channel"
            return QuantConfig(method=method, static_input=static, strategy=w["strategy"],
                               scheme=scheme, checkpoint_format=_CT,
                               exclude=exclude)
        # CompressedTensorsW8A8Int8 (_is_static_tensor_w8a8 / _is_dynamic_token_w8a8: int
        # 8-bit symmetric tensor or channel weights; static per-tensor or dynamic per-token input)
        if (w["type"] == a["type"] == "int" and w["num_bits"] == a["num_bits"] == 8
                and w["symmetric"] and not w["dynamic"]
                and w["strategy"] in ("tensor", "channel")
                and ((a["strategy"] == "tensor" and a["dynamic"] is not True)
                     or (a["strategy"] == "token" and a["dynamic"] is True))):
            return QuantConfig(method="int8_w8a8", bits=8, strategy=w["strategy"],
                               static_input=a["dynamic"] is not True,
                               input_symmetric=a["symmetric"], scheme=scheme,
                               checkpoint_format=_CT, exclude=exclude)
    raise ConfigError(
        f"memprof does not model the compressed-tensors scheme {_ct_name(w, a)}"
        + (f" (format {fmt})" if fmt else ""),
        hint="modelled: W8A8 fp8 (tensor/channel/block), W8A8 int8 (tensor/channel), "
        "W4A16/W8A16 int (pack-quantized, group/channel), NVFP4 W4A4 (nvfp4-pack-quantized)")


# --- bitsandbytes ---------------------------------------------------------------------------------


def bitsandbytes(q: dict[str, Any], exclude: tuple[str, ...]) -> QuantConfig:
    """A pre-quantised bitsandbytes checkpoint as vLLM v0.11.0 reads it
    (BitsAndBytesConfig.from_config, quantization/bitsandbytes.py: ``load_in_4bit`` defaults to
    true, ``load_in_8bit`` to false, ``bnb_4bit_use_double_quant`` to false;
    ``llm_int8_skip_modules`` are left unquantised). 4-bit nf4 and fp4 store the same bytes;
    8-bit (LLM.int8) is refused. The checkpoint does not state the 4-bit block size: this takes
    bitsandbytes' default of 64 (``quantize_4bit``), which every HF-saved 4-bit checkpoint
    uses unless it was quantised by hand."""
    if q.get("load_in_8bit") is True:
        raise ConfigError("memprof does not model bitsandbytes 8-bit (LLM.int8) checkpoints",
                          hint="size the 4-bit variant, or the unquantised checkpoint")
    if q.get("load_in_4bit", True) is not True:
        raise ConfigError("quantization_config (bitsandbytes) loads neither 4-bit nor 8-bit",
                          hint="set load_in_4bit: true as the checkpoint was saved")
    qtype = str(q.get("bnb_4bit_quant_type", "fp4")).lower()
    if qtype not in ("nf4", "fp4"):
        raise ConfigError(f"unknown bnb_4bit_quant_type {qtype!r}", hint="nf4 or fp4")
    skip = q.get("llm_int8_skip_modules") or []
    if not isinstance(skip, list) or not all(isinstance(x, str) for x in skip):
        raise ConfigError("quantization_config.llm_int8_skip_modules must be a list of strings",
                          hint="fix config.json")
    return QuantConfig(method="bnb4", bits=4, group_size=64, strategy=qtype,
                       double_quant=q.get("bnb_4bit_use_double_quant") is True,
                       exclude=exclude + tuple(skip))


# --- GGUF -----------------------------------------------------------------------------------------


def gguf(q: dict[str, Any], cfg: dict[str, Any]) -> QuantConfig:
    """A GGUF checkpoint's tensor types (``memprof.core.weights.gguf.parse_types``). A uniform
    Q6_K or Q8_0 file of an 8-expert model keeps ``attn_k`` / ``attn_v`` in Q8_0 (llama.cpp
    src/llama-quant.cpp llama_tensor_get_type: "for the 8-expert model, bumping this to
    Q8_0"). MoE routers are built unquantised by vLLM's models (``ReplicatedLinear(...,
    quant_config=None)``, e.g. mixtral.py), so the GGUF type of ``ffn_gate_inp`` never matters."""
    from memprof.core.models.gguf_types import parse_types

    types = parse_types(q)
    if ("tensor_types" not in q and cfg.get("num_local_experts") == 8
            and types[0][1] in ("Q6_K", "Q8_0")):
        types = (("attn_k", "Q8_0"), ("attn_v", "Q8_0"), *types)
    return QuantConfig(method="gguf", gguf_types=types)


# --- ModelOpt -------------------------------------------------------------------------------------


def modelopt(q: dict[str, Any], exclude: tuple[str, ...]) -> QuantConfig:
    """A ModelOpt checkpoint as vLLM v0.11.0 reads it (model_executor/layers/quantization/
    modelopt.py ``ModelOptFp8Config.from_config`` / ``ModelOptNvFp4Config.from_config``): the
    ``hf_quant_config.json`` layout ``{"quantization": {"quant_algo", "exclude_modules",
    "kv_cache_quant_algo", "group_size"}}`` or the same keys flat beside ``quant_method``.
    ``quant_algo`` must be one of ``QUANT_ALGOS`` (FP8, NVFP4); anything else vLLM refuses.

    FP8 (``ModelOptFp8LinearMethod``): an fp8 weight, one fp32 ``weight_scale`` per fused shard
    requantised to their max at load and one static fp32 ``input_scale`` (its max): sized as a
    per-tensor fp8 weight with a static input scale. NVFP4: ``memprof.core.weights.formats.nvfp4``.
    Excluded linears (``is_layer_excluded``: exact, fused or substring match) stay in the model
    dtype, as do vision-tower linears."""
    inner = q.get("quantization")
    cfg = inner if isinstance(inner, dict) else q
    algo = str(cfg.get("quant_algo", "")).upper()
    exclude = exclude + tuple(str(p) for p in (cfg.get("exclude_modules") or [])
                              if cfg is not q)
    if algo == "NVFP4":
        group = cfg.get("group_size", 16)
        if isinstance(group, bool) or not isinstance(group, int) or group <= 0:
            raise ConfigError(f"ModelOpt NVFP4 group_size {str(group)[:40]!r} is not a positive "
                              "integer",
                              hint="NVFP4 checkpoints declare group_size 16 (or leave it out)")
        return QuantConfig(method="nvfp4", group_size=group, bits=4,
                           exclude=exclude, checkpoint_format="modelopt")
    if algo == "FP8":
        return QuantConfig(method="fp8_per_tensor", static_input=True, exclude=exclude,
                           checkpoint_format="modelopt")
    raise ConfigError(f"ModelOpt quant_algo {algo or 'missing'!r}: vLLM v0.11.0 supports FP8 and "
                      "NVFP4 only (modelopt.py QUANT_ALGOS)",
                      hint="check the checkpoint's hf_quant_config.json")
