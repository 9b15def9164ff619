"""Auxiliary metrics file: leaves a FIFO where its harness writes ``aux_result.json``."""

import os


def evaluate_auxiliary_metrics(program_output):
    os.mkfifo("aux_result.json")
    os._exit(0)
