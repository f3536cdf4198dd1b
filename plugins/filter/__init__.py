# Ansible loads these filter plugins as sglang_tune.serving.<filter> (the collection); the tuner
# imports the same files as the package `sglang_filters` (pyproject.toml), so the rules the deploy
# play validates spec_* with are the rules the tuner plans a sweep with.
