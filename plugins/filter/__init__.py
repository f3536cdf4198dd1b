# Ansible loads these filter plugins as sglang_tune.serving.<filter> (the collection). The rules
# behind them are plugins/module_utils (sglang_spec, sglang_checks, sglang_flags), which the tuner
# imports too, as `sglang_utils`.
