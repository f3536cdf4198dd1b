"""Stand-in for the pip bootstrap script ansible-test downloads (get-pip-<version>.py).

ansible-test bootstraps pip into every virtual environment it makes with a script fetched from
ci-files.testing.ansible.com, which machines that reach only the package registries cannot fetch.
Its documented hook is a script already in ~/.ansible/test/cache/get_pip_<version>.py
(ansible_test/_util/target/setup/requirements.py, bootstrap()). This one bootstraps pip from the
interpreter's bundled ensurepip, then installs the pins ansible-test asks for (pip==<version>)
from the package index, as get-pip does. scripts/sanity.sh puts it in place.
"""

import subprocess
import sys

# get-pip options that pip install does not know: each leaves a package out of the environment
# (ensurepip may bring setuptools along; get-pip installs setuptools and wheel unless told not to).
GET_PIP_ONLY = {"--no-setuptools": "setuptools", "--no-wheel": "wheel"}


def main() -> None:
    args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
    left_out = [pkg for flag, pkg in GET_PIP_ONLY.items() if flag in sys.argv[1:]]
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *args])
    if left_out:
        # as get-pip leaves them out: ansible-test asks for an environment without them
        # (ansible_test/_util/target/setup/requirements.py passes --no-setuptools --no-wheel)
        subprocess.check_call([sys.executable, "-m", "pip", "uninstall", "--quiet", "--yes", *left_out])


if __name__ == "__main__":
    main()
