# Read-only check run by the role's preflight (tasks/preflight_host.yml: the server's port on every
# host; tasks/preflight_multinode.yml: rank 0's dist-init port): is the port free? Prints `free`,
# `ours` (a process of this role's unit listens there) or `in use: <what>` (the holder's pid and
# unit where /proc shows them); with HOST_IP (the unit's SGLANG_HOST_IP, which SGLang's cross-node
# message queue binds), first `not local: <what>` when no interface of this host has it. With
# --bind=ADDR (the server's sglang_server_host) the port is tried at that address as the server
# binds it (an IPv6 one, `::` included, IPv6 only, as uvicorn's listener is); else on every IPv4
# address. Arguments: PORT UNIT [HOST_IP] [--bind=ADDR]. Python 3.6+, standard library, Linux /proc.
import errno
import os
import socket
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--bind=")]
bind = next((a[len("--bind=") :] for a in sys.argv[1:] if a.startswith("--bind=")), None)
port, unit = int(args[0]), args[1]
host_ip = args[2] if len(args) > 2 else ""


def listening_sockets(port):
    """(inode, uid) of the TCP sockets listening on `port` (state 0A in /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                        found.add((cols[9], cols[7]))
        except OSError:
            continue
    return found


def cgroup_units(pid):
    """The last component of each of the process's control groups (its unit's name, for a unit's
    process); read from /proc, so that it also works where /sys/fs/cgroup is a namespaced view, as
    in a container. None when the process is gone."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return [line.rstrip("\n").rsplit("/", 1)[-1] for line in f]
    except OSError:
        return None


def unit_pids(unit):
    """The processes whose control group is the unit's."""
    return [pid for pid in os.listdir("/proc") if pid.isdigit() and unit in (cgroup_units(pid) or [])]


def socket_inodes(pid):
    """The inodes of the sockets the process has open, or None where its descriptors cannot be
    read (another user's process without CAP_SYS_PTRACE)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    links, readable = set(), False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        readable = True
        if link.startswith("socket:["):
            links.add(link[8:-1])
    return links if readable else None


def uid_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return line.split()[1]
    except OSError:
        pass
    return None


def holds(pid, sockets):
    """The process has one of the sockets open; where its descriptors cannot be read, the socket
    belongs to the process's user."""
    inodes = socket_inodes(pid)
    if inodes is not None:
        return any(inode in inodes for inode, _uid in sockets)
    uid = uid_of(pid)
    return uid is not None and any(u == uid for _inode, u in sockets)


def holder_text(sockets):
    """ " (pid N, unit U)" of a process holding one of the sockets, where its descriptors can be read."""
    wanted = {inode for inode, _uid in sockets}
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        if wanted & (socket_inodes(pid) or set()):
            named = [u for u in cgroup_units(pid) or [] if u.endswith(".service") or u.endswith(".scope")]
            return f" (pid {pid}, {named[0]})" if named else f" (pid {pid})"
    return ""


def not_local(e):
    """An address no interface has, one that is no address (a link-local one without its scope), a
    name that does not resolve: nothing on this host could bind it."""
    return isinstance(e, socket.gaierror) or e.errno in (errno.EADDRNOTAVAIL, errno.EINVAL)


if host_ip:
    probe = socket.socket(socket.AF_INET6 if ":" in host_ip else socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind((host_ip, 0))
    except OSError as e:
        if not_local(e):
            print("not local: " + (e.strerror or str(e)).lower())
            sys.exit(0)
    finally:
        probe.close()

if bind is None or bind in ("", "0.0.0.0"):
    family, addr = socket.AF_INET, ""
else:
    family, addr = (socket.AF_INET6 if ":" in bind else socket.AF_INET), bind
s = socket.socket(family, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
if family == socket.AF_INET6:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
try:
    s.bind((addr, port))
    print("free")
except OSError as e:
    sockets = listening_sockets(port)
    if not_local(e):
        print("not local: " + (e.strerror or str(e)).lower())
    elif e.errno == errno.EADDRINUSE and sockets and any(holds(p, sockets) for p in unit_pids(unit)):
        print("ours")
    else:
        print("in use: " + (e.strerror or str(e)).lower() + holder_text(sockets))
finally:
    s.close()
