"""Tagged JSON for values that cross the sandbox boundary (seed 002; SPEC §11).

Candidate programs are untrusted: their return values come back to the host as JSON, never
as pickles (unpickling runs arbitrary code). This module maps the values programs exchange
with evaluators to JSON-able structures and back:

=========================  =====================================================
value                      encoded form
=========================  =====================================================
None, bool, int, str       itself
float                      itself; NaN and ±inf allowed (``json`` writes NaN/Infinity)
numpy scalar               the Python number (``np.float32(1.5)`` -> ``1.5``)
list, tuple                a list of encoded items (tuples come back as lists)
dict with str keys         a dict of encoded values (``{"__dict__": {...}}`` when a key
                           collides with a tag below)
numpy.ndarray              ``{"__ndarray__": nested list, "dtype": "float64", "shape": [..]}``
                           (dtype kinds b, i, u, f, U only)
=========================  =====================================================

Anything else (sets, objects, complex numbers, object arrays, non-str dict keys) raises
:class:`TypeError` naming the type and where it was found (``output[0]['radii']``).

The file is self-contained on purpose (standard library plus an optional numpy): its source
text is embedded verbatim in the harness programs (``swarm_evo.evaluation.harness``,
``swarm_evo.evaluation.auxiliary``) that run inside the sandbox, where swarm_evo is not
installed. Keep it free of imports from swarm_evo.
"""

import math
from typing import Any

try:  # numpy is optional in the sandbox: a program that never uses it still round-trips
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency of swarm_evo
    _np = None

NDARRAY_TAG = "__ndarray__"
DICT_TAG = "__dict__"
_TAGS = (NDARRAY_TAG, DICT_TAG)
_ARRAY_KINDS = "biufU"
MAX_DEPTH = 200
"""Deepest nesting encode/decode accept (deeper values raise instead of overflowing the stack)."""


def encode(value: Any, where: str = "value", _depth: int = 0) -> Any:
    """Encode ``value`` as a JSON-able structure (see the module table).

    Args:
        value: the value to encode.
        where: how to name ``value`` in error messages (``"output[0]"``).

    Raises:
        TypeError: a part of ``value`` has an unsupported type; the message names the type
            and its location, e.g. ``cannot encode value of type 'set' at output[0]['x']``.
    """
    if _depth > MAX_DEPTH:
        raise TypeError(f"cannot encode value nested deeper than {MAX_DEPTH} levels at {where}")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return float(value)
    if _np is not None:
        if isinstance(value, _np.ndarray):
            return _encode_array(value, where)
        if isinstance(value, _np.generic):
            if value.dtype.kind not in "biuf":
                raise TypeError(f"cannot encode numpy scalar of dtype {value.dtype} at {where}")
            return value.item()
    if isinstance(value, (list, tuple)):
        return [encode(item, f"{where}[{i}]", _depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"cannot encode dict key of type {type(key).__name__!r} at {where} (keys must be str)"
                )
            out[key] = encode(item, f"{where}[{key!r}]", _depth + 1)
        if any(tag in out for tag in _TAGS):
            return {DICT_TAG: out}
        return out
    raise TypeError(f"cannot encode value of type {type(value).__name__!r} at {where}")


def _encode_array(array: Any, where: str) -> dict:
    if array.dtype.kind not in _ARRAY_KINDS:
        raise TypeError(f"cannot encode numpy array of dtype {array.dtype} at {where}")
    return {NDARRAY_TAG: array.tolist(), "dtype": array.dtype.str, "shape": list(array.shape)}


def decode(obj: Any, _depth: int = 0) -> Any:
    """Inverse of :func:`encode`: restore numpy arrays (dtype and shape) and tagged dicts.

    ``obj`` is what ``json.loads`` returned for an encoded value. Untagged JSON decodes to
    itself, so plain JSON files can be read with this function too.

    Raises:
        ValueError: a malformed tag (unknown dtype kind, data that does not fit the shape,
            numpy missing for an array, nesting deeper than :data:`MAX_DEPTH`).
    """
    if _depth > MAX_DEPTH:
        raise ValueError(f"encoded value nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, list):
        return [decode(item, _depth + 1) for item in obj]
    if isinstance(obj, dict):
        if NDARRAY_TAG in obj:
            return _decode_array(obj)
        if DICT_TAG in obj and len(obj) == 1 and isinstance(obj[DICT_TAG], dict):
            return {key: decode(item, _depth + 1) for key, item in obj[DICT_TAG].items()}
        return {key: decode(item, _depth + 1) for key, item in obj.items()}
    return obj


def _decode_array(obj: dict) -> Any:
    if _np is None:  # pragma: no cover - numpy is a dependency
        raise ValueError("cannot decode a numpy array: numpy is not installed")
    try:
        dtype = _np.dtype(str(obj.get("dtype", "float64")))
    except TypeError as exc:
        raise ValueError(f"bad array dtype {obj.get('dtype')!r}: {exc}") from None
    if dtype.kind not in _ARRAY_KINDS:
        raise ValueError(f"array dtype {dtype} is not allowed (kinds {_ARRAY_KINDS} only)")
    try:
        array = _np.array(obj[NDARRAY_TAG], dtype=dtype)
        if "shape" in obj:
            array = array.reshape([int(n) for n in obj["shape"]])
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"malformed encoded array: {exc}") from None
    return array


def is_finite_number(value: Any) -> bool:
    """True for a real, finite number that is not a bool (Python or numpy scalar)."""
    if isinstance(value, bool) or (_np is not None and isinstance(value, _np.bool_)):
        return False
    if isinstance(value, (int, float)) or (_np is not None and isinstance(value, (_np.integer, _np.floating))):
        try:
            return math.isfinite(float(value))
        except OverflowError:  # an int too large for a float
            return False
    return False
