"""GPU facts for the cuda_env role: parse what `nvidia-smi` prints and check it against the deploy.

Pure functions on strings and plain data, standard library only, so that the same code runs as an
Ansible filter plugin (the role's preflight) and as a plain module (scripts/device_gpu_check.sh
imports it on the GPU machine, which has no Ansible). Every check returns a list of problem
messages instead of raising, so that the role can fail once with all of them, each naming the
variable at fault and what it may be.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The one query the role runs; the parser below expects exactly these columns in this order.
QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "memory.total",
    "driver_version",
    "compute_cap",
    "pci.bus_id",
    "uuid",
)
QUERY_GPU_ARGS: tuple[str, ...] = (
    "--query-gpu=" + ",".join(QUERY_FIELDS),
    "--format=csv,noheader,nounits",
)

# A second query, apart from the one above so that a driver without the field fails only this one
# (answered "[N/A]" by GPUs without MIG): whether each GPU is split into MIG instances.
MIG_QUERY_ARGS: tuple[str, ...] = ("--query-gpu=index,mig.mode.current", "--format=csv,noheader,nounits")

# nvidia-smi prints these for values a GPU or driver does not report.
_NOT_AVAILABLE = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", ""}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CC = re.compile(r"^\d+\.\d+$")
# The banner's `CUDA Version: 13.0`; from driver R610 `CUDA UMD Version: 13.3` (beside `KMD
# Version`, which replaced `Driver Version`); `N/A` where the user-mode CUDA driver is missing,
# `ERR!` where nvidia-smi could not ask it (a broken install, or a stub libcuda found first:
# microsoft/WSL#11589, nanoporetech/bonito#111).
_DRIVER_CUDA = re.compile(r"CUDA (?:UMD )?Version\s*:?\s*(\d+\.\d+|N/A|ERR!)")

# Oldest CUDA toolkit that compiles for a compute capability (CUDA Toolkit release notes:
# 11.0 added sm_80, 11.1 sm_86, 11.8 sm_89/sm_90, 12.8 sm_100/sm_101/sm_120 (Blackwell, e.g. RTX PRO
# 6000 = 12.0; Jetson Thor = 10.1), 12.9 sm_103/sm_121, 13.0 sm_110: Thor renamed, which reports 11.0
# under a CUDA 13 driver (NVIDIA's nvCOMPDx release notes: "Thor SM renaming from sm_101 to sm_110
# starting from CUDA 13.0"). Capabilities not listed are not checked.
MIN_CUDA_FOR_COMPUTE_CAPABILITY: dict[str, str] = {
    "8.0": "11.0",
    "8.6": "11.1",
    "8.9": "11.8",
    "9.0": "11.8",
    "10.0": "12.8",
    "10.1": "12.8",
    "12.0": "12.8",
    "10.3": "12.9",
    "12.1": "12.9",
    "11.0": "13.0",
}
# CUDA 13.0 removed offline compilation and library support for Maxwell, Pascal and Volta
# (CUDA 13.0 release notes), so the oldest capability it serves is 7.5 (Turing).
CUDA13_MIN_COMPUTE_CAPABILITY = "7.5"

MIN_GPUS_VAR = "cuda_env_min_gpus"
MIN_GPUS_ORIGIN = (
    "the deploy play sets it to the GPUs per node that SGLang's tensor-parallel size sglang_server_tp_size needs"
)


def version_tuple(text: Any) -> tuple[int, ...]:
    """Numeric prefix of a dotted version: '580.95.05' -> (580, 95, 5), '580.xx' -> (580,).

    Lenient on purpose: inventories of emulator hosts may declare a driver as '580.xx'.
    """
    parts: list[int] = []
    for piece in str(text).strip().split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group(0)))
        if m.group(0) != piece:
            break
    return tuple(parts)


def _value(field: str) -> str | None:
    field = field.strip()
    return None if field in _NOT_AVAILABLE else field


def _int_mib(field: str | None) -> int | None:
    if field is None:
        return None
    m = re.match(r"^(\d+)(?:\s*MiB)?$", field)
    if not m:
        raise ValueError(f"memory.total {field!r} is not a number of MiB")
    return int(m.group(1))


def parse_query_gpu(text: str) -> list[dict[str, Any]]:
    """Parse `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits` output.

    Returns one dict per GPU: index, name, memory_mib, driver, compute_capability, pci_bus_id, uuid.
    A header line (query run without `noheader`) is skipped; a name holding commas is kept whole
    (the name is the only free-text column). Raises ValueError naming the line it cannot read.
    """
    gpus: list[dict[str, Any]] = []
    n = len(QUERY_FIELDS)
    for lineno, raw in enumerate(str(text).splitlines(), 1):
        line = _ANSI.sub("", raw).strip()
        if not line or line.startswith("index") or line.lower().startswith("no devices were found"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < n:
            raise ValueError(
                f"nvidia-smi line {lineno} has {len(fields)} fields, expected {n} ({','.join(QUERY_FIELDS)}): {line!r}"
            )
        extra = len(fields) - n
        name = ", ".join(fields[1 : 2 + extra])
        index_s, mem_s, driver, cc, bus, uuid = (fields[0], *fields[2 + extra :])
        if not index_s.isdigit():
            raise ValueError(f"nvidia-smi line {lineno}: index {index_s!r} is not a number: {line!r}")
        cc_v = _value(cc)
        if cc_v is not None and not _CC.match(cc_v):
            raise ValueError(f"nvidia-smi line {lineno}: compute_cap {cc!r} is not MAJOR.MINOR: {line!r}")
        gpus.append(
            {
                "index": int(index_s),
                "name": name,
                "memory_mib": _int_mib(_value(mem_s)),
                "driver": _value(driver),
                "compute_capability": cc_v,
                "pci_bus_id": _value(bus),
                "uuid": _value(uuid),
            }
        )
    return gpus


def parse_mig_modes(text: Any) -> dict[int, str]:
    """`nvidia-smi --query-gpu=index,mig.mode.current` -> {index: "Enabled" | "Disabled"}; a GPU
    without MIG ("[N/A]") or a line that does not read is left out (nothing is known of it)."""
    out: dict[int, str] = {}
    for raw in str(text or "").splitlines():
        parts = [p.strip() for p in _ANSI.sub("", raw).split(",")]
        if len(parts) == 2 and parts[0].isdigit() and _value(parts[1]) is not None:
            out[int(parts[0])] = parts[1]
    return out


def mig_problems(gpus: Sequence[Mapping[str, Any]], modes: Mapping[Any, Any]) -> list[str]:
    """A visible GPU split into MIG instances: CUDA sees its instances, not the GPU (one per process,
    no peer-to-peer between them: NVIDIA's MIG User Guide, "CUDA Device Enumeration"), so the
    whole-GPU facts the deploy is checked against do not hold for it."""
    enabled = [g for g in gpus if str(modes.get(g.get("index"), modes.get(str(g.get("index")), ""))) == "Enabled"]
    if not enabled:
        return []
    return [
        f"MIG is enabled on GPU(s) {', '.join(str(g.get('index')) for g in enabled)} "
        f"({describe_gpus(enabled)}): CUDA sees MIG instances there, not whole GPUs, and SGLang's tensor "
        "parallelism needs whole GPUs; disable MIG (nvidia-smi -i N -mig 0, then reset the GPU) or leave "
        "those GPUs out with CUDA_VISIBLE_DEVICES in cuda_env_cuda_env"
    ]


def parse_driver_cuda_version(text: str) -> str | None:
    """The highest CUDA version the installed driver supports, as `nvidia-smi` / `nvidia-smi -q` print it
    (`N/A` when the driver says so: no user-mode CUDA driver, nothing CUDA can run on)."""
    m = _DRIVER_CUDA.search(_ANSI.sub("", str(text)))
    return m.group(1) if m else None


def parse_topology(text: str) -> dict[str, Any]:
    """Parse the GPU-to-GPU link matrix of `nvidia-smi topo -m`.

    Returns {gpus: [GPU0, ...], links: {GPU0: {GPU1: 'NV18', ...}}, link_types: sorted set of the
    GPU pair links, nvlink: any pair over NVLink, pcie_only: several GPUs and no pair over NVLink}.
    A PCIe-only host with more than two GPUs runs SGLang's all-reduce through NCCL
    (docs/reference/sglang.md §7.5), which is what the cuda_env NCCL check exercises.
    """
    lines = [_ANSI.sub("", line).rstrip() for line in str(text).splitlines()]
    header: list[str] | None = None
    links: dict[str, dict[str, str]] = {}
    for line in lines:
        tokens = line.split()
        if not tokens:
            if header is not None and links:
                break  # the legend follows the matrix after a blank line
            continue
        if header is None:
            if tokens[0] == "GPU0":
                header = [t for t in tokens if re.match(r"^(GPU|NIC)\d+$", t)]
            continue
        if not re.match(r"^(GPU|NIC)\d+$", tokens[0]):
            if links:
                break
            continue
        row, cells = tokens[0], tokens[1 : 1 + len(header)]
        if not row.startswith("GPU"):
            continue
        links[row] = {
            col: cell for col, cell in zip(header, cells, strict=False) if col.startswith("GPU") and col != row
        }
    gpus = sorted(links, key=lambda g: int(g[3:]))
    types = sorted({t for peers in links.values() for t in peers.values()})
    nvlink = any(t.startswith("NV") for t in types)
    return {
        "gpus": gpus,
        "links": links,
        "link_types": types,
        "nvlink": nvlink,
        "pcie_only": len(gpus) > 1 and not nvlink,
    }


def expand_declared_gpus(declared: Any) -> dict[str, Any]:
    """Turn cuda_env_declared_gpus (emulator hosts) into the same dicts parse_query_gpu returns.

    Each entry: name, memory_mib, compute_capability, driver (required); count (default 1),
    pci_bus_id, uuid, driver_cuda_version (optional). Returns {gpus, driver_cuda_version, problems}.
    """
    var = "cuda_env_declared_gpus"
    problems: list[str] = []
    gpus: list[dict[str, Any]] = []
    driver_cuda: str | None = None
    if not isinstance(declared, (list, tuple)):
        return {
            "gpus": [],
            "driver_cuda_version": None,
            "problems": [
                f"{var} must be a list of GPU entries (name, memory_mib, compute_capability, driver), got {type(declared).__name__}"
            ],
        }
    for i, entry in enumerate(declared):
        where = f"{var}[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(
                f"{where} must be a mapping with name, memory_mib, compute_capability, driver; got {entry!r}"
            )
            continue
        unknown = sorted(
            set(entry)
            - {
                "name",
                "memory_mib",
                "compute_capability",
                "driver",
                "count",
                "pci_bus_id",
                "uuid",
                "driver_cuda_version",
            }
        )
        if unknown:
            problems.append(
                f"{where} has unknown keys {unknown}; allowed: name, memory_mib, compute_capability, driver, count, pci_bus_id, uuid, driver_cuda_version"
            )
        missing = [k for k in ("name", "memory_mib", "compute_capability", "driver") if entry.get(k) in (None, "")]
        if missing:
            problems.append(f"{where} lacks {', '.join(missing)}")
            continue
        cc = str(entry["compute_capability"])
        if not _CC.match(cc):
            problems.append(f'{where}.compute_capability is {cc!r}; allowed: MAJOR.MINOR as a string, e.g. "12.0"')
        try:
            mem = int(entry["memory_mib"])
            if mem <= 0 or isinstance(entry["memory_mib"], bool):
                raise ValueError
        except (TypeError, ValueError):
            problems.append(
                f"{where}.memory_mib is {entry['memory_mib']!r}; allowed: a positive number of MiB, e.g. 97887"
            )
            mem = 0
        count = entry.get("count", 1)
        if isinstance(count, bool) or not str(count).isdigit() or int(count) < 1:
            problems.append(f"{where}.count is {count!r}; allowed: an integer >= 1")
            count = 0
        if not version_tuple(entry["driver"]):
            problems.append(f'{where}.driver is {entry["driver"]!r}; allowed: a driver version such as "580.95.05"')
        dcv = entry.get("driver_cuda_version")
        if dcv not in (None, ""):
            if not _CC.match(str(dcv)):
                problems.append(f'{where}.driver_cuda_version is {dcv!r}; allowed: MAJOR.MINOR, e.g. "13.0"')
            else:
                driver_cuda = str(dcv)
        for _copy in range(int(count)):
            gpus.append(
                {
                    "index": len(gpus),
                    "name": str(entry["name"]),
                    "memory_mib": mem,
                    "driver": str(entry["driver"]),
                    "compute_capability": cc,
                    "pci_bus_id": str(entry.get("pci_bus_id") or ""),
                    "uuid": str(entry.get("uuid") or ""),
                }
            )
    return {"gpus": gpus if not problems else [], "driver_cuda_version": driver_cuda, "problems": problems}


def select_visible_gpus(gpus: Sequence[Mapping[str, Any]], cuda_visible_devices: Any) -> dict[str, Any]:
    """The GPUs a process sees under CUDA_VISIBLE_DEVICES (unset or empty string: all of them).

    Entries are indices (nvidia-smi order, which is PCI bus order, matching CUDA_DEVICE_ORDER=PCI_BUS_ID)
    or GPU UUIDs, a unique prefix allowed. CUDA stops at the first entry that names no device;
    that is reported as a problem rather than silently shrinking the set.
    """
    spec = "" if cuda_visible_devices is None else str(cuda_visible_devices).strip()
    if spec == "":
        return {"gpus": list(gpus), "problems": []}
    chosen: list[Mapping[str, Any]] = []
    problems: list[str] = []
    for entry in [e.strip() for e in spec.split(",")]:
        match: list[Mapping[str, Any]] = []
        if re.fullmatch(r"\d+", entry):
            match = [g for g in gpus if g.get("index") == int(entry)]
        elif entry.startswith("GPU-"):
            match = [g for g in gpus if str(g.get("uuid") or "").startswith(entry)]
        elif entry.startswith("MIG-"):
            # a MIG instance (MIG-<uuid>, or MIG-GPU-<uuid>/<gi>/<ci> before R470): one slice of a GPU
            problems.append(
                f"CUDA_VISIBLE_DEVICES (cuda_env_cuda_env) entry {entry!r} of {spec!r} names a MIG instance: "
                "the role checks whole GPUs, which SGLang's tensor parallelism needs; disable MIG on the GPUs "
                "the server uses and name them by index or GPU UUID"
            )
            break
        if len(match) != 1 or match[0] in chosen:
            problems.append(
                f"CUDA_VISIBLE_DEVICES (cuda_env_cuda_env) entry {entry!r} of {spec!r} "
                f"{'is repeated' if len(match) == 1 else 'names no single GPU of this host'}; "
                f"allowed: indices 0..{len(gpus) - 1} or GPU UUIDs, each once"
            )
            break
        chosen.append(match[0])
    return {"gpus": chosen, "problems": problems}


def describe_gpus(gpus: Iterable[Mapping[str, Any]]) -> str:
    """One short line for failure messages; identical GPUs are grouped: '[0,1,2,3] NAME 97887 MiB cc 12.0'."""
    groups: dict[tuple[Any, Any, Any], list[str]] = {}
    for g in gpus:
        key = (g.get("name"), g.get("memory_mib"), g.get("compute_capability"))
        groups.setdefault(key, []).append(str(g.get("index")))
    parts = [f"[{','.join(idx)}] {name} {mem} MiB cc {cc}" for (name, mem, cc), idx in groups.items()]
    return "; ".join(parts) if parts else "none"


def gpu_problems(
    visible: Sequence[Mapping[str, Any]],
    min_gpus: Any,
    min_compute_capability: str,
    cuda_version: str,
    driver_cuda_version: str | None = None,
    source: str = "nvidia-smi",
    total: int | None = None,
    check_driver: bool = True,
) -> list[str]:
    """Does this host's GPU set fit the deploy? Returns failure messages (empty: it fits).

    Checks: enough GPUs for the tensor-parallel size; every GPU at or above the minimum compute
    capability; the pinned CUDA toolkit knows the GPUs' architecture; the driver supports the
    pinned CUDA (the 'CUDA Version' nvidia-smi prints; minor-version compatibility is ignored,
    which is the conservative reading).
    """
    problems: list[str] = []
    n = len(visible)
    try:
        need = int(min_gpus)
    except (TypeError, ValueError):
        return [f"{MIN_GPUS_VAR} is {min_gpus!r} ({MIN_GPUS_ORIGIN}); allowed: an integer >= 1"]
    where = "declared in cuda_env_declared_gpus" if source == "declared" else "found by nvidia-smi"
    if need < 1:
        problems.append(f"{MIN_GPUS_VAR} is {need} ({MIN_GPUS_ORIGIN}); allowed: an integer >= 1")
    elif n < need:
        hidden = ""
        if total is not None and total > n:
            hidden = f" ({total - n} of {total} hidden by CUDA_VISIBLE_DEVICES in cuda_env_cuda_env)"
        allowed = (
            f"sglang_server_tp_size (per node) / {MIN_GPUS_VAR} from 1 to {n} on this host"
            if n
            else "none: this host has no usable GPU, so it cannot serve with SGLang"
        )
        problems.append(
            f"{MIN_GPUS_VAR} is {need} ({MIN_GPUS_ORIGIN}) but this host has {n} usable GPU(s){hidden}, "
            f"{where}: {describe_gpus(visible)}; allowed: {allowed}"
        )
    want_cc = version_tuple(min_compute_capability)
    low = [g for g in visible if g.get("compute_capability") and version_tuple(g["compute_capability"]) < want_cc]
    if low:
        problems.append(
            f"GPU(s) {describe_gpus(low)} are below cuda_env_min_compute_capability {min_compute_capability}; "
            f"allowed: GPUs of compute capability >= {min_compute_capability}, or a lower cuda_env_min_compute_capability"
        )
    cuda = version_tuple(cuda_version)
    for cc in sorted({str(g["compute_capability"]) for g in visible if g.get("compute_capability")}):
        names = sorted({str(g.get("name")) for g in visible if str(g.get("compute_capability")) == cc})
        need_cuda = MIN_CUDA_FOR_COMPUTE_CAPABILITY.get(cc)
        if need_cuda and cuda < version_tuple(need_cuda):
            problems.append(
                f"cuda_env_cuda_version {cuda_version} cannot build for {', '.join(names)} (compute capability {cc}); "
                f"allowed: cuda_env_cuda_version >= {need_cuda}"
            )
        if cuda >= (13,) and version_tuple(cc) < version_tuple(CUDA13_MIN_COMPUTE_CAPABILITY):
            problems.append(
                f"cuda_env_cuda_version {cuda_version} no longer supports {', '.join(names)} (compute capability {cc}); "
                f"allowed: cuda_env_cuda_version 12.x for GPUs below compute capability {CUDA13_MIN_COMPUTE_CAPABILITY}"
            )
    if check_driver and driver_cuda_version and not _CC.match(str(driver_cuda_version).strip()):
        problems.append(
            f"the NVIDIA driver reports no CUDA version (nvidia-smi: CUDA Version: {str(driver_cuda_version).strip()}): "
            "its user-mode part "
            "(libcuda) is missing or does not match the kernel module, so no CUDA program can run; allowed: "
            "a complete driver install (out of this role's scope), or cuda_env_check_driver: false"
        )
    elif check_driver and driver_cuda_version and version_tuple(driver_cuda_version) < cuda[:2]:
        drivers = sorted({str(g.get("driver")) for g in visible if g.get("driver")})
        # minor-version compatibility holds within a major release only; across one, NVIDIA's
        # forward-compatibility package (cuda-compat, data-center GPUs) is the only way
        same_major = version_tuple(driver_cuda_version)[:1] == cuda[:1]
        relax = (
            "cuda_env_check_driver: false to rely on CUDA minor-version compatibility"
            if same_major
            else f"cuda_env_check_driver: false only with NVIDIA's forward-compatibility package (cuda-compat-"
            f"{cuda_version.replace('.', '-')}, data-center GPUs): minor-version compatibility does not cross "
            f"from CUDA {version_tuple(driver_cuda_version)[0]} to {cuda[0]}"
        )
        problems.append(
            f"the NVIDIA driver {', '.join(drivers) or '(unknown)'} supports CUDA up to {driver_cuda_version}, "
            f"below cuda_env_cuda_version {cuda_version}; allowed: cuda_env_cuda_version <= {driver_cuda_version}, "
            f"or a newer driver (the driver is out of this role's scope), or {relax}"
        )
    return problems


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _apt_uri(url: Any) -> str:
    """A repository URL as apt prints it in `$(REPO_URI)`: one trailing slash, and a file URL as
    `file:/path` (apt prints `file:///srv/cuda/` as `file:/srv/cuda/`)."""
    text = re.sub(r"^file:/+", "file:/", str(url).strip())
    return text.rstrip("/") + "/"


# apt keeps a repository configured twice once, under the file it read first, and warns (apt-pkg/
# deb/debmetaindex.cc, apt 2.4-2.8): "W: Target Packages (Packages) is configured multiple times in
# A:1 and B:1"
_APT_DUPLICATE = re.compile(r" is configured multiple times in (\S+):\d+ and (\S+):\d+\s*$")


def apt_sources_carrying(stdout: Any, stderr: Any, url: Any, own_file: Any) -> list[str]:
    """The apt source files other than `own_file` that carry the repository at `url`, from
    `apt-get indextargets --no-release-info --format '$(REPO_URI) $(SOURCESENTRY)'` (apt's own reading
    of its sources: a deb822 stanza with `Enabled: no` or a commented line is not listed) and its
    warnings, which name a file that repeats a repository apt listed under `own_file` (a file that
    holds this repository alone, so whatever repeats it carries it)."""
    want, own = _apt_uri(url), str(own_file)
    found: list[str] = []
    for line in str(stdout or "").splitlines():
        uri, _sep, entry = line.strip().partition(" ")
        if uri and entry and _apt_uri(uri) == want:
            found.append(entry.rsplit(":", 1)[0])
    for line in str(stderr or "").splitlines():
        m = _APT_DUPLICATE.search(line)
        if m and own in m.groups():
            found.extend(m.groups())
    return [f for f in dict.fromkeys(found) if f != own]


def merge_environment(*layers: Any) -> dict[str, str]:
    """Merge environment dicts (later wins) into what the env file and the NCCL check both use.

    An empty string or null drops the variable, so a default can list a variable (documented) without
    setting it, e.g. NCCL_SOCKET_IFNAME: there is no safe default NIC (ray-project/ray#42652). Booleans
    become 1/0, the form NCCL reads. Raises ValueError for a name or value a systemd EnvironmentFile
    cannot carry.
    """
    merged: dict[str, str] = {}
    for layer in layers:
        if not layer:
            continue
        if not isinstance(layer, Mapping):
            raise ValueError(f"environment layer {layer!r} is not a mapping of NAME: value")
        for key, value in layer.items():
            if not isinstance(key, str) or not _ENV_NAME.match(key):
                raise ValueError(
                    f"environment variable name {key!r}: allowed: letters, digits and _, not starting with a digit"
                )
            if value is None or value == "":
                merged.pop(key, None)
                continue
            if isinstance(value, bool):
                text = "1" if value else "0"
            elif isinstance(value, (str, int, float)):
                text = str(value)
            else:
                raise ValueError(f"environment variable {key}: value {value!r} is not a string or number")
            if "\n" in text or "\x00" in text:
                raise ValueError(f"environment variable {key}: value {text!r} holds a newline or NUL")
            merged[key] = text
    return merged


def environment_problems(name: str, layer: Any) -> list[str]:
    """Problems with one role variable holding an environment dict, each naming the variable."""
    try:
        merge_environment(layer)
    except ValueError as exc:
        return [f"{name}: {exc}"]
    return []


SUPPORTED_REPO_DISTROS = ("ubuntu2204", "ubuntu2404", "debian12")
SUPPORTED_REPO_ARCHES = ("x86_64", "sbsa")
GPU_SOURCES = ("auto", "nvidia-smi", "declared")
_SIZE = re.compile(r"^[0-9]+[KMG]?$")


def _is_int(value: Any, low: int) -> bool:
    if isinstance(value, bool) or not re.fullmatch(r"-?\d+", str(value).strip()):
        return False
    return int(str(value).strip()) >= low


def _is_number(value: Any, low: float) -> bool:
    if isinstance(value, bool):
        return False
    try:
        return float(value) >= low
    except (TypeError, ValueError):
        return False


def input_problems(v: Mapping[str, Any]) -> list[str]:
    """Validate the cuda_env_* variables; one message per bad variable, naming it and what is allowed.

    Runs in the preflight, before anything on the host changes. Types are also declared in
    meta/argument_specs.yml; this adds the value rules argument specs cannot express.
    """
    p: list[str] = []

    def bad(name: str, allowed: str) -> None:
        p.append(f"{name} is {v.get(name)!r}; allowed: {allowed}")

    if isinstance(v.get("cuda_env_cuda_version"), bool) or not re.fullmatch(
        r"\d+\.\d+", str(v.get("cuda_env_cuda_version"))
    ):
        bad("cuda_env_cuda_version", 'MAJOR.MINOR as a quoted string, e.g. "12.8"')
    if not re.fullmatch(r"\d+\.\d+\.\d+-\d+(\+cuda\d+\.\d+)?", str(v.get("cuda_env_nccl_version", ""))):
        bad(
            "cuda_env_nccl_version",
            'NCCL\'s Debian version, e.g. "2.26.2-1" (built for cuda_env_cuda_version), or with the +cuda suffix of '
            'the build to take, e.g. "2.26.2-1+cuda12.4" (NVIDIA builds each NCCL for a few CUDA minors only)',
        )
    tkv = str(v.get("cuda_env_cuda_toolkit_version") or "")
    if tkv and not re.fullmatch(r"[0-9][0-9A-Za-z.+~:-]*", tkv):
        bad("cuda_env_cuda_toolkit_version", '"" (newest of the pinned CUDA minor) or an apt version, e.g. "12.8.1-1"')
    if not str(v.get("cuda_env_cuda_toolkit_package") or "").strip():
        bad("cuda_env_cuda_toolkit_package", "an apt package name, e.g. cuda-toolkit-12-8")
    for name, pin in (("cuda_env_nccl_packages", ""), ("cuda_env_extra_packages", "=")):
        value = v.get(name, [])
        if not isinstance(value, (list, tuple)) or not all(
            isinstance(x, str) and re.fullmatch(r"[a-z0-9][a-z0-9.+:~" + pin + "-]*", x) for x in value
        ):
            bad(
                name, "a list of apt package names" + ("" if pin else " (no =version: cuda_env_nccl_version pins them)")
            )
    if not v.get("cuda_env_nccl_packages"):
        bad("cuda_env_nccl_packages", "at least one package, normally libnccl2 and libnccl-dev")
    if not _is_int(v.get("cuda_env_apt_cache_valid_time", 0), 0):
        bad("cuda_env_apt_cache_valid_time", "seconds >= 0")
    if not _is_int(v.get("cuda_env_apt_lock_timeout", 0), 0):
        bad("cuda_env_apt_lock_timeout", "seconds >= 0")
    for name in ("cuda_env_repo_url", "cuda_env_repo_key_url", "cuda_env_repo_base_url"):
        url = str(v.get(name) or "")
        if (url or name == "cuda_env_repo_base_url") and not re.match(r"^(https?|file)://\S+$", url):
            bad(name, ('"" (derived) or ' if name != "cuda_env_repo_base_url" else "") + "an http(s):// or file:// URL")
    distro = str(v.get("cuda_env_repo_distro") or "")
    if distro and distro not in SUPPORTED_REPO_DISTROS:
        bad("cuda_env_repo_distro", '"" (derived from the host) or one of ' + ", ".join(SUPPORTED_REPO_DISTROS))
    arch = str(v.get("cuda_env_repo_arch") or "")
    if arch and arch not in SUPPORTED_REPO_ARCHES:
        bad("cuda_env_repo_arch", '"" (derived from the host) or one of ' + ", ".join(SUPPORTED_REPO_ARCHES))
    checksum = str(v.get("cuda_env_repo_key_checksum") or "")
    if checksum and not re.fullmatch(r"(sha1|sha224|sha256|sha384|sha512|md5):[0-9a-fA-F]+", checksum):
        bad("cuda_env_repo_key_checksum", '"" or ALGORITHM:HEX as get_url takes it, e.g. sha256:...')
    if v.get("cuda_env_gpu_source") not in GPU_SOURCES:
        bad("cuda_env_gpu_source", ", ".join(GPU_SOURCES))
    if not str(v.get("cuda_env_nvidia_smi") or "").strip():
        bad("cuda_env_nvidia_smi", "the nvidia-smi command or its absolute path")
    declared = v.get("cuda_env_declared_gpus") or []
    p.extend(expand_declared_gpus(declared)["problems"])
    if v.get("cuda_env_gpu_source") == "declared" and not declared:
        bad("cuda_env_declared_gpus", "a non-empty list when cuda_env_gpu_source is declared")
    if not _is_int(v.get("cuda_env_min_gpus"), 1):
        bad("cuda_env_min_gpus", f"an integer >= 1 ({MIN_GPUS_ORIGIN})")
    if not re.fullmatch(r"\d+\.\d+", str(v.get("cuda_env_min_compute_capability", ""))):
        bad("cuda_env_min_compute_capability", 'MAJOR.MINOR as a quoted string, e.g. "8.0"')
    env_file = str(v.get("cuda_env_env_file") or "")
    if not re.fullmatch(r"/[^\s]*[^/\s]", env_file):
        bad("cuda_env_env_file", "an absolute file path without spaces, e.g. /etc/sglang/cuda_env.env")
    for name in ("cuda_env_nccl_env", "cuda_env_cuda_env", "cuda_env_extra_env", "cuda_env_nccl_check_env"):
        p.extend(environment_problems(name, v.get(name)))
    sizes = v.get("cuda_env_nccl_check_sizes")
    if (
        not isinstance(sizes, (list, tuple))
        or not sizes
        or not all(_SIZE.match(str(s)) and _size_bytes(str(s)) > 0 and _size_bytes(str(s)) % 4 == 0 for s in sizes)
    ):
        bad(
            "cuda_env_nccl_check_sizes",
            "a non-empty list of byte sizes, positive multiples of 4, with an optional K/M/G suffix, e.g. [1M, 32M, 256M]",
        )
    if not _is_int(v.get("cuda_env_nccl_check_iters"), 1):
        bad("cuda_env_nccl_check_iters", "an integer >= 1")
    if not _is_int(v.get("cuda_env_nccl_check_timeout"), 10):
        bad("cuda_env_nccl_check_timeout", "seconds >= 10 (an integer)")
    if not _is_number(v.get("cuda_env_nccl_check_min_busbw_gbps"), 0):
        bad("cuda_env_nccl_check_min_busbw_gbps", "GB/s >= 0 (0 = no bandwidth floor)")
    py = str(v.get("cuda_env_nccl_check_python") or "")
    if py and not py.startswith("/"):
        bad(
            "cuda_env_nccl_check_python",
            '"" (the check then runs only when a caller names a python) or the absolute path of a python with torch, e.g. /opt/sglang/venv/bin/python',
        )
    return p


def _size_bytes(text: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * mult


# What apt's failures mean for the role's variables (ansible.builtin.apt's messages, apt's own):
# pattern -> what to change.
_APT_FAILURES = (
    (
        r"python3?-apt",
        "Ansible's apt module needs python3-apt on the host and apt could not install it (the host's own "
        "Debian/Ubuntu repositories unreachable): install python3-apt, or make those repositories reachable",
    ),
    (
        r"not signed|NO_PUBKEY|signatures (were invalid|couldn't be verified)|is not signed",
        "the repository's signing key does not verify it: cuda_env_repo_key_url (and cuda_env_repo_key_checksum)",
    ),
    (
        r"Failed to lock apt|Could not get lock|dpkg frontend lock|Unable to acquire the dpkg",
        "another apt or dpkg (unattended-upgrades, a manual install) held the lock past cuda_env_apt_lock_timeout: "
        "run again once it has finished, or raise that timeout",
    ),
    (
        r"no available installation candidate|Version '[^']*' for '[^']*' was not found",
        "a pinned version the repository does not carry: cuda_env_cuda_toolkit_version / cuda_env_nccl_version "
        "(`apt-cache madison <package>` on the host lists the ones it does)",
    ),
    (
        r"No package matching",
        "the repository gave no index for the package: cuda_env_repo_url unreachable or wrong (apt only warns "
        "when it cannot fetch a source), or cuda_env_cuda_toolkit_package / cuda_env_nccl_packages misnamed",
    ),
)


def apt_failure_message(msg: Any, packages: Any, repo_url: Any, removed: Any = None) -> str:
    """The install's failure in words a user acts on: apt's own first line, what it means for the
    role's variables, and what the role took back so that the host's apt keeps working."""
    text = str(msg or "the apt module failed without a message").strip()
    first = text.splitlines()[0] if text else text
    hint = next((why for pattern, why in _APT_FAILURES if re.search(pattern, text, re.IGNORECASE)), None)
    out = f"installing {', '.join(map(str, packages or []))} from {repo_url} failed: {first[:400]}"
    out += (
        f". Likely cause: {hint}"
        if hint
        else ". See apt's message above; the role's variables are in roles/cuda_env/meta/argument_specs.yml"
    )
    gone = [str(p) for p in (removed or []) if p]
    if gone:
        out += f". Taken back so that apt keeps working: {', '.join(gone)} (this run wrote them)"
    return out + "."


class FilterModule:
    """Ansible filters (prefixed: the filter namespace is shared with other plugins)."""

    def filters(self) -> dict[str, Any]:
        return {
            "cuda_env_parse_gpus": parse_query_gpu,
            "cuda_env_parse_driver_cuda": parse_driver_cuda_version,
            "cuda_env_parse_topology": parse_topology,
            "cuda_env_declared_gpus": expand_declared_gpus,
            "cuda_env_visible_gpus": select_visible_gpus,
            "cuda_env_gpu_problems": gpu_problems,
            "cuda_env_parse_mig": parse_mig_modes,
            "cuda_env_mig_problems": mig_problems,
            "cuda_env_version_tuple": lambda v: list(version_tuple(v)),
            "cuda_env_merge_env": merge_environment,
            "cuda_env_apt_sources_carrying": apt_sources_carrying,
            "cuda_env_env_problems": environment_problems,
            "cuda_env_input_problems": input_problems,
            "cuda_env_apt_failure": apt_failure_message,
        }
