"""The role's documentation and wiring agree with its code: argument specs, defaults, the validation
inputs, and the nvidia-smi query the facts task runs."""

from __future__ import annotations

import gpu_facts as gf
import yaml
from conftest import ROLE


def load(rel: str):
    return yaml.safe_load((ROLE / rel).read_text())


def test_defaults_keys_equal_argument_spec_options() -> None:
    defaults = load("defaults/main.yml")
    specs = load("meta/argument_specs.yml")["argument_specs"]
    assert set(defaults) == set(specs["main"]["options"])
    for entry in ("preflight", "nccl_check"):
        assert specs[entry]["options"] == specs["main"]["options"], entry


def test_argument_spec_defaults_match_defaults_file() -> None:
    defaults = load("defaults/main.yml")
    for name, opt in load("meta/argument_specs.yml")["argument_specs"]["main"]["options"].items():
        assert opt.get("description"), name
        assert name.startswith("cuda_env_"), name
        assert opt["default"] == defaults[name], name


def test_every_variable_is_validated() -> None:
    assert set(load("vars/main.yml")["_cuda_env_inputs"]) == set(load("defaults/main.yml"))


def test_facts_task_runs_the_query_the_parser_reads() -> None:
    [query] = [t for t in load("tasks/facts.yml") if t["name"] == "Query the GPUs with nvidia-smi"]
    assert tuple(query["ansible.builtin.command"]["argv"][1:]) == gf.QUERY_GPU_ARGS


def test_the_mig_query_is_the_one_the_parser_reads() -> None:
    [query] = [t for t in load("tasks/facts_nvidia_smi.yml") if t["name"].startswith("Read whether the GPUs are split")]
    assert tuple(query["ansible.builtin.command"]["argv"][1:]) == gf.MIG_QUERY_ARGS


def test_every_task_is_tagged_cuda_env() -> None:
    for path in (ROLE / "tasks").glob("*.yml"):
        stack = [(task, []) for task in yaml.safe_load(path.read_text())]
        while stack:
            task, inherited = stack.pop()
            tags = inherited + task.get("tags", [])  # a block's tags apply to its tasks
            assert "cuda_env" in tags, (path.name, task.get("name"))
            stack.extend((t, tags) for t in task.get("block", []))


def _render(expr: str, **ctx: object) -> object:
    """One of the role's expressions rendered as Ansible renders it (native types)."""
    from role_jinja import render

    return render(expr, ctx)


def test_only_a_live_source_line_counts_as_carrying_the_repository() -> None:
    """A source commented out (`# deb ...`) counted as "already configured": the role removed its own
    source and added none, and the install found no CUDA package. find matches each line from its start."""
    import re

    task = next(t for t in load("tasks/repo.yml") if "ansible.builtin.find" in t)
    url = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
    pattern = re.compile(str(_render(task["ansible.builtin.find"]["contains"], _cuda_env_repo_url=url)))
    live = [f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {url} /", f"deb {url} /", f"URIs: {url}"]
    dead = [f"# deb [signed-by=/k] {url} /", f"#URIs: {url}", f"deb {url.rstrip('/')}-other/ /"]
    assert all(pattern.match(line) for line in live) and not any(pattern.match(line) for line in dead)


def test_the_key_url_of_a_mirror_without_a_trailing_slash() -> None:
    rule = load("vars/main.yml")["_cuda_env_repo_key_url"]
    for repo in ("http://mirror.example/cuda/ubuntu2204/x86_64", "http://mirror.example/cuda/ubuntu2204/x86_64/"):
        got = _render(rule, cuda_env_repo_key_url="", _cuda_env_repo_url=repo)
        assert got == "http://mirror.example/cuda/ubuntu2204/x86_64/3bf863cc.pub", got


def test_an_nccl_build_for_another_cuda_minor_is_taken_by_its_suffix() -> None:
    """NVIDIA builds each NCCL for a few CUDA minors (NVIDIA/nccl#1093): the suffix of another build is
    taken as given; a pin inside cuda_env_nccl_packages was pinned twice (libnccl2=...=...)."""
    rule = load("vars/main.yml")["_cuda_env_nccl_package_version"]
    assert _render(rule, cuda_env_nccl_version="2.26.2-1", cuda_env_cuda_version="12.6") == "2.26.2-1+cuda12.6"
    assert _render(rule, cuda_env_nccl_version="2.26.2-1+cuda12.4", cuda_env_cuda_version="12.6") == "2.26.2-1+cuda12.4"
    base = {**load("defaults/main.yml"), "cuda_env_cuda_version": "12.6"}
    assert not [p for p in gf.input_problems({**base, "cuda_env_nccl_version": "2.26.2-1+cuda12.4"}) if "nccl" in p]
    pinned = gf.input_problems({**base, "cuda_env_nccl_packages": ["libnccl2=2.26.2-1+cuda12.4"]})
    assert any("cuda_env_nccl_packages" in p and "cuda_env_nccl_version pins them" in p for p in pinned), pinned


def test_a_driver_of_an_older_cuda_major_is_not_offered_minor_version_compatibility() -> None:
    """Minor-version compatibility stays within a major release: a 12.x driver under CUDA 13 needs a
    newer driver or NVIDIA's forward-compatibility package, not cuda_env_check_driver: false alone."""
    h100 = [
        {"index": 0, "name": "NVIDIA H100", "memory_mib": 81559, "compute_capability": "9.0", "driver": "550.54.15"}
    ]
    across = " ".join(gf.gpu_problems(h100, 1, "8.0", "13.0", "12.4"))
    assert "forward-compatibility package (cuda-compat-13-0" in across and "does not cross from CUDA 12 to 13" in across
    within = " ".join(gf.gpu_problems(h100, 1, "8.0", "12.8", "12.4"))
    assert "to rely on CUDA minor-version compatibility" in within and "forward" not in within


def test_a_host_without_apt_is_refused_before_anything_changes() -> None:
    """Rocky 9 with cuda_env_repo_url set passed the preflight, then had an apt keyring written before
    the source failed; the assert holds the install to apt hosts whatever the repository variables say."""
    tasks = load("tasks/preflight.yml")
    task = next(t for t in tasks if t["name"] == "Check that this host installs packages with apt")
    assert task["when"] == "cuda_env_install | bool"
    gather = next(t for t in tasks if "ansible.builtin.setup" in t)
    assert "cuda_env_add_repo | bool" not in gather["when"]  # the facts are read for every install
    that = "{{ " + task["ansible.builtin.assert"]["that"][0] + " }}"
    for facts, ok in ((("Rocky", "RedHat")), False), ((("Ubuntu", "Debian")), True), ((("Amazon", "RedHat")), False):
        assert _render(that, ansible_facts={"distribution": facts[0], "os_family": facts[1]}) is ok, facts
