"""The ``auxiliary_metrics`` reply: an ``auxiliary_metrics.py`` (seed 002 dynamic auxiliary metrics).

Mean/std/min/max/count of every array and the value of every numeric scalar of the program
output described by the CTX's ``sample_output``.
"""

from __future__ import annotations

import random
import re

from .problem import problem_of


def _metric_key(key: str) -> str:
    k = re.sub(r"\W+", "_", str(key)).strip("_") or "output"
    return k if not k[0].isdigit() else "k_" + k


def _kind(desc) -> str | None:
    """"array", "scalar" or None (skipped) for one sample_output description entry."""
    if isinstance(desc, dict) and ("type" in desc or "shape" in desc):
        typ = str(desc.get("type") or "").lower()
        shape = desc.get("shape")
        dtype = str(desc.get("dtype") or "").lower()
        if any(w in dtype for w in ("str", "unicode", "object", "<u", "bytes")) or typ in ("str", "string", "dict", "none", "nonetype"):
            return None
        if isinstance(shape, (list, tuple)) and len(shape) >= 1:
            return "array"
        if typ in ("ndarray", "array", "list", "tuple"):
            return "array" if shape != [] and shape != () else "scalar"
        if typ in ("int", "float", "bool", "number", "scalar", "integer") or any(
                w in typ for w in ("int", "float")) or shape in ([], ()):
            return "scalar"
        return None
    if isinstance(desc, (list, tuple)):
        return "array"
    if isinstance(desc, (int, float)) and not isinstance(desc, bool):
        return "scalar"
    return None


def auxiliary_metrics(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """An ``auxiliary_metrics.py`` for the described program output (``sample_output``).

    For every array key: ``<key>_mean``, ``<key>_std``, ``<key>_min``, ``<key>_max`` over its
    finite values and ``<key>_count`` (length of the first axis); for every numeric scalar:
    ``<key>`` itself. Missing keys and non-numeric values are skipped; the function never raises.
    """
    sample = ctx.get("sample_output")
    if not isinstance(sample, dict):
        sample = {"output": sample} if sample is not None else {}
    arrays, scalars = [], []
    for key in sample:
        kind = _kind(sample[key])
        (arrays if kind == "array" else scalars if kind == "scalar" else []).append(str(key))
    p = problem_of(ctx)
    name = p.get("name") or "the problem"
    defs: dict[str, dict] = {}
    for key in arrays:
        mk = _metric_key(key)
        for stat, what in (("mean", "mean"), ("std", "standard deviation"), ("min", "minimum"),
                           ("max", "maximum")):
            defs[f"{mk}_{stat}"] = {"name": f"{mk}_{stat}", "description": f"{what} of the values of '{key}'",
                                    "interpretation": "neutral", "unit": "", "formula": f"{stat}({key})"}
        defs[f"{mk}_count"] = {"name": f"{mk}_count", "description": f"length of the first axis of '{key}'",
                               "interpretation": "neutral", "unit": "", "formula": f"len({key})"}
    for key in scalars:
        mk = _metric_key(key)
        defs[mk] = {"name": mk, "description": f"the scalar '{key}' reported in the program output",
                    "interpretation": "neutral", "unit": "", "formula": key}
    body = [
        f'"""Auxiliary metrics for {name} (written by the offline model, seed 002 dynamic metrics).',
        "",
        "Summary statistics of every array of the program output (mean, std, min, max, count) and",
        "the value of every numeric scalar. Missing keys and non-numeric values are skipped; the",
        "function never raises.",
        '"""',
        "",
        "import math",
        "",
        "import numpy as np",
        "",
        f"ARRAY_KEYS = {arrays!r}",
        f"SCALAR_KEYS = {scalars!r}",
        f"METRIC_NAMES = {({k: _metric_key(k) for k in arrays + scalars})!r}",
        "",
        "METRIC_DEFINITIONS = " + _pretty_dict(defs),
        "",
        "",
        "def _finite_values(value):",
        "    arr = np.asarray(value, dtype=float)",
        "    flat = arr.ravel()",
        "    return arr, flat[np.isfinite(flat)]",
        "",
        "",
        "def evaluate_auxiliary_metrics(program_output):",
        '    """Metrics {name: float} of one program output (a dict of arrays/scalars or a bare value)."""',
        "    metrics = {}",
        "    data = program_output if isinstance(program_output, dict) else {\"output\": program_output}",
        "    for key in ARRAY_KEYS:",
        "        try:",
        "            if key not in data or data[key] is None:",
        "                continue",
        "            arr, vals = _finite_values(data[key])",
        "            name = METRIC_NAMES[key]",
        "            if arr.ndim >= 1:",
        "                metrics[name + \"_count\"] = float(arr.shape[0])",
        "            if vals.size == 0:",
        "                continue",
        "            metrics[name + \"_mean\"] = float(vals.mean())",
        "            metrics[name + \"_std\"] = float(vals.std())",
        "            metrics[name + \"_min\"] = float(vals.min())",
        "            metrics[name + \"_max\"] = float(vals.max())",
        "        except Exception:",
        "            continue",
        "    for key in SCALAR_KEYS:",
        "        try:",
        "            if key not in data or data[key] is None:",
        "                continue",
        "            arr, vals = _finite_values(data[key])",
        "            if vals.size >= 1:",
        "                metrics[METRIC_NAMES[key]] = float(vals[0])",
        "        except Exception:",
        "            continue",
        "    return {k: v for k, v in metrics.items() if math.isfinite(v)}",
    ]
    code = "\n".join(body) + "\n"
    plan = (f"Auxiliary metrics for {name}: "
            + (f"mean/std/min/max/count of {', '.join(arrays)}" if arrays else "no array outputs")
            + (f"; the values of {', '.join(scalars)}" if scalars else "")
            + ". The file is auxiliary_metrics.py with evaluate_auxiliary_metrics(program_output) and "
              "METRIC_DEFINITIONS; missing keys are skipped.")
    return plan, code


def _pretty_dict(defs: dict[str, dict]) -> str:
    if not defs:
        return "{}"
    lines = ["{"]
    for k, v in defs.items():
        lines.append(f"    {k!r}: {v!r},")
    lines.append("}")
    return "\n".join(lines)
