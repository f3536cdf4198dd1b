# Ansible loads the filter plugins in this folder by path (ansible.cfg filter_plugins); the tuner
# imports the same files as the package `sglang_filters` (pyproject.toml), so the rules the deploy
# play validates spec_* with are the rules the tuner plans a sweep with.
