"""The correctness and acceptance-drift gate (issue #20, docs/tuner.md "Verify").

A fast configuration is worthless if it changes the answers or loses its speed after a while.
The gate sends fixed greedy prompts to a configuration and compares what comes back with stored
outputs of a true no-speculation deployment (the baseline), looks for outputs that end in a
loop, and checks the acceptance length against the sweep's measurement and over its own run.

- ``prompts``: the fixed prompt set (the sweep's dataset, else the shipped one);
- ``probe``: the HTTP side (the project's aiohttp client session): what a server is, its outputs;
- ``baseline``: the baseline file (write, read, refuse one of another model/version/prompt set);
- ``gate``: capture a baseline, run the gate on a configuration;
- ``phase``: the gate as a phase of `sweep` (given to run/sweep.py by cli.py);
- ``command``: `python -m tuner verify`.

The last stage (docs/architecture.md): it uses run's client; run/sweep.py calls the phase through
a protocol, so no stage imports this one. The words are present/verify_text.py.

The rules themselves are plugins/module_utils/sglang_verify.py (``sglang_utils.sglang_verify``),
shared with the role's ``verify_outputs`` module so that they are written once.
"""
