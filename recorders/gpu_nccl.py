"""Measure the GPU memory an NCCL communicator takes, as vLLM's ``PyNcclCommunicator`` creates it,
and what the first collective of each kind the engines issue adds, by transport and NCCL setting,
for the NCCL terms of ``memprof.core.terms.non_torch``.

Run on a machine with two or more GPUs, from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_nccl.py --out $OUT              # nccl-matrix-2x-<gpu>.json
    PYTHONPATH=. python recorders/gpu_nccl.py --out $OUT --legacy     # nccl-2x-<gpu>.json

What is run, per configuration, in fresh processes (one per GPU, ``torch.multiprocessing``):
the CUDA context (a first tensor), then ``torch.distributed.init_process_group("nccl",
device_id=...)``, which creates the NCCL communicator at once (``ncclCommInitRank``, as
PyNccl's constructor does), then one small all_reduce (PyNccl's warm-up in its constructor,
vllm/distributed/device_communicators/pynccl.py "A small all_reduce for warmup"), then a
128 MiB all_reduce and a 256 MiB all_gather (what the profile run sends). These five steps are
the whole of the ``--legacy`` run (the recorder of ``reports/gpu/nccl/nccl-2x-h100.json``, four
configurations). The matrix run goes on with the first collective of each further kind the
engines issue, each its own step: ``reduce_scatter_tensor`` (sequence parallelism, DP/EP
reduce-scatter), ``all_to_all_single`` (expert parallelism's naive all-to-all),
``batch_isend_irecv`` of a send to the next rank and a receive from the previous one (pipeline
parallelism's stage hand-over), first at 1 MiB a rank, then at 128 MiB. After each step every
rank reads ``torch.cuda.mem_get_info`` and ``memory_reserved``; NCCL's memory is the growth of
``used − reserved`` (non-torch) from the step before. Each collective's result is checked.
``--order sendrecv-first`` runs send/recv before all_to_all (the two share NCCL's peer-to-peer
connections, so only the first of them shows their cost); ``--order stream-probe`` adds a last
step, a ``torch.cuda.Stream()``, which shows whether torch's stream pool (~70 MiB the first time
in a process) was already made inside the steps above, i.e. is part of their figures;
``--order stream-first`` makes that pool before ``init_process_group``, so the steps after it
show NCCL's bytes without it.

Configurations: NCCL's cuMem allocator on and off (vLLM set ``NCCL_CUMEM_ENABLE=0`` from 0.7.x
to 0.10.1.1) × the transport: NVLink peer-to-peer (the default here), host shared memory
(``NCCL_P2P_DISABLE=1``, the transport NCCL takes between GPUs without peer access, such as two
GeForce RTX 4090s) or the network over loopback sockets (``NCCL_P2P_DISABLE=1
NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo``, what ranks on different hosts
use); and, one at a time, NCCL's buffer size (``NCCL_BUFFSIZE`` 1 MiB against the 4 MiB default)
and its channel count (``NCCL_MAX_NCHANNELS=2``, ``NCCL_MIN_NCHANNELS=32``, and
``NCCL_MAX_P2P_NCHANNELS=8`` for the point-to-point operations alone). NVLink multicast
(NVLS) stays off in every child (``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``,
``NVSHMEM_DISABLE_NVLS=1``: the lent machines forbid it), so NVLS buffers are not measured. The
file holds every rank's bytes per step, the NCCL version, torch's, the driver's, NCCL's own log
lines of transports and channels, and ``nvidia-smi topo -m``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Set in every child: NVLink multicast off (the lent machines' rule, KINDS.md).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
_SHM = {"NCCL_P2P_DISABLE": "1"}
_NET = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "lo"}
_ON = {"NCCL_CUMEM_ENABLE": "1"}
_OFF = {"NCCL_CUMEM_ENABLE": "0"}

# The recorder of nccl-2x-h100.json (names and settings unchanged, so it is reproduced).
LEGACY_CONFIGS: list[dict[str, Any]] = [
    {"name": "p2p-cumem-on", "env": {**_ON}},
    {"name": "p2p-cumem-off", "env": {**_OFF}},
    {"name": "shm-cumem-on", "env": {**_ON, **_SHM}},
    {"name": "shm-cumem-off", "env": {**_OFF, **_SHM}},
]
CONFIGS: list[dict[str, Any]] = [
    *LEGACY_CONFIGS,
    {"name": "net-cumem-on", "env": {**_ON, **_NET}},
    {"name": "net-cumem-off", "env": {**_OFF, **_NET}},
    {"name": "p2p-cumem-on-buffsize-1m", "env": {**_ON, "NCCL_BUFFSIZE": "1048576"}},
    {"name": "p2p-cumem-off-buffsize-1m", "env": {**_OFF, "NCCL_BUFFSIZE": "1048576"}},
    {"name": "shm-cumem-on-buffsize-1m", "env": {**_ON, **_SHM, "NCCL_BUFFSIZE": "1048576"}},
    {"name": "p2p-cumem-on-maxchannels-2", "env": {**_ON, "NCCL_MAX_NCHANNELS": "2"}},
    {"name": "p2p-cumem-on-minchannels-32", "env": {**_ON, "NCCL_MIN_NCHANNELS": "32"}},
    # the channels of point-to-point operations (all_to_all, send/recv) alone: NCCL 2.28
    # src/graph/paths.cc NCCL_PARAM(MaxP2pNChannels, "MAX_P2P_NCHANNELS", MAXCHANNELS)
    {"name": "p2p-cumem-on-max-p2p-nchannels-8", "env": {**_ON, "NCCL_MAX_P2P_NCHANNELS": "8"}},
    {"name": "shm-cumem-on-max-p2p-nchannels-8",
     "env": {**_ON, **_SHM, "NCCL_MAX_P2P_NCHANNELS": "8"}},
]

CHILD = r"""
import json, os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MiB = 1 << 20
BF16 = torch.bfloat16

def used(dev):
    free, total = torch.cuda.mem_get_info(dev)
    return total - free, torch.cuda.memory_reserved(dev)

def worker(rank, world, port, legacy, order, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    steps = [("CUDA context (first tensor)", *used(dev), True, "")]
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    def step(name, fn):
        err, ok = "", False
        try:
            ok = bool(fn())
            torch.cuda.synchronize()
        except Exception as e:  # recorded, and the next step still runs
            err = f"{type(e).__name__}: {e}"[:500]
        torch.cuda.empty_cache()
        steps.append((name, *used(dev), ok, err))

    def init():
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
        return True

    def all_reduce(n):
        x = torch.ones(n, device=dev, dtype=torch.float32 if n == 1 else BF16)
        dist.all_reduce(x)
        return bool((x == world).all())

    def all_gather(n):
        x = torch.full((n,), float(rank), device=dev, dtype=BF16)
        out = torch.empty(world * n, device=dev, dtype=BF16)
        dist.all_gather_into_tensor(out, x)
        want = torch.arange(world, device=dev, dtype=BF16).repeat_interleave(n)
        return bool((out == want).all())

    def reduce_scatter(n):
        x = torch.ones(world * n, device=dev, dtype=BF16)
        out = torch.empty(n, device=dev, dtype=BF16)
        dist.reduce_scatter_tensor(out, x)
        return bool((out == world).all())

    def all_to_all(n):
        # chunk j of rank r holds world * r + j (4r + j at 4 ranks, as the 4-rank matrix ran;
        # distinct for every (r, j) at any size, exact in bf16 up to 16 ranks); after the
        # exchange chunk j holds world * j + r
        x = (world * rank + torch.arange(world, device=dev, dtype=BF16)).repeat_interleave(
            n // world)
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x)
        want = world * torch.arange(world, device=dev, dtype=BF16) + rank
        want = want.repeat_interleave(n // world)
        return bool((out == want).all())

    def send_recv(n):
        x = torch.full((n,), float(rank), device=dev, dtype=BF16)
        out = torch.empty(n, device=dev, dtype=BF16)
        ops = [dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, out, prv)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        torch.cuda.synchronize()
        return bool((out == prv).all())

    small, big = MiB // 2, 64 * MiB  # bf16 elements: 1 MiB and 128 MiB a rank
    keep = []
    if order == "stream-first":  # torch's stream pool made before NCCL, so not in its figures
        step("torch.cuda.Stream() before init", lambda: keep.append(torch.cuda.Stream()) or True)
    step("ncclCommInitRank (init_process_group, device_id)", init)
    step("warm-up all_reduce of 1 fp32", lambda: all_reduce(1))
    step("all_reduce 128 MiB bf16", lambda: all_reduce(big))
    step("all_gather 2 x 128 MiB, tensors freed", lambda: all_gather(big))
    if not legacy and order == "sendrecv-first":
        step("first batch_isend_irecv (send next, recv previous), 1 MiB", lambda: send_recv(small))
        step("first reduce_scatter_tensor, 1 MiB out", lambda: reduce_scatter(small))
        step("first all_to_all_single, 1 MiB", lambda: all_to_all(small))
    elif not legacy:
        step("first reduce_scatter_tensor, 1 MiB out", lambda: reduce_scatter(small))
        step("first all_to_all_single, 1 MiB", lambda: all_to_all(small))
        step("first batch_isend_irecv (send next, recv previous), 1 MiB", lambda: send_recv(small))
        step("all_gather_into_tensor 1 MiB a rank", lambda: all_gather(small))
        step("reduce_scatter_tensor 128 MiB out", lambda: reduce_scatter(big))
        step("all_to_all_single 128 MiB", lambda: all_to_all(big))
        step("batch_isend_irecv 128 MiB", lambda: send_recv(big))
    if order == "stream-probe":  # is torch's stream pool already made (0) or made now (~70 MiB)?
        step("torch.cuda.Stream() at the end", lambda: keep.append(torch.cuda.Stream()) or True)
    q.put({"rank": rank, "ok": all(s[3] for s in steps), "steps": [
        {"after": s, "used_bytes": u, "reserved_bytes": r, "ok": ok, **({"error": e} if e else {})}
        for s, u, r, ok, e in steps]})
    dist.destroy_process_group()

if __name__ == "__main__":
    world, port, legacy, order = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, legacy, order, q))
             for r in range(world)]
    for p in procs:
        p.start()
    ranks = sorted((q.get(timeout=150) for _ in procs), key=lambda d: d["rank"])
    for p in procs:
        p.join()
    print(json.dumps({"ranks": ranks, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                      "torch": torch.__version__, "cuda": torch.version.cuda,
                      "gpu": torch.cuda.get_device_name(0)}))
"""

# NCCL's own account of what it chose (NCCL_DEBUG=INFO writes to stdout)
LOG_KEYS = ("via", "Channel 00", "nChannels", "NCCL version", "comm 0x", "Init COMPLETE",
            "set by environment", "cuMem", "Connected all", "coll channels")
# the channel sweep's log: NCCL's own count of channels and transports, not every connection
SWEEP_LOG_KEYS = ("coll channels", "NCCL version", "Init COMPLETE", "set by environment",
                  "via P2P", "via SHM", "Channel 00", "Channel 01", "nChannels")


def channel_sweep_configs() -> list[dict[str, Any]]:
    """The channel sweep (``--channels``): NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = n for
    n = 1 ... 32 × world 2 and 4 × peer-to-peer and host shared memory × cuMem off and on,
    cuMem off first (vLLM's setting from 0.7.x to 0.10.1.1), world 2 before world 4."""
    out = []
    for cumem, cm in (("off", _OFF), ("on", _ON)):
        for world in (2, 4):
            for tr, te in (("shm", _SHM), ("p2p", {})):
                for n in (1, 2, 4, 8, 16, 32):
                    out.append({"name": f"w{world}-{tr}-cumem-{cumem}-ch{n}", "world": world,
                                "env": {**cm, **te, "NCCL_MIN_NCHANNELS": str(n),
                                        "NCCL_MAX_NCHANNELS": str(n)}})
    return out


def run_config(child: Path, cfg: dict[str, Any], world: int, port: int,
               legacy: bool, timeout: int = 200, order: str = "a2a-first",
               devices: str = "", keys: tuple[str, ...] = LOG_KEYS) -> dict[str, Any]:
    """One configuration in fresh processes; the child's process group is killed if it hangs.
    ``devices`` (CUDA_VISIBLE_DEVICES) lets two 2-GPU configurations run side by side."""
    env = {**os.environ, **NO_MULTICAST, "NCCL_DEBUG": "INFO",
           "NCCL_DEBUG_SUBSYS": "INIT,GRAPH" if legacy else "INIT,GRAPH,ENV", **cfg["env"]}
    if devices:
        env["CUDA_VISIBLE_DEVICES"] = devices
    cmd = [sys.executable, str(child), str(world), str(port), "1" if legacy else "0", order]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        code = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        code = 124
    last = out.strip().splitlines()[-1] if out.strip() else "{}"
    setting = " ".join(f"{k}={v}" for k, v in cfg["env"].items())
    rec: dict[str, Any] = {
        "config": cfg["name"], "env": {"NCCL_NVLS_ENABLE": "0", **cfg["env"]},
        "command": f"{setting} NCCL_NVLS_ENABLE=0 python nccl_child.py {world} {port}",
        "exit_code": code, **(json.loads(last) if code == 0 else {}),
        "nccl_log": [ln for ln in (out + err).splitlines()
                     if any(k in ln for k in keys)][:40 if legacy else 120]}
    if not legacy:
        rec["env"] = {**NO_MULTICAST, **cfg["env"]}
        rec["command"] = f"{setting} {' '.join(f'{k}={v}' for k, v in NO_MULTICAST.items())} " \
                         f"python nccl_child.py {world} {port} 0 {order}"
        rec["communicators_initialised_per_rank"] = sum(
            "Init COMPLETE" in ln for ln in (out + err).splitlines()) // max(world, 1)
    if code != 0:
        rec["stderr_tail"] = err[-3000:]
    for r in rec.get("ranks", []):
        s = r["steps"]
        r["non_torch_growth_bytes"] = {
            s[k]["after"]: (s[k]["used_bytes"] - s[k]["reserved_bytes"])
            - (s[k - 1]["used_bytes"] - s[k - 1]["reserved_bytes"]) for k in range(1, len(s))}
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--legacy", action="store_true",
                    help="the four configurations and five steps of nccl-2x-h100.json")
    ap.add_argument("--only", default="", help="comma-separated configuration names")
    ap.add_argument("--tag", default="", help="a suffix of the file name")
    ap.add_argument("--timeout", type=int, default=200, help="seconds per configuration")
    ap.add_argument("--order",
                    choices=("a2a-first", "sendrecv-first", "stream-probe", "stream-first"),
                    default="a2a-first",
                    help="after all_gather: reduce_scatter, all_to_all, send/recv (a2a-first) or "
                         "send/recv, reduce_scatter, all_to_all (sendrecv-first); stream-probe: "
                         "a2a-first, then a torch.cuda.Stream() as a last step; stream-first: "
                         "a torch.cuda.Stream() before init_process_group, then a2a-first")
    ap.add_argument("--channels", action="store_true",
                    help="the channel sweep (channel_sweep_configs), the five --legacy steps, "
                         "two 2-GPU configurations at a time on GPUs 0,1 and 2,3")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.channels:
        return channel_sweep(args)
    configs = LEGACY_CONFIGS if args.legacy else CONFIGS
    if args.only:
        configs = [c for c in configs if c["name"] in args.only.split(",")]
    child = Path(tempfile.mkdtemp()) / "nccl_child.py"  # spawn re-imports the child's module
    child.write_text(CHILD)
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines()[:1]
    runs = []
    for i, cfg in enumerate(configs):
        rec = run_config(child, cfg, args.world, 29500 + i, args.legacy, args.timeout,
                         args.order)
        runs.append(rec)
        print(cfg["name"], rec["exit_code"],
              [r["non_torch_growth_bytes"] for r in rec.get("ranks", [])][:1], flush=True)
        name = next((r["gpu"] for r in runs if r.get("gpu")), "")
        gpu = next((g.lower() for g in ("H100", "H200", "B200") if g in name), "gpu")
        stem = f"nccl-{args.world}x-{gpu}" if args.legacy else f"nccl-matrix-{args.world}x-{gpu}"
        if args.order != "a2a-first" and not args.legacy:
            stem += f"-{args.order}"
        stem += f"-{args.tag}" if args.tag else ""
        command = f"PYTHONPATH=. python recorders/gpu_nccl.py --out $OUT --world {args.world}"
        doc: dict[str, Any] = {
            "command": command + (" --legacy" if args.legacy else "")
            + (f" --order {args.order}" if args.order != "a2a-first" else "")
            + (f" --only {args.only}" if args.only else "")
            + (f" --tag {args.tag}" if args.tag else ""),
            "nvidia_smi_topo": topo, "runs": runs}
        if not args.legacy:
            doc = {"command": doc["command"], "driver": driver[0] if driver else "",
                   "nvidia_smi_topo": topo, "runs": runs}
        # written after every configuration, so a run cut short still leaves what it measured
        (args.out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


def channel_sweep(args: argparse.Namespace) -> int:
    """Run the channel sweep into ``nccl-channels-<gpu>.json``, rewritten after every round."""
    from concurrent.futures import ThreadPoolExecutor

    child = Path(tempfile.mkdtemp()) / "nccl_child.py"
    child.write_text(CHILD)
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines()[:1]
    configs = channel_sweep_configs()
    if args.only:
        configs = [c for c in configs if c["name"] in args.only.split(",")]
    rounds: list[list[dict[str, Any]]] = []
    for cfg in configs:  # two 2-GPU configurations share a round; a 4-GPU one has its own
        if cfg["world"] == 2 and rounds and len(rounds[-1]) == 1 and rounds[-1][0]["world"] == 2:
            rounds[-1].append(cfg)
        else:
            rounds.append([cfg])
    runs: list[dict[str, Any]] = []
    port = 29500
    for rnd in rounds:
        with ThreadPoolExecutor(len(rnd)) as ex:
            futs = [ex.submit(run_config, child, cfg, cfg["world"], port + i, True, args.timeout,
                              "a2a-first", ("0,1" if i == 0 else "2,3") if len(rnd) > 1 else "",
                              SWEEP_LOG_KEYS)
                    for i, cfg in enumerate(rnd)]
            for cfg, f in zip(rnd, futs, strict=True):
                rec = f.result()
                rec["world"] = cfg["world"]
                rec["command"] = rec["command"].replace(
                    "python nccl_child.py", f"python nccl_child.py (world {cfg['world']})")
                runs.append(rec)
                print(cfg["name"], rec["exit_code"],
                      [r["non_torch_growth_bytes"] for r in rec.get("ranks", [])][:1], flush=True)
        port += 2
        name = next((r["gpu"] for r in runs if r.get("gpu")), "")
        gpu = next((g.lower() for g in ("H100", "H200", "B200") if g in name), "gpu")
        doc = {"command": "PYTHONPATH=. python recorders/gpu_nccl.py --out $OUT --channels",
               "driver": driver[0] if driver else "", "nvidia_smi_topo": topo, "runs": runs}
        (args.out / f"nccl-channels-{gpu}.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
