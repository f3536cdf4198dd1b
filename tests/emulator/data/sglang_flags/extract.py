"""Extract an SGLang release's launch_server flags from its wheel (source read as text; nothing imported).

How the lists beside this file were made (one flag spelling per line, aliases included):

    pip download --no-deps sglang==0.5.23 -d /tmp/sgl && unzip -q /tmp/sgl/sglang-0.5.23-*.whl 'sglang/*' -d /tmp/sgl/0.5.23
    python extract.py /tmp/sgl/0.5.23 --names > 0.5.23.txt

0.5.9-0.5.12 declare flags as `parser.add_argument(...)` calls in ServerArgs.add_cli_args
(sglang/srt/server_args.py); 0.5.23 derives most of them from annotated fields
(sglang/srt/arg_groups/fields/*.py, via arg_groups/arg_utils.py add_cli_args_from_dataclass) and adds
the rest by hand in ServerArgs.add_cli_args. Without --names it prints JSON with each flag's dest,
default, action and choices (as source text), which is how the emulator's flag table was checked.
"""

import ast
import json
import os
import sys


def classic(root):
    src = open(os.path.join(root, "sglang/srt/server_args.py")).read()
    tree = ast.parse(src)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    defaults = {}
    for st in cls.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            defaults[st.target.id] = ast.unparse(st.value) if st.value is not None else "<required>"
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    out = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not names or not names[0].startswith("-"):
                continue
            kw = {k.arg: ast.unparse(k.value) for k in node.keywords}
            dest = kw.get("dest", "").strip("'\"") or names[0].lstrip("-").replace("-", "_")
            d = kw.get("default")
            if d and d.startswith("ServerArgs."):
                d = defaults.get(d.split(".", 1)[1], d)
            if d is None and kw.get("action", "").strip("'\"") == "store_true":
                d = "False"
            out[names[0]] = dict(
                aliases=names[1:],
                dest=dest,
                default=d,
                action=kw.get("action"),
                choices=kw.get("choices"),
                type=kw.get("type"),
                nargs=kw.get("nargs"),
            )
    return out


def fields(root):
    out = {}
    d = os.path.join(root, "sglang/srt/arg_groups/fields")
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(d, fn)).read())
        for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
            for st in cls.body:
                if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                    continue
                ann = st.annotation
                if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "A"):
                    continue
                elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
                typ = ast.unparse(elts[0])
                meta = {}
                if len(elts) > 1:
                    m = elts[1]
                    if isinstance(m, ast.Call) and getattr(m.func, "id", "") == "Arg":
                        meta = {k.arg: ast.unparse(k.value) for k in m.keywords}
                    elif isinstance(m, ast.Constant):
                        meta = {"help": "..."}
                    else:
                        continue
                else:
                    continue
                if meta.get("no_cli") == "True":
                    continue
                name = st.target.id
                cli = meta.get("cli_name", "").strip("'\"") or "--" + name.replace("_", "-")
                aliases = ast.literal_eval(meta["aliases"]) if "aliases" in meta else []
                default = ast.unparse(st.value) if st.value is not None else "<required>"
                action = meta.get("action") or ("'store_true'" if typ == "bool" else None)
                out[cli] = dict(
                    aliases=aliases,
                    dest=name,
                    default=default,
                    action=action,
                    choices=meta.get("choices"),
                    type=typ,
                    nargs=meta.get("nargs"),
                    file=fn,
                )
    return out


root = sys.argv[1]
names_only = "--names" in sys.argv[2:]
if os.path.isdir(os.path.join(root, "sglang/srt/arg_groups/fields")):
    data = fields(root)
    data.update(classic(root))
else:
    data = classic(root)
if names_only:
    print("\n".join(sorted({n for k, x in data.items() for n in [k] + x["aliases"]})))
else:
    json.dump(data, sys.stdout, indent=1, sort_keys=True)
