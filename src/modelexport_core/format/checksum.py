"""A checksum of a tensor's value that any order of its elements shares: a matrix and its transpose agree."""

from __future__ import annotations

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


_PROBES = 16
"""How many elements, spread over a value, are compared before all of them: a value of the same checksum
that is not equal (a permutation of it, a matrix against its transpose) mostly differs there already, and
comparing a transposed view in full is slow."""


def _probe(shape: tuple[int, ...]) -> "tuple[np.ndarray, ...] | None":
    """Indices of :data:`_PROBES` elements spread over a value of ``shape`` (None for small values)."""
    import numpy as np

    size = int(np.prod(shape, dtype=np.int64))
    if size <= 4 * _PROBES:
        return None
    return np.unravel_index(np.linspace(0, size - 1, _PROBES, dtype=np.int64), shape)


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
    """Values filed for exact look-ups under dtype, shape and :func:`value_checksum`; a candidate found there
    is the same value only if every element is equal. A transposed view of a matrix finds the array it was
    taken from without being copied (its checksum is the array's)."""

    def __init__(self) -> None:
        self._buckets: dict[tuple, list[tuple[Key, "np.ndarray"]]] = {}

    @staticmethod
    def _bucket(value: "np.ndarray", checksum: int | None) -> tuple:
        return value.dtype.str, tuple(value.shape), value_checksum(value) if checksum is None else checksum

    def add(self, key: Key, value: "np.ndarray", checksum: int | None = None) -> None:
        self._buckets.setdefault(self._bucket(value, checksum), []).append((key, value))

    def find(self, value: "np.ndarray", checksum: int | None = None) -> list[Key]:
        """Keys of the values equal to ``value`` element for element, in the order they were added."""
        import numpy as np

        candidates = self._buckets.get(self._bucket(value, checksum), [])
        if not candidates:
            return []
        probe = _probe(value.shape)
        probed = value[probe] if probe is not None else None  # a few elements, a transposed view not copied
        return [key for key, kept in candidates
                if (probed is None or np.array_equal(kept[probe], probed)) and _equal(kept, value)]

    def filed(self, value: "np.ndarray", checksum: int | None = None) -> int:
        """How many values share ``value``'s dtype, shape and checksum (equal to it or not)."""
        return len(self._buckets.get(self._bucket(value, checksum), []))
