"""Children that outlive the program: a double-forked setsid daemon and a
start_new_session child, both writing heartbeats, then the program fails and leaves."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

import subprocess
import time

BEAT = ("import sys, time\n"
        "while True:\n"
        "    with open(sys.argv[1], 'a') as fh: fh.write('beat\\n')\n"
        "    time.sleep(0.05)\n")
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    os.execv(sys.executable, [sys.executable, "-c", BEAT, "working/heartbeat.txt", MARK])
os.waitpid(pid, 0)
subprocess.Popen([sys.executable, "-c", BEAT, "working/heartbeat2.txt", MARK], start_new_session=True)
time.sleep(0.5)
print("daemons are beating", flush=True)
raise RuntimeError("leaving my daemons behind")
