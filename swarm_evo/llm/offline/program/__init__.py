"""The offline model's answers for program-optimisation problems (CTX with a ``problem`` key).

Problems (circle packing, TSP, code optimisation, any folder loaded by
``swarm_evo.evaluation.problem``) give the model their initial program, organised in sections
``# [SECTION: NAME]`` (the preamble before the first marker holds imports and fixed
constants), and optional alleles: alternative section texts ``{locus: {name: text}}``, each
starting with ``# allele: <description>``. Section parameters are the UPPER_CASE assignments of
a number (``STEP_SIZE = 0.05``, ``N_ITERS = 200``; names of two or more characters).

Every handler is a pure function of the CTX and the call's ``random.Random(f"{seed}:{call_key}")``:

- ``draft``: the initial program, each locus with alleles swapped to a random allele with
  probability 1/2, then 1-3 parameters perturbed; combinations whose allele part of the
  approach tag appears in ``draft_history`` are avoided (up to 8 tries).
- ``mutate``: only the gene at ``target_locus`` changes: with probability 0.35 (or when it has no
  parameters) a different allele of that locus, else 1-2 of its parameters perturbed (ints
  ±1..3, ×2 or ÷2 keeping positive values ≥ 1 and non-negative ones ≥ 0; floats
  ×(1 ± U(0.05, 0.3)) with one more significant digit than the original, at least 2).
- ``merge``: the primary parent's preamble and genes, each locus of ``gene_plan`` replaced.
- faults: with probability ``fault_rate`` one realistic bug is planted in a changed locus
  (misspelled name → NameError, ``range(len(a) + 1)`` → IndexError, ``x = x[:-1]`` after an
  array assignment → shape error, a divisor parameter set to 0 → ZeroDivisionError).
- ``debug``: with probability ``repair_rate`` a rule read off the traceback repairs the program
  (closest identifier for a NameError, off-by-one ranges for an IndexError, a zero divisor
  restored to the baseline's value, self-slicing lines removed, loops halved on a timeout, the
  failing section restored from the initial program); otherwise an irrelevant edit.
- ``fix``: missing markers, stub required sections, syntax errors and a missing entry function
  are repaired with the initial program's sections.
- ``review``: ``submit_review`` arguments from ``evaluation`` (correct, error, combined_score).
- ``auxiliary_metrics``: an ``auxiliary_metrics.py`` (seed 002 dynamic auxiliary metrics) with
  mean/std/min/max/count of every array and the value of every scalar of the program output.

Modules:

- :mod:`.problem`: the CTX's problem dict, initial program, section order; rendering genes.
- :mod:`.alleles`: the allele table, allele descriptions and labels, the allele a gene is.
- :mod:`.params`: finding and perturbing UPPER_CASE numeric parameters; baseline values.
- :mod:`.tags`: approach tags and their allele part (the draft signature).
- :mod:`.source`: section line spans, identifiers, closest names (shared by faults and repairs).
- :mod:`.faults`: planting one bug (:func:`.faults.plant_fault`, ``fault_rate``).
- :mod:`.repairs`: traceback-driven repair rules (:func:`.repairs.repair`) and the irrelevant edit.
- :mod:`.operations`: the code handlers draft, mutate, merge, debug, fix, auxiliary_metrics (``PURPOSES``: those
  that are no search operation; the registry, :mod:`swarm_evo.operators`, names the others).
- :mod:`.review`: the ``submit_review`` arguments.
- :mod:`.aux_metrics`: the ``auxiliary_metrics`` code handler.

Code handlers return ``(plan, code)``; :mod:`..respond` formats them as code replies.
"""
