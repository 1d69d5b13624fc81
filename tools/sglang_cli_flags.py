"""Read SGLang's long flags from a wheel's ``sglang/srt/server_args.py`` (and, from 0.5.19, the
``Annotated[T, Arg(...)]`` fields of ``sglang/srt/arg_groups/fields/*.py``) without importing
SGLang: each flag's names and whether it takes no value, one value, an optional value or a list.

    python tools/sglang_cli_flags.py UNZIPPED_WHEEL_ROOT

prints ``field names arity`` per flag, as ``ServerArgs.add_cli_args`` registers it (the arity
ending in ``!`` where the flag is registered only to be refused, a ``DeprecatedAction`` that
raises; followed by ``no-X`` where it is a ``BooleanOptionalAction``, which argparse also takes
as ``--no-X``):
``parser.add_argument`` calls (store_true / BooleanOptionalAction / nargs=0 actions: no value;
nargs '+' or '*': a list; nargs '?': an optional value), and the dataclass fields that
``add_cli_args_from_dataclass`` (arg_groups/arg_utils.py) turns into flags (bool: store_true;
list without a type_parser: nargs '+'; ``cli_name`` and ``aliases`` as given; ``no_cli``
skipped). The output feeds ``configs/sglang_cli_flags.json``'s names and arities; its
classification (ignored / not modelled) is written by hand there.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "BooleanOptionalAction",
                    "DeprecatedStoreTrueAction", "DeprecatedAction"}


def _name(node: ast.expr | None) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _arity(action: str, nargs: str, kind: str = "") -> str:
    if nargs in ("0",):
        return "flag"
    if nargs in ("+", "*"):
        return "many"
    if nargs == "?":
        return "optional"
    if nargs == "None":
        return "value"
    if action in NO_VALUE_ACTIONS or action == "DeprecatedStoreConstAction":
        return "flag"
    return kind or "value"


def deprecated_action_raises(tree: ast.AST) -> bool:
    """Whether this file's ``DeprecatedAction.__call__`` refuses the flag whatever it is given
    (0.5.3, 0.5.4: ``raise ValueError(self.help)``); the later one warns, and refuses only a
    flag registered with an ``error_message`` (0.5.19 on: ``parser.error``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "DeprecatedAction":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "__call__":
                    return any(isinstance(st, ast.Raise) for st in fn.body)
    return False


def from_calls(tree: ast.AST, raises: bool = False) -> dict[str, tuple[list[str], str]]:
    """``add_argument`` calls: field → (names, arity), the arity ending in ``!`` where SGLang
    refuses the flag (a ``DeprecatedAction`` that raises, or one given an ``error_message``)."""
    out: dict[str, tuple[list[str], str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) == "add_argument"):
            continue
        names = [a.value for a in node.args
                 if isinstance(a, ast.Constant) and isinstance(a.value, str)
                 and a.value.startswith("-")]
        if not names:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        dest = _name(kw.get("dest"))
        longs = [n for n in names if n.startswith("--")]
        field = dest or (longs or names)[0].lstrip("-").replace("-", "_")
        nargs = "None" if "nargs" in kw and _name(kw["nargs"]) == "None" else _name(
            kw.get("nargs"))
        action = _name(kw.get("action"))
        refused = action == "DeprecatedAction" and (raises or "error_message" in kw)
        out.setdefault(field, (names, _arity(action, nargs) + ("!" if refused else "")))
    return out


def _is_list(t: ast.expr) -> bool:
    text = ast.unparse(t)
    for wrap in ("Optional[", "typing.Optional["):
        if text.startswith(wrap):
            text = text[len(wrap):-1]
    return text.startswith(("List[", "list[", "typing.List[")) or text in ("list", "List")


def from_fields(tree: ast.AST) -> dict[str, tuple[list[str], str]]:
    out: dict[str, tuple[list[str], str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.annotation, ast.Subscript)
                and _name(node.annotation.value) in ("A", "Annotated")):
            continue
        parts = node.annotation.slice
        if not isinstance(parts, ast.Tuple) or len(parts.elts) < 2:
            continue
        typ, meta = parts.elts[0], parts.elts[1]
        if isinstance(meta, ast.Constant):  # A[T, "help"]
            kw: dict[str, ast.expr] = {}
        elif isinstance(meta, ast.Call) and _name(meta.func) == "Arg":
            kw = {k.arg: k.value for k in meta.keywords if k.arg}
        else:
            continue
        if _name(kw.get("no_cli")) == "True":
            continue
        field = node.target.id
        if field.startswith("_"):
            continue
        names = [_name(kw["cli_name"]) if "cli_name" in kw else "--" + field.replace("_", "-")]
        if isinstance(kw.get("aliases"), ast.List):
            names += [_name(e) for e in kw["aliases"].elts]  # type: ignore[union-attr]
        action = _name(kw.get("action"))
        nargs = _name(kw.get("nargs"))
        t = ast.unparse(typ)
        kind = ("flag" if t in ("bool", "Optional[bool]") and not action
                else "many" if _is_list(typ) and "type_parser" not in kw else "value")
        out[field] = (names, _arity(action, nargs, kind))
    return out


def read(root: Path) -> dict[str, tuple[list[str], str]]:
    srt = root / "sglang" / "srt"
    found: dict[str, tuple[list[str], str]] = {}
    files = [srt / "server_args.py", *sorted((srt / "arg_groups").rglob("*.py"))]
    trees = [ast.parse(f.read_text(encoding="utf-8")) for f in files if f.exists()]
    raises = any(deprecated_action_raises(t) for t in trees)
    for tree in trees:
        for k, v in {**from_fields(tree), **from_calls(tree, raises)}.items():
            found.setdefault(k, v)
    return found


def _boolean_optional(tree: ast.AST) -> set[str]:
    fields = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) == "add_argument":
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            longs = [a.value for a in node.args if isinstance(a, ast.Constant)
                     and isinstance(a.value, str) and a.value.startswith("--")]
            if longs and _name(kw.get("action")) == "BooleanOptionalAction":
                fields.add(_name(kw.get("dest")) or longs[0][2:].replace("-", "_"))
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and "BooleanOptionalAction" in ast.unparse(node.annotation)):
            fields.add(node.target.id)
    return fields


def boolean_optional(root: Path) -> set[str]:
    """The fields whose flag is registered with ``argparse.BooleanOptionalAction``: the only
    switches SGLang's argparse also takes as ``--no-X`` (a ``store_true`` flag has no ``--no-``
    form, and argparse refuses one)."""
    srt = root / "sglang" / "srt"
    files = [srt / "server_args.py", *sorted((srt / "arg_groups").rglob("*.py"))]
    return set().union(*(_boolean_optional(ast.parse(f.read_text(encoding="utf-8")))
                         for f in files if f.exists()))


if __name__ == "__main__":
    negatable = boolean_optional(Path(sys.argv[1]))
    for fld, (names, arity) in sorted(read(Path(sys.argv[1])).items()):
        print(fld, ",".join(names), arity + (" no-X" if fld in negatable else ""))
