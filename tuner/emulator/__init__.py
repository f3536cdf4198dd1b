"""SGLang emulator: `python -m tuner.emulator` takes sglang.launch_server's flags, prints SGLang's log
lines and serves its HTTP API, timing tokens by the model of docs/reference/performance-model.md and a
profile file. Runtime needs: the standard library, aiohttp and PyYAML only (docs/architecture.md).
"""

__version__ = "0.1.0"
