# Read-only check run by tasks/preflight.yml on rank 0's host of a multi-node server: can the
# dist-init port be bound? Prints `free`, `ours` (in use while this role's unit is active: its own
# rank 0 holds it) or `in use: <reason>`. Arguments: PORT UNIT. Python 3.6+, standard library.
import errno
import socket
import subprocess
import sys

port, unit = int(sys.argv[1]), sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("", port))
    print("free")
except OSError as e:
    active = subprocess.run(["systemctl", "is-active", "--quiet", unit], check=False).returncode == 0
    if e.errno == errno.EADDRINUSE and active:
        print("ours")
    else:
        print("in use: " + (e.strerror or str(e)))
finally:
    s.close()
