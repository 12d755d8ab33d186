"""A checksum of a tensor's value that any order of its elements shares: a matrix and its transpose agree."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


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
