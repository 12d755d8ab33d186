"""Finding equal tensors fast: values are compared up to the rounding two runtimes may differ by.

The absolute part of the tolerance shrinks with a tensor's own scale when that is below
one: with random weights, activations may fade to 1e-20 layer after layer, and a fixed
absolute tolerance would call every such tensor equal to every other of its shape.

Every candidate is filed under its shape, element kind and count of non-finite
elements, and sorted by the sum of its absolute values; a look-up only compares the
candidates whose sum is within what the tolerance allows, so matching stays cheap
when a model has hundreds of tensors of one shape.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import TYPE_CHECKING, Generic, Hashable, TypeVar

if TYPE_CHECKING:
    import numpy as np

RTOL = 1e-3
ATOL = 1e-4
SAMPLE = 64
TINY = 1.1754944e-38
"""The smallest normal float32: below it a value has lost its digits (subnormal) and tells nothing."""
Key = TypeVar("Key", bound=Hashable)


def _kind(array: "np.ndarray") -> str:
    return {"f": "f", "c": "f", "b": "b"}.get(array.dtype.kind, "i")


def _summary(array: "np.ndarray") -> tuple[tuple, float]:
    """(bucket, sort key) of a value: shape, kind and non-finite count; sum of absolute finite values."""
    import numpy as np

    if array.dtype.kind in "fc":
        data = np.abs(array.astype(np.float64, copy=False))
        finite = np.isfinite(data)
        bucket = (tuple(array.shape), "f", int(data.size - finite.sum()))
        return bucket, float(data[finite].sum())
    return (tuple(array.shape), _kind(array), 0), float(np.abs(array.astype(np.float64)).sum())


def informative(array: "np.ndarray") -> bool:
    """Whether a value says something about where it came from: not a scalar, not all one number."""
    import numpy as np

    if not hasattr(array, "dtype") or array.size < 2 or array.dtype.kind not in "fiub":
        return False
    flat = array.reshape(-1)
    if array.dtype.kind == "f" and scale(array) < TINY:
        return False  # faded to zeros and subnormals
    return not bool(np.all(flat == flat[0]))


def scale(array: "np.ndarray") -> float:
    """The largest finite magnitude of a float value, capped at one (1 for other kinds)."""
    import numpy as np

    if array.dtype.kind not in "fc" or array.size == 0:
        return 1.0
    with np.errstate(invalid="ignore", over="ignore"):
        data = np.abs(array.astype(np.float64, copy=False))
        finite = data[np.isfinite(data)]
    return float(min(1.0, finite.max())) if finite.size else 1.0


def same_values(a: "np.ndarray", b: "np.ndarray") -> bool:
    """Equal up to the rounding two runtimes may differ by (NaN equals NaN, infinities must agree)."""

    if not hasattr(a, "shape") or not hasattr(b, "shape") or a.shape != b.shape:
        return False
    atol = ATOL * max(scale(a), scale(b), TINY)
    if a.size >= 2 * SAMPLE:  # most unequal pairs differ everywhere: reject them on a sample first
        step = a.size // SAMPLE
        if not _close(a.reshape(-1)[::step], b.reshape(-1)[::step], atol):
            return False
    return _close(a, b, atol)


def _close(a: "np.ndarray", b: "np.ndarray", atol: float) -> bool:
    import numpy as np

    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        with np.errstate(invalid="ignore", over="ignore"):
            return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=RTOL, atol=atol, equal_nan=True))
    return bool(np.array_equal(a, b))


class ValueIndex(Generic[Key]):
    """Values filed for equality look-ups; each value carries a key (a record index, a parameter name)."""

    def __init__(self) -> None:
        self._pending: dict[tuple, list[tuple[float, Key, "np.ndarray"]]] = defaultdict(list)
        self._sorted: dict[tuple, tuple[list[float], list[tuple[float, Key, "np.ndarray"]]]] = {}

    def add(self, key: Key, value: "np.ndarray") -> None:
        if not hasattr(value, "dtype") or value.dtype.kind not in "fciub":
            return
        bucket, total = _summary(value)
        self._pending[bucket].append((total, key, value))
        self._sorted.pop(bucket, None)

    def _bucket(self, bucket: tuple) -> tuple[list[float], list[tuple[float, Key, "np.ndarray"]]]:
        if bucket not in self._sorted:
            entries = sorted(self._pending.get(bucket, []), key=lambda entry: entry[0])
            self._sorted[bucket] = ([entry[0] for entry in entries], entries)
        return self._sorted[bucket]

    def find(self, value: "np.ndarray") -> list[Key]:
        """Keys of the values equal to ``value``, sorted, each once."""
        if not hasattr(value, "dtype") or value.dtype.kind not in "fciub":
            return []
        bucket, total = _summary(value)
        totals, entries = self._bucket(bucket)
        if not entries:
            return []
        slack = value.size * ATOL * max(scale(value), TINY) * (1 + RTOL)
        low = (total - slack) / (1 + RTOL) - 1e-9 * abs(total)
        high = (total + slack) / (1 - RTOL) + 1e-9 * abs(total)
        found: dict[Key, int] = {}
        for position in range(bisect_left(totals, low), bisect_right(totals, high)):
            _, key, candidate = entries[position]
            if key not in found and same_values(value, candidate):
                found[key] = position
        return sorted(found)
