"""Values found by value: a checksum any order of a tensor's elements shares, a fingerprint of a few elements,
and a store of values for exact look-ups."""

from __future__ import annotations

import functools
import hashlib
import sys
import warnings
from typing import TYPE_CHECKING, Generic, Hashable, TypeVar

if TYPE_CHECKING:
    import numpy as np

Key = TypeVar("Key", bound=Hashable)


def value_checksum(array: "np.ndarray") -> int:
    """The sum of the value's elements read as unsigned integers of their width (wrapping at 2**64).

    Exact (equal values have equal checksums) and order-free, so a matrix and its transpose share one and
    neither is copied to compute it; unequal values may share one too, so a match is then confirmed
    element by element.
    """
    import numpy as np

    data = np.ascontiguousarray(array)
    if data.dtype.hasobject or not data.size:
        return int(hashlib.sha1(data.tobytes()).hexdigest()[:15], 16)
    width = data.dtype.itemsize
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32}.get(width, np.uint64 if width % 8 == 0 else np.uint8)
    return int(data.reshape(-1).view(unsigned).sum(dtype=np.uint64))


_FINGERPRINT = 64
"""How many elements, spread over a value, its :func:`value_fingerprint` holds."""


@functools.lru_cache(maxsize=4096)
def _spread(shape: tuple[int, ...]) -> "tuple[np.ndarray, ...]":
    """Indices of :data:`_FINGERPRINT` elements spread evenly over a value of ``shape``."""
    import numpy as np

    size = int(np.prod(shape, dtype=np.int64))
    return np.unravel_index(np.linspace(0, size - 1, _FINGERPRINT, dtype=np.int64), shape)


def value_fingerprint(array: "np.ndarray") -> tuple:
    """A value's dtype, shape and the bytes of :data:`_FINGERPRINT` elements spread over it (all of a smaller
    value), in the order of its own axes.

    Equal values share it; unequal ones of one shape almost never do (the elements of random weights
    differ everywhere), so a look-up compares few values in full. It reads the same few elements of a
    value of any size and reads a transposed view where it lies, so a matrix stored transposed is found
    by looking up ``array.T`` without copying or summing either.
    """
    import numpy as np

    shape = tuple(array.shape)
    if array.dtype.hasobject:
        return array.dtype.str, shape, b""  # compared in full
    if array.size <= _FINGERPRINT:
        return array.dtype.str, shape, np.ascontiguousarray(array).tobytes()
    return array.dtype.str, shape, array[_spread(shape)].tobytes()


def _equal(a: "np.ndarray", b: "np.ndarray") -> bool:
    """Element for element. A large strided view (a transposed matrix) is first copied in order by torch
    where the process has loaded it (this layer never loads it): that is about three times as fast as numpy
    walking the view."""
    import numpy as np

    if a.shape != b.shape:
        return False
    torch = sys.modules.get("torch")
    if torch is not None and a.size > 4096 and not (a.flags.c_contiguous and b.flags.c_contiguous):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a read-only array: torch only reads it here
                a, b = (x if x.flags.c_contiguous else torch.from_numpy(x).contiguous().numpy() for x in (a, b))
        except (AttributeError, TypeError, ValueError, RuntimeError):  # a dtype torch lacks: numpy walks it
            pass
    return bool(np.array_equal(a, b))


class ExactValues(Generic[Key]):
    """Values filed for exact look-ups under their :func:`value_fingerprint`; a candidate found there is the
    same value only if every element is equal. A transposed view of a matrix finds the array it was taken
    from without being copied."""

    def __init__(self) -> None:
        self._buckets: dict[tuple, list[tuple[Key, "np.ndarray"]]] = {}

    def add(self, key: Key, value: "np.ndarray", fingerprint: tuple | None = None) -> None:
        """File ``value`` under ``key`` (``fingerprint``: its :func:`value_fingerprint`, where known)."""
        bucket = value_fingerprint(value) if fingerprint is None else fingerprint
        self._buckets.setdefault(bucket, []).append((key, value))

    def find(self, value: "np.ndarray", fingerprint: tuple | None = None) -> list[Key]:
        """Keys of the values equal to ``value`` element for element, in the order they were added."""
        candidates = self._buckets.get(value_fingerprint(value) if fingerprint is None else fingerprint, [])
        return [key for key, kept in candidates if _equal(kept, value)]

    def filed(self, value: "np.ndarray", fingerprint: tuple | None = None) -> int:
        """How many values share ``value``'s fingerprint (equal to it or not)."""
        return len(self._buckets.get(value_fingerprint(value) if fingerprint is None else fingerprint, []))
