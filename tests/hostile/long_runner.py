"""Runs while its run process is SIGKILLed: a setsid daemon beats into working/heartbeat.txt
and the program itself sleeps for an hour."""

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
subprocess.Popen([sys.executable, "-c", BEAT, "working/heartbeat.txt", MARK], start_new_session=True)
time.sleep(3600)
