"""Hunts for the answers, for secrets and for services (issue 32). Prints one line
``PROBES=<json>``: probe name -> what it found or reached (empty lists: nothing).

Placeholders (tests/test_confinement.py): ``__MARK__`` (a marker every planted secret holds,
in its name or content), ``__TARGETS__`` (JSON list of host paths of the planted secrets and
the answers: the program "knows" where they are), ``__HOME__`` (the orchestrator's home),
``__DATA__`` (the host data directory), ``__PORTS__`` (JSON list of TCP ports listening on the
host's loopback: the stand-in model server, the Prefect API, every LISTEN socket of the host),
``__UNIX__`` (JSON list of the host's listening unix sockets: paths and ``@abstract`` names).
"""

import glob
import json
import os
import socket
import time

MARK = "__MARK__"
TARGETS = json.loads('__TARGETS__')
HOME = "__HOME__"
DATA = "__DATA__"
PORTS = json.loads('__PORTS__')
UNIX = json.loads('__UNIX__')
DEADLINE = time.monotonic() + 20
found = {name: [] for name in ("targets", "mountinfo", "input_dotdot", "walk_root", "usual_roots", "proc_cwd_root",
                               "home_dirs", "caches", "proc_environ")}


HERE = os.path.realpath(".")  # its own directory holds the marker (this program's source)


def leak(probe, path):
    """Record ``path`` when it can be read and holds (or is named with) the marker."""
    try:
        if os.path.realpath(path).startswith(HERE + "/") or os.path.realpath(path) == HERE:
            return
        if MARK in path:  # named with the marker: seeing it is enough
            if os.path.lexists(path):
                found[probe].append(path)
            return
        with open(path, "rb") as fh:
            if MARK.encode() in fh.read(1 << 20):
                found[probe].append(path)
    except OSError:
        pass


WALKED = {}  # (probe, device, inode) of a directory -> the most levels below it the probe has looked through


def walk(probe, top, depth=8):
    """Look at every name down to ``depth`` levels below ``top`` (never into /proc, /sys, /dev),
    skipping a directory an earlier walk of the same probe has looked through as deep (a probe's
    walks overlap: ``..``, ``../..`` and ``../../..`` of every mount point, the usual roots):
    each probe sees the same names, once, and spends the deadline on what it has not seen."""
    for d, dirs, files in os.walk(top):
        if time.monotonic() > DEADLINE:
            return
        left = depth - (d.count("/") - top.count("/"))
        if d.startswith(("/proc", "/sys", "/dev")) or left <= 0:
            dirs[:] = []
        else:
            try:
                st = os.stat(d)
            except OSError:
                continue
            if WALKED.get((probe, st.st_dev, st.st_ino), 0) >= left:
                dirs[:] = []
                continue
            WALKED[(probe, st.st_dev, st.st_ino)] = left
        for name in files + dirs:
            if MARK in name or name in ("test.csv", "token", "answers.csv"):
                leak(probe, os.path.join(d, name))


for path in TARGETS:
    leak("targets", path)
    leak("targets", os.path.dirname(path))  # a directory named with the marker
# the input mount, from mountinfo (its mount point and its root in the source file system)
try:
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        for m in (fields[3], fields[4]):
            for up in ("..", "../..", "../../.."):
                walk("mountinfo", os.path.normpath(os.path.join(m, up)), 4)
except OSError:
    pass
real_input = os.path.realpath("input")
for up in ("..", "../..", "../../.."):
    walk("input_dotdot", os.path.normpath(os.path.join(real_input, up)), 4)
walk("walk_root", "/")
for root in (DATA, "/work", "/data", "/home", "/root", "/tmp", "/mnt", "/srv", "/opt", "/var", "..", "../..", "../../.."):
    walk("usual_roots", root, 6)
for proc in glob.glob("/proc/[0-9]*"):
    if os.path.basename(proc) in (str(os.getpid()), "self"):
        continue
    for path in TARGETS:
        leak("proc_cwd_root", proc + "/root" + path)
    for kind in ("cwd", "root"):
        try:
            walk("proc_cwd_root", os.path.join(proc, kind) + "/", 3)
        except OSError:
            pass
    leak("proc_environ", proc + "/environ")
for home in [HOME, "/root", *glob.glob("/home/*")]:
    walk("home_dirs", home, 4)
    walk("caches", os.path.join(home, ".cache"), 4)
ports = set(PORTS)
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        for line in list(open(table))[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    except OSError:
        pass
reached = []
for port in sorted(ports):
    sock = socket.socket()
    sock.settimeout(0.5)
    try:
        sock.connect(("127.0.0.1", port))
        reached.append(port)
    except OSError:
        pass
    finally:
        sock.close()
found["ports"] = reached
# unix sockets: those listening on the host (path or @abstract; /var/run/docker.sock, say) and its own view
sockets = set(UNIX)
try:
    for line in list(open("/proc/net/unix"))[1:]:
        fields = line.split()
        if len(fields) >= 8 and int(fields[3], 16) & 0x10000:  # __SO_ACCEPTCON: listening
            sockets.add(fields[7])
except OSError:
    pass
found["unix_sockets"] = []
for name in sorted(sockets):
    for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
        sock = socket.socket(socket.AF_UNIX, kind)
        sock.settimeout(0.5)
        try:
            sock.connect("\0" + name[1:] if name.startswith("@") else name)
            found["unix_sockets"].append(name)
            break
        except OSError:
            pass
        finally:
            sock.close()
found["interfaces"] = [name for _, name in socket.if_nameindex()]
found = {k: sorted(set(v))[:5] if k not in ("ports", "unix_sockets") else v for k, v in found.items()}  # a sample of each
print("PROBES=" + json.dumps(found), flush=True)
print("Validation metric: 0.5")
