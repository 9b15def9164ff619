"""Built-in evaluation problems (issue 5): circle packing, TSP (berlin52) and count-primes.

Each sub-folder is a problem folder read by :func:`swarm_evo.evaluation.problem.load_problem`:
``problem.yaml``, ``description.md``, ``initial.py``, ``evaluate.py``,
``auxiliary_metrics.py`` and ``alleles/<LOCUS>/<name>.py``. The folders are data, not Python
packages: ``evaluate.py`` is imported by path and every other ``.py`` file runs in the sandbox.
"""
