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
