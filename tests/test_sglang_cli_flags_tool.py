"""tools/sglang_cli_flags.py reads a wheel's flags as ServerArgs.add_cli_args registers them: the
add_argument calls of server_args.py and the Annotated[T, Arg(...)] fields of the later releases."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]

SERVER_ARGS = '''
class ServerArgs:
    tp_size: A[int, Arg(help="TP", cli_name="--tp-size", aliases=["--tensor-parallel-size"])] = 1
    enable_lora: A[Optional[bool], "LoRA"] = None
    lora_paths: A[Optional[List[str]], Arg(help="paths", type_parser=json_list_type)] = None
    cuda_graph_bs: A[Optional[List[int]], Arg(help="sizes")] = None
    secret: A[str, Arg(no_cli=True)] = ""
    hicache: A[bool, Arg(help="x", action=argparse.BooleanOptionalAction)] = False

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str)
        parser.add_argument("--disable-x", action="store_true")
        parser.add_argument("--hybrid-kvcache-ratio", nargs="?", const=0.5, type=float)
        parser.add_argument("--old", action=DeprecatedStoreConstAction, dest="new", nargs=None)
        parser.add_argument("--gone", action=DeprecatedAction)
        parser.add_argument("--paths", nargs="*")
        parser.add_argument("--stop", action=DeprecatedAction, error_message="use --x")
'''

# 0.5.3's DeprecatedAction: every flag registered with it is refused
RAISING = '''
class DeprecatedAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        raise ValueError(self.help)
'''


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sglang_cli_flags",
                                                  ROOT / "tools" / "sglang_cli_flags.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sglang_cli_flags"] = module
    spec.loader.exec_module(module)
    return module


def test_reads_flags_and_arities(tmp_path: Path) -> None:
    srt = tmp_path / "sglang" / "srt"
    srt.mkdir(parents=True)
    (srt / "server_args.py").write_text(SERVER_ARGS)
    got = _tool().read(tmp_path)
    assert got == {
        "tp_size": (["--tp-size", "--tensor-parallel-size"], "value"),
        "enable_lora": (["--enable-lora"], "flag"),
        "lora_paths": (["--lora-paths"], "value"),  # one JSON string (type_parser)
        "cuda_graph_bs": (["--cuda-graph-bs"], "many"),
        "hicache": (["--hicache"], "flag"),
        "model_path": (["--model-path", "--model"], "value"),
        "disable_x": (["--disable-x"], "flag"),
        "hybrid_kvcache_ratio": (["--hybrid-kvcache-ratio"], "optional"),
        "new": (["--old"], "value"),
        "gone": (["--gone"], "flag"),
        "paths": (["--paths"], "many"),
        "stop": (["--stop"], "flag!"),  # refused: an error_message
    }
    # argparse takes --no-X only for a BooleanOptionalAction switch
    assert _tool().boolean_optional(tmp_path) == {"hicache"}
    (srt / "server_args.py").write_text(SERVER_ARGS + RAISING)
    got = _tool().read(tmp_path)
    assert got["gone"] == (["--gone"], "flag!") and got["disable_x"] == (["--disable-x"], "flag")
