"""Fixtures for the sglang_ready module tests; the helpers themselves are in ready_testlib.py."""

from __future__ import annotations

from typing import Any

import pytest
from ready_testlib import FakeSGLang, ModuleExit, exit_json_raises, fail_json_raises, import_sglang_ready


@pytest.fixture
def fake_sglang():
    server = FakeSGLang().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def run_module(monkeypatch):
    """Run ``sglang_ready.main()`` with ``args``; returns ``(result, failed)``."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json_raises)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json_raises)
    sglang_ready = import_sglang_ready()

    def run(args: dict[str, Any], check_mode: bool = False):
        args = dict(args)
        if check_mode:
            args["_ansible_check_mode"] = True
        with patch_module_args(args):
            with pytest.raises(ModuleExit) as exc:
                sglang_ready.main()
        return exc.value.result, exc.value.failed

    return run
