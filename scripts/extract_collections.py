"""Install the collections pinned in requirements.yml from the `ansible` wheel on PyPI.

Ansible Galaxy is unreachable on our machines; the community `ansible` package carries every
collection at a known version. We extract only the pinned ones and refuse a version mismatch,
so requirements.yml (for users with Galaxy) and this path (for us) install the same code.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import yaml


def main(wheel: str, requirements: str, dest: str) -> int:
    wanted = yaml.safe_load(Path(requirements).read_text())["collections"]
    out = Path(dest)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for coll in wanted:
            ns, name = coll["name"].split(".")
            prefix = f"ansible_collections/{ns}/{name}/"
            manifest = prefix + "MANIFEST.json"
            if manifest not in names:
                print(f"{coll['name']} is not in {wheel}", file=sys.stderr)
                return 1
            version = json.loads(zf.read(manifest))["collection_info"]["version"]
            if version != str(coll["version"]):
                print(
                    f"{coll['name']}: requirements.yml pins {coll['version']} but {wheel} carries {version}",
                    file=sys.stderr,
                )
                return 1
            zf.extractall(out, members=[n for n in names if n.startswith(prefix)])
            print(f"installed {coll['name']} {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
