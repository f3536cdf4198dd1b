"""The pure GPU-facts parsers and checks (plugins/filter/gpu_facts.py) on realistic nvidia-smi output."""

from __future__ import annotations

import gpu_facts as gf
import pytest
import yaml
from conftest import ROLE, fixture_text


def test_parse_query_h200x8() -> None:
    gpus = gf.parse_query_gpu(fixture_text("smi_query_h200x8.txt"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA H200",
        "memory_mib": 143771,
        "driver": "580.159.04",
        "compute_capability": "9.0",
        "pci_bus_id": "00000000:18:00.0",
        "uuid": "GPU-5e3b9f1a-7c2d-4e8f-9a61-3b2c1d0e4f57",
    }
    assert {g["pci_bus_id"] for g in gpus} == {
        f"00000000:{b}:00.0" for b in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
    }


def test_parse_query_rtx_pro_6000() -> None:
    gpus = gf.parse_query_gpu(fixture_text("smi_query_rtxpro6000x4.txt"))
    assert len(gpus) == 4
    assert {g["name"] for g in gpus} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {g["memory_mib"] for g in gpus} == {97887}
    assert {g["compute_capability"] for g in gpus} == {"12.0"}


def test_parse_query_tolerates_header_units_na_and_commas_in_names() -> None:
    text = (
        "index, name, memory.total [MiB], driver_version, compute_cap, pci.bus_id, uuid\n"
        "0, NVIDIA A100-SXM4-80GB, 81920 MiB, 535.54.03, 8.0, 00000000:07:00.0, GPU-1\n"
        "1, Vendor, Model X, 16384, 535.54.03, [N/A], 00000000:08:00.0, [N/A]\n\n"
    )
    gpus = gf.parse_query_gpu(text)
    assert gpus[0]["memory_mib"] == 81920
    assert gpus[1]["name"] == "Vendor, Model X"
    assert gpus[1]["compute_capability"] is None and gpus[1]["uuid"] is None


def test_parse_query_no_devices_is_empty() -> None:
    assert gf.parse_query_gpu("No devices were found\n") == []
    assert gf.parse_query_gpu("") == []


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("0, NVIDIA H200, 143771\n", "has 3 fields, expected 7"),
        ("x, NVIDIA H200, 143771, 580.1, 9.0, 0000:18:00.0, GPU-1\n", "index 'x' is not a number"),
        ("0, NVIDIA H200, lots, 580.1, 9.0, 0000:18:00.0, GPU-1\n", "memory.total 'lots'"),
        ("0, NVIDIA H200, 143771, 580.1, nine, 0000:18:00.0, GPU-1\n", "compute_cap 'nine'"),
    ],
)
def test_parse_query_rejects_what_it_cannot_read(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        gf.parse_query_gpu(text)


def test_driver_cuda_version_from_banner_and_q() -> None:
    assert gf.parse_driver_cuda_version(fixture_text("smi_banner_h200.txt")) == "13.0"
    assert gf.parse_driver_cuda_version(fixture_text("smi_banner_rtxpro6000_570.txt")) == "12.8"
    assert gf.parse_driver_cuda_version(fixture_text("smi_q_h200.txt")) == "13.0"
    assert gf.parse_driver_cuda_version("no banner") is None
    # driver R610 on: `KMD Version` and `CUDA UMD Version` (sgl-project/sglang#27487, 8x B200)
    r610 = "| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02      CUDA UMD Version: 13.3     |"
    assert gf.parse_driver_cuda_version(r610) == "13.3"
    # no user-mode CUDA driver (pytorch/pytorch#25117): nothing CUDA can run
    assert (
        gf.parse_driver_cuda_version("| NVIDIA-SMI 535.54.03   Driver Version: 535.54.03   CUDA Version: N/A |")
        == "N/A"
    )
    # nvidia-smi could not ask libcuda (microsoft/WSL#11589's banner, verbatim): it read as no banner,
    # and the host passed the driver check
    wsl = "| NVIDIA-SMI 545.46                 Driver Version: 546.80       CUDA Version: ERR!     |"
    assert gf.parse_driver_cuda_version(wsl) == "ERR!"


def test_topology_nvlink_h200x8_ignores_nics_and_ansi() -> None:
    topo = gf.parse_topology(fixture_text("smi_topo_h200x8.txt"))
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert topo["links"]["GPU0"]["GPU7"] == "NV18"
    assert "GPU0" not in topo["links"]["GPU0"] and "NIC0" not in topo["links"]["GPU0"]
    assert topo["link_types"] == ["NV18"] and topo["nvlink"] and not topo["pcie_only"]


def test_topology_pcie_only_rtx_pro_6000() -> None:
    topo = gf.parse_topology(fixture_text("smi_topo_rtxpro6000x4.txt"))
    assert topo["link_types"] == ["NODE", "SYS"]
    assert topo["links"]["GPU2"] == {"GPU0": "SYS", "GPU1": "SYS", "GPU3": "NODE"}
    assert topo["pcie_only"] and not topo["nvlink"]


def test_topology_single_gpu() -> None:
    topo = gf.parse_topology(fixture_text("smi_topo_h200x1.txt"))
    assert topo == {"gpus": ["GPU0"], "links": {"GPU0": {}}, "link_types": [], "nvlink": False, "pcie_only": False}


RTX = {
    "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "memory_mib": 97887,
    "compute_capability": "12.0",
    "driver": "580.95.05",
}


def test_declared_gpus_expand_count() -> None:
    out = gf.expand_declared_gpus([dict(RTX, count=4, driver_cuda_version="13.0")])
    assert out["problems"] == []
    assert [g["index"] for g in out["gpus"]] == [0, 1, 2, 3]
    assert out["gpus"][3]["name"] == RTX["name"] and out["gpus"][3]["memory_mib"] == 97887
    assert out["driver_cuda_version"] == "13.0"


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({k: v for k, v in RTX.items() if k != "memory_mib"}, "cuda_env_declared_gpus[0] lacks memory_mib"),
        (dict(RTX, compute_capability=12), "compute_capability is '12'"),
        (dict(RTX, memory_mib=-5), "memory_mib is -5"),
        (dict(RTX, count=0), "count is 0"),
        (dict(RTX, driver="new"), "driver is 'new'"),
        (dict(RTX, colour="green"), "unknown keys ['colour']"),
    ],
)
def test_declared_gpus_problems_name_the_entry(entry: dict, needle: str) -> None:
    out = gf.expand_declared_gpus([entry])
    assert any(needle in p for p in out["problems"]), out["problems"]
    assert out["gpus"] == []


def test_declared_gpus_not_a_list() -> None:
    assert "must be a list" in gf.expand_declared_gpus({"name": "x"})["problems"][0]


def test_visible_gpus_by_index_and_uuid() -> None:
    gpus = gf.parse_query_gpu(fixture_text("smi_query_h200x8.txt"))
    assert [g["index"] for g in gf.select_visible_gpus(gpus, "")["gpus"]] == list(range(8))
    assert [g["index"] for g in gf.select_visible_gpus(gpus, "3,1")["gpus"]] == [3, 1]
    assert [g["index"] for g in gf.select_visible_gpus(gpus, "GPU-0c8d2b7e")["gpus"]] == [1]
    bad = gf.select_visible_gpus(gpus, "0,9,1")
    assert [g["index"] for g in bad["gpus"]] == [0]
    assert "entry '9' of '0,9,1' names no single GPU" in bad["problems"][0]
    assert "is repeated" in gf.select_visible_gpus(gpus, "0,0")["problems"][0]


def test_tp_size_fits() -> None:
    gpus = gf.parse_query_gpu(fixture_text("smi_query_rtxpro6000x4.txt"))
    assert gf.gpu_problems(gpus, 4, "8.0", "12.8", "13.0") == []
    assert gf.gpu_problems(gpus, "2", "8.0", "12.8", "13.0") == []


def test_tp_size_too_big_names_variable_gpus_and_range() -> None:
    gpus = gf.parse_query_gpu(fixture_text("smi_query_rtxpro6000x4.txt"))
    [msg] = gf.gpu_problems(gpus, 8, "8.0", "12.8", "13.0")
    assert msg.startswith(
        "cuda_env_min_gpus is 8 (the deploy play sets it to the GPUs per node that SGLang's "
        "tensor-parallel size sglang_server_tp_size needs)"
    )
    assert "this host has 4 usable GPU(s), found by nvidia-smi" in msg
    assert "[0,1,2,3] NVIDIA RTX PRO 6000 Blackwell Server Edition 97887 MiB cc 12.0" in msg
    assert msg.endswith("allowed: sglang_server_tp_size (per node) / cuda_env_min_gpus from 1 to 4 on this host")


def test_tp_size_counts_visible_gpus_only() -> None:
    gpus = gf.parse_query_gpu(fixture_text("smi_query_h200x8.txt"))
    visible = gf.select_visible_gpus(gpus, "0,1")["gpus"]
    [msg] = gf.gpu_problems(visible, 4, "8.0", "12.8", "13.0", total=8)
    assert "has 2 usable GPU(s) (6 of 8 hidden by CUDA_VISIBLE_DEVICES in cuda_env_cuda_env)" in msg


def test_no_gpus_at_all() -> None:
    [msg] = gf.gpu_problems([], 1, "8.0", "12.8", None, source="declared")
    assert "0 usable GPU(s), declared in cuda_env_declared_gpus: none" in msg
    assert "allowed: none: this host has no usable GPU" in msg


def test_compute_capability_cuda_and_driver_checks() -> None:
    rtx = gf.parse_query_gpu(fixture_text("smi_query_rtxpro6000x4.txt"))
    [cc] = gf.gpu_problems(rtx, 1, "12.1", "12.8", "13.0")
    assert "below cuda_env_min_compute_capability 12.1" in cc
    [old_cuda] = gf.gpu_problems(rtx, 1, "8.0", "12.6", "13.0")
    assert old_cuda == (
        "cuda_env_cuda_version 12.6 cannot build for NVIDIA RTX PRO 6000 Blackwell Server Edition "
        "(compute capability 12.0); allowed: cuda_env_cuda_version >= 12.8"
    )
    # Jetson Thor: sm_101 from CUDA 12.8, renamed sm_110 in CUDA 13.0 (it then reports 11.0)
    thor = gf.parse_query_gpu("0, NVIDIA Thor, 125772, 580.00, 11.0, 00000000:01:00.0, GPU-d1\n")
    [thor13] = gf.gpu_problems(thor, 1, "8.0", "12.8", "13.0")
    assert "cannot build for NVIDIA Thor (compute capability 11.0); allowed: cuda_env_cuda_version >= 13.0" in thor13
    assert gf.gpu_problems(thor, 1, "8.0", "13.0", "13.0") == []
    [driver] = gf.gpu_problems(rtx, 1, "8.0", "12.9", "12.8")
    assert "supports CUDA up to 12.8, below cuda_env_cuda_version 12.9" in driver
    assert "cuda_env_check_driver: false" in driver
    assert gf.gpu_problems(rtx, 1, "8.0", "12.9", "12.8", check_driver=False) == []
    assert gf.gpu_problems(rtx, 1, "8.0", "12.9", None) == []  # unknown driver CUDA: not checked
    [none] = gf.gpu_problems(rtx, 1, "8.0", "12.9", "N/A")
    assert none.startswith("the NVIDIA driver reports no CUDA version") and "cuda_env_check_driver: false" in none
    assert gf.gpu_problems(rtx, 1, "8.0", "12.9", "13.3") == []  # an R610 banner's UMD version
    [err] = gf.gpu_problems(rtx, 1, "8.0", "12.9", "ERR!")
    assert err.startswith("the NVIDIA driver reports no CUDA version (nvidia-smi: CUDA Version: ERR!)")
    volta = [dict(rtx[0], name="Tesla V100-SXM2-32GB", compute_capability="7.0")]
    [cuda13] = gf.gpu_problems(volta, 1, "7.0", "13.0", "13.0")
    assert "no longer supports Tesla V100-SXM2-32GB (compute capability 7.0)" in cuda13


def test_bad_min_gpus() -> None:
    assert "allowed: an integer >= 1" in gf.gpu_problems([], "four", "8.0", "12.8")[0]
    assert "cuda_env_min_gpus is 0" in gf.gpu_problems([], 0, "8.0", "12.8")[0]


def test_version_tuple_is_lenient() -> None:
    assert gf.version_tuple("580.95.05") == (580, 95, 5)
    assert gf.version_tuple("580.xx") == (580,)
    assert gf.version_tuple("12.8") < gf.version_tuple("12.10")


def test_merge_environment() -> None:
    env = gf.merge_environment(
        {"CUDA_HOME": "/usr/local/cuda-12.8"},
        {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ""},
        {"NCCL_P2P_LEVEL": "SYS", "NCCL_IB_DISABLE": True, "NCCL_SOCKET_IFNAME": None, "NCCL_MIN_NCHANNELS": 8},
        {"CUDA_HOME": ""},
    )
    assert env == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "NCCL_P2P_LEVEL": "SYS",
        "NCCL_IB_DISABLE": "1",
        "NCCL_MIN_NCHANNELS": "8",
    }
    with pytest.raises(ValueError, match="name 'BAD-NAME'"):
        gf.merge_environment({"BAD-NAME": "1"})
    with pytest.raises(ValueError, match="newline"):
        gf.merge_environment({"A": "x\ny"})
    assert gf.environment_problems("cuda_env_extra_env", {"A": ["x"]})[0].startswith(
        "cuda_env_extra_env: environment variable A"
    )


def _defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def test_defaults_pass_input_validation() -> None:
    assert gf.input_problems(_defaults()) == []


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"cuda_env_cuda_version": "12"}, "cuda_env_cuda_version is '12'; allowed: MAJOR.MINOR"),
        ({"cuda_env_nccl_version": "2.26.2"}, "cuda_env_nccl_version is '2.26.2'; allowed: NCCL's Debian version"),
        ({"cuda_env_cuda_toolkit_version": "latest!"}, "cuda_env_cuda_toolkit_version is 'latest!'"),
        ({"cuda_env_nccl_packages": []}, "cuda_env_nccl_packages is []; allowed: at least one package"),
        ({"cuda_env_apt_lock_timeout": -5}, "cuda_env_apt_lock_timeout is -5; allowed: seconds >= 0"),
        ({"cuda_env_apt_lock_timeout": "long"}, "cuda_env_apt_lock_timeout is 'long'"),
        ({"cuda_env_repo_url": "ftp.example.com/cuda"}, "cuda_env_repo_url is 'ftp.example.com/cuda'"),
        (
            {"cuda_env_repo_distro": "centos7"},
            'allowed: "" (derived from the host) or one of ubuntu2204, ubuntu2404, debian12',
        ),
        ({"cuda_env_repo_arch": "ppc64le"}, "cuda_env_repo_arch is 'ppc64le'"),
        ({"cuda_env_repo_key_checksum": "abc"}, "cuda_env_repo_key_checksum is 'abc'"),
        ({"cuda_env_gpu_source": "guess"}, "cuda_env_gpu_source is 'guess'; allowed: auto, nvidia-smi, declared"),
        ({"cuda_env_gpu_source": "declared"}, "cuda_env_declared_gpus is []; allowed: a non-empty list"),
        (
            {"cuda_env_min_gpus": "four"},
            "cuda_env_min_gpus is 'four'; allowed: an integer >= 1 (the deploy play sets it to the GPUs per node",
        ),
        ({"cuda_env_min_compute_capability": 8}, "cuda_env_min_compute_capability is 8"),
        ({"cuda_env_env_file": "cuda_env.env"}, "cuda_env_env_file is 'cuda_env.env'; allowed: an absolute file path"),
        ({"cuda_env_extra_env": {"1X": "y"}}, "cuda_env_extra_env: environment variable name '1X'"),
        ({"cuda_env_nccl_check_sizes": ["1M", "3"]}, "cuda_env_nccl_check_sizes is ['1M', '3']"),
        # the script refuses 0 bytes: caught here, before the toolkit and NCCL are installed
        ({"cuda_env_nccl_check_sizes": ["0"]}, "cuda_env_nccl_check_sizes is ['0']; allowed: a non-empty list"),
        ({"cuda_env_nccl_check_timeout": 5}, "cuda_env_nccl_check_timeout is 5; allowed: seconds >= 10"),
        ({"cuda_env_nccl_check_min_busbw_gbps": -1}, "cuda_env_nccl_check_min_busbw_gbps is -1"),
        ({"cuda_env_nccl_check_python": "venv/bin/python"}, "cuda_env_nccl_check_python is 'venv/bin/python'"),
    ],
)
def test_input_problems_name_variable_and_allowed(override: dict, needle: str) -> None:
    problems = gf.input_problems({**_defaults(), **override})
    assert any(needle in p for p in problems), problems


def test_filter_module_exposes_prefixed_filters() -> None:
    names = gf.FilterModule().filters()
    assert all(n.startswith("cuda_env_") for n in names)
    assert names["cuda_env_parse_gpus"] is gf.parse_query_gpu


def test_real_h200_output_from_the_lent_machine() -> None:
    """Captured by scripts/device_gpu_check.sh on the lent H200 (docs/device-runs/h200-2026-11-29/)."""
    gpus = gf.parse_query_gpu(fixture_text("smi_query_h200x1_real.txt"))
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "memory_mib": 143771,
            "driver": "580.159.04",
            "compute_capability": "9.0",
            "pci_bus_id": "00000000:00:06.0",
            "uuid": "GPU-3b87a679-6bfd-f5b9-2cdf-c115643b9a65",
        }
    ]
    assert gf.parse_driver_cuda_version(fixture_text("smi_banner_h200_real.txt")) == "13.0"


def test_mig_modes_and_the_problem_they_make() -> None:
    """A GPU split into MIG instances is listed whole by --query-gpu (full memory): CUDA sees its
    instances instead (NVIDIA's MIG User Guide), so the role says so rather than count it whole;
    a MIG instance named in CUDA_VISIBLE_DEVICES is told apart from a missing GPU."""
    modes = gf.parse_mig_modes("0, Enabled\n1, Disabled\n2, [N/A]\nsomething else\n")
    assert modes == {0: "Enabled", 1: "Disabled"}
    gpus = gf.parse_query_gpu(fixture_text("smi_query_h200x8.txt"))[:3]
    [problem] = gf.mig_problems(gpus, modes)
    assert problem.startswith("MIG is enabled on GPU(s) 0 (") and "needs whole GPUs" in problem
    assert gf.mig_problems(gpus, {0: "Disabled"}) == [] and gf.mig_problems(gpus, {}) == []
    for entry in ("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f", "MIG-GPU-aaaa0000-1111-2222-3333-444455556666/1/0"):
        [why] = gf.select_visible_gpus(gpus, entry)["problems"]
        assert "names a MIG instance" in why and "names no single GPU" not in why


@pytest.mark.parametrize(
    ("msg", "hint"),
    [
        ("Failed to update apt cache after 5 retries: E:The repository 'x' is not signed.", "cuda_env_repo_key_url"),
        ("No package matching 'cuda-toolkit-12-8' is available", "cuda_env_repo_url unreachable or wrong"),
        ("no available installation candidate for libnccl2=2.26.2-1+cuda12.6", "cuda_env_nccl_version"),
        (
            "Failed to lock apt for exclusive operation: Failed to lock directory /var/lib/apt/lists/",
            "past cuda_env_apt_lock_timeout",
        ),
        ("E: Unable to locate package python3-apt", "install python3-apt"),
        ("something else entirely", "argument_specs.yml"),
    ],
)
def test_an_apt_failure_is_said_with_what_to_change(msg: str, hint: str) -> None:
    """The apt module's own words, then what they mean for the role's variables (a raw `No package
    matching` never said the repository was unreachable), and what the role took back."""
    text = gf.apt_failure_message(
        msg, ["cuda-toolkit-12-8", "libnccl2=2.26.2-1+cuda12.8"], "https://r/", ["/etc/a.sources"]
    )
    assert text.startswith(
        "installing cuda-toolkit-12-8, libnccl2=2.26.2-1+cuda12.8 from https://r/ failed: " + msg.splitlines()[0][:60]
    )
    assert hint in text and text.endswith("Taken back so that apt keeps working: /etc/a.sources (this run wrote them).")
