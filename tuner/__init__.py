"""sglang-tune: deploy SGLang with Ansible and tune its speculative decoding.

`python -m tuner` is the CLI (tuner/cli.py); `python -m tuner.emulator` the SGLang emulator.
This file imports nothing beyond the bare install (docs/architecture.md "Python packaging"):
emulator hosts import the package without the tuner's analysis stack.
"""

__version__ = "0.1.0"
