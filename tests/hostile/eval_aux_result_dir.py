"""Auxiliary metrics file: a directory named ``aux_result.json``."""

import os


def evaluate_auxiliary_metrics(program_output):
    os.mkdir("aux_result.json")
    os._exit(0)
