"""Finding equal tensors fast: values are compared up to the rounding two runtimes may differ by.

The absolute part of the tolerance shrinks with a tensor's own scale when that is below
one: with random weights, activations may fade to 1e-20 layer after layer, and a fixed
absolute tolerance would call every such tensor equal to every other of its shape. It never
shrinks below the smallest normal float (:func:`absolute_tolerance`): under it elements have
lost their digits, and runtimes flush them differently.

Rounding also grows with magnitude: where a tensor holds values in the thousands, an element
that sums large terms to nearly zero keeps the error of those terms (float32 keeps about seven
digits of the largest), far above the absolute tolerance. A few such elements (at most one in
:data:`CANCELLED_SHARE`) may differ by up to :data:`CANCELLED_RTOL` times the largest finite
magnitude of the two values. Counting them, not widening the tolerance for every element, keeps
sentinels out of it: a mask of -3.4e38 raises the bound of a few elements, not of all.

Every candidate is filed under its shape, element kind and count of non-finite
elements, and sorted by the sum of its absolute values; a look-up only compares the
candidates whose sum is within what the tolerance allows, so matching stays cheap
when a model has hundreds of tensors of one shape.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import TYPE_CHECKING, Generic, Hashable, Iterable, TypeVar

if TYPE_CHECKING:
    import numpy as np

RTOL = 1e-3
ATOL = 1e-4
SAMPLE = 64
CANCELLED_RTOL = 1e-5
"""How far, relative to the largest finite magnitude, an element that cancelled to near zero may differ."""
CANCELLED_SHARE = 64
"""At most one element in this many may differ that much (and none in a value of fewer elements)."""
PERMUTED_LIMIT = 32
"""The most candidates :meth:`ValueIndex.find_permuted` sorts for one look-up."""
TINY = 1.1754944e-38
"""The smallest normal float32: below it a value has lost its digits (subnormal) and tells nothing."""
Key = TypeVar("Key", bound=Hashable)
_Entry = tuple  # (sum of absolute values, keys of the values identical to this one, value, scale)


def _kind(array: "np.ndarray") -> str:
    return {"f": "f", "c": "f", "b": "b"}.get(array.dtype.kind, "i")


def _summary(array: "np.ndarray") -> tuple[tuple, float]:
    """(bucket, sort key) of a value: shape, kind and non-finite count; sum of absolute finite values."""
    bucket, total, _ = measure(array)
    return bucket, total


def extremes(array: "np.ndarray") -> "tuple[np.floating, np.floating] | None":
    """The smallest and the largest element of a float value, in its own type (None for other kinds and empty
    values): what :func:`informative` and :func:`measure` read, found once by a caller asking both."""
    import numpy as np

    if array.dtype.kind != "f" or not array.size:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        return array.min(), array.max()


def measure(array: "np.ndarray", ends: "tuple[np.floating, np.floating] | None" = None) -> tuple[tuple, float, float]:
    """A value's bucket and sort key (:func:`summary`) and its :func:`scale`, from one pass over its magnitudes.

    A transposed view measures as its array does with the shape reversed, so a caller looking a
    matrix up both ways measures it once. ``ends``: its :func:`extremes`, where the caller has them.
    """
    import numpy as np

    if array.dtype.kind in "fc":
        data = np.abs(array)
        if data.size:
            with np.errstate(invalid="ignore", over="ignore"):
                total = float(data.sum(dtype=np.float64))
                # a finite value's largest magnitude is that of its smallest or its largest element
                largest = max(-float(ends[0]), float(ends[1])) if ends is not None else float(data.max())
            if np.isfinite(total) and np.isfinite(largest):  # the common case: no NaN or infinity
                return (tuple(array.shape), "f", 0), total, min(1.0, largest)
        data = data.astype(np.float64, copy=False)
        finite = np.isfinite(data)
        bucket = (tuple(array.shape), "f", int(data.size - finite.sum()))
        kept = data[finite]
        return bucket, float(kept.sum()), float(min(1.0, kept.max())) if kept.size else 1.0
    return (tuple(array.shape), _kind(array), 0), float(np.abs(array.astype(np.float64)).sum()), 1.0


def transposed_measure(measured: tuple[tuple, float, float]) -> tuple[tuple, float, float]:
    """What :func:`measure` gives for ``array.T`` of a matrix measured as ``measured``."""
    (shape, kind, nonfinite), total, value_scale = measured
    return (tuple(reversed(shape)), kind, nonfinite), total, value_scale


def informative(array: "np.ndarray", own_scale: float | None = None,
                ends: "tuple[np.floating, np.floating] | None" = None) -> bool:
    """Whether a value says something about where it came from: not a scalar, not all one number.

    ``own_scale``: its :func:`scale`, where the caller knows it; ``ends``: its :func:`extremes`, likewise.
    """
    import numpy as np

    if not hasattr(array, "dtype") or array.size < 2 or array.dtype.kind not in "fiub":
        return False
    flat = array.reshape(-1)
    if array.dtype.kind == "f":
        if ends is None:
            ends = extremes(array)
        assert ends is not None
        low, high = float(ends[0]), float(ends[1])
        if own_scale is None and math.isfinite(low) and math.isfinite(high):
            own_scale = min(1.0, max(-low, high))  # what :func:`scale` gives, from the same two numbers
        if (scale(array) if own_scale is None else own_scale) < TINY:
            return False  # faded to zeros and subnormals
        if math.isfinite(low) and math.isfinite(high):
            return low != high  # finite extremes: all one number exactly where they are one
    return not bool(np.all(flat == flat[0]))


def one_number_within_tolerance(array: "np.ndarray", ends: "tuple[np.floating, np.floating] | None" = None) -> bool:
    """Whether every element of a float value lies within the tolerance of :func:`same_values` of one number (a
    sigmoid of faded values: 0.5 give or take a few units in the last place): it equals every value of its shape
    that is that number, so its elements tell no more than the number does. ``ends``: its :func:`extremes`."""
    if not hasattr(array, "dtype") or array.dtype.kind != "f" or array.size < 2:
        return False
    ends = ends if ends is not None else extremes(array)
    assert ends is not None
    low, high = float(ends[0]), float(ends[1])
    if not (math.isfinite(low) and math.isfinite(high)):
        return False
    return high - low <= absolute_tolerance(min(1.0, max(-low, high))) + RTOL * abs(low + high) / 2


def identical(a: "np.ndarray | None", b: "np.ndarray | None") -> bool:
    """The same shape, element type and elements."""
    import numpy as np

    return a is not None and b is not None and hasattr(a, "shape") and hasattr(b, "shape") \
        and a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


def faded(array: "np.ndarray", own_scale: float | None = None) -> bool:
    """Whether a float value has faded below float32's normal range (zeros and subnormals, as random weights
    may make activations layer after layer): runtimes flush such numbers differently, so its elements tell
    neither where it came from nor whether it equals another value of its shape."""
    return (hasattr(array, "dtype") and array.dtype.kind == "f" and array.size > 0
            and (scale(array) if own_scale is None else own_scale) < TINY)


def scale(array: "np.ndarray") -> float:
    """The largest finite magnitude of a float value, capped at one (1 for other kinds)."""
    import numpy as np

    if array.dtype.kind not in "fc" or array.size == 0:
        return 1.0
    with np.errstate(invalid="ignore", over="ignore"):
        if array.dtype.kind == "f":  # the common case: the extremes, without a copy of magnitudes
            largest = max(-float(array.min()), float(array.max()))
        else:
            largest = float(np.max(np.abs(array)))
        if np.isfinite(largest):
            return min(1.0, largest)
        data = np.abs(array.astype(np.float64, copy=False))
        finite = data[np.isfinite(data)]
    return float(min(1.0, finite.max())) if finite.size else 1.0


def same_values(
    a: "np.ndarray",
    b: "np.ndarray",
    scale_a: float | None = None,
    scale_b: float | None = None,
    sampled: bool = False,
) -> bool:
    """Equal up to the rounding two runtimes may differ by (NaN equals NaN, infinities must agree).

    ``scale_a`` and ``scale_b`` are the values' :func:`scale` where the caller knows them
    already; ``sampled``: the caller compared the two on :func:`_sample` already.
    """

    if not hasattr(a, "shape") or not hasattr(b, "shape") or a.shape != b.shape:
        return False
    atol = absolute_tolerance(max(scale(a) if scale_a is None else scale_a, scale(b) if scale_b is None else scale_b))
    if a.size >= 2 * SAMPLE and not sampled:  # most unequal pairs differ everywhere: reject them on a sample first
        sample_a = _sample(a)
        if not _close(sample_a, _sample(b), atol, _sample_allowance(sample_a.size, a.size)):
            return False
    return _close(a, b, atol, a.size // CANCELLED_SHARE)


def absolute_tolerance(value_scale: float) -> float:
    """How far two elements of values at most ``value_scale`` large (their :func:`scale`) may differ: :data:`ATOL`
    of that scale, and never less than :data:`TINY`. Below the smallest normal float an element has lost its
    digits: one runtime flushes to zero what another keeps as a subnormal, and a computation whose steps
    underflow there (the variance of a faded value) gives elements that differ by that much however large
    its result."""
    return max(ATOL * value_scale, TINY)


def _sample_allowance(samples: int, size: int) -> int:
    """How many of ``samples`` elements sampled from a value of ``size`` may be cancelled ones: twice the share
    expected at most (none where the value may hold none)."""
    return max(1, 2 * samples // CANCELLED_SHARE) if size >= CANCELLED_SHARE else 0


def _sample(array: "np.ndarray") -> "np.ndarray":
    """Evenly spaced elements of a value (at least ``SAMPLE`` of them when it has ``2 * SAMPLE``)."""
    step = max(1, array.size // SAMPLE)
    # a transposed view is sampled where it lies: reshaping it would copy all of it
    return array.reshape(-1)[::step] if array.flags.c_contiguous else array.flat[::step]


def _samples_close(
    samples: "np.ndarray", scales: "np.ndarray", sample: "np.ndarray", own_scale: float, size: int = 0
) -> "np.ndarray":
    """Which rows of ``samples`` (float64) are close to ``sample``, each with the tolerance :func:`same_values` uses."""
    import numpy as np

    query = sample.astype(np.float64)
    atol = np.maximum(ATOL * np.maximum(scales, own_scale), TINY)
    with np.errstate(invalid="ignore", over="ignore"):
        close = (samples == query) | (np.abs(query - samples) <= atol[:, None] + RTOL * np.abs(samples))
        close |= np.isnan(samples) & np.isnan(query)
    # a few sampled elements may be ones that cancelled (the whole comparison decides): see the module's note
    return close.sum(axis=1) >= samples.shape[1] - _sample_allowance(samples.shape[1], size)


def _close(a: "np.ndarray", b: "np.ndarray", atol: float, cancelled: int = 0) -> bool:
    """``allclose`` with ``atol``, except that up to ``cancelled`` elements may instead be within
    :data:`CANCELLED_RTOL` of the largest finite magnitude (see the module's note)."""
    import numpy as np

    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        if a.dtype == b.dtype and np.array_equal(a, b):  # a weight stored as it is: no copy in double precision
            return True
        with np.errstate(invalid="ignore", over="ignore"):
            if a.dtype == b.dtype == np.float32:  # allclose's rule in the values' own precision: no copies
                difference = np.subtract(a, b)  # |a - b| <= atol + RTOL * |b|, in two buffers instead of five
                np.abs(difference, out=difference)
                bound = np.abs(b)
                bound *= RTOL
                bound += atol
                outside = ~(difference <= bound)
                if not outside.any():
                    return True
                if bool(np.isfinite(a).all()) and bool(np.isfinite(b).all()):
                    # NaN and infinities aside, the rule said no, except for a few cancelled elements
                    return cancelled > 0 and _cancelled(a, b, outside, cancelled)
            return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=RTOL, atol=atol, equal_nan=True))
    return bool(np.array_equal(a, b))


def _cancelled(a: "np.ndarray", b: "np.ndarray", outside: "np.ndarray", cancelled: int) -> bool:
    """Whether the elements of two finite float32 values outside the tolerance are few (at most
    ``cancelled``) and each within :data:`CANCELLED_RTOL` of the largest magnitude of either value."""
    import numpy as np

    if int(np.count_nonzero(outside)) > cancelled:
        return False
    largest = max(float(np.abs(a).max()), float(np.abs(b).max()))
    return bool((np.abs(a[outside].astype(np.float64) - b[outside]) <= CANCELLED_RTOL * largest).all())


def _ends(array: "np.ndarray") -> tuple[float, float]:
    """The smallest and the largest element of a value."""
    return float(array.min()), float(array.max())


def _ends_close(a: tuple[float, float], b: tuple[float, float], value_scale: float) -> bool:
    """Whether two values' smallest and largest elements allow them to hold the same elements (loosely:
    a cheap test before sorting; NaN allows anything)."""
    import math

    largest = max(abs(a[0]), abs(a[1]), abs(b[0]), abs(b[1]))
    for x, y in zip(a, b):
        if math.isnan(x) or math.isnan(y):
            return True
        if x != y and abs(x - y) > 2 * (absolute_tolerance(value_scale) + RTOL * abs(y)) + CANCELLED_RTOL * largest:
            return False
    return True


def _window(size: int, total: float, own_scale: float) -> tuple[float, float]:
    """The sums of absolute values a value equal to one of ``size`` elements summing to ``total`` may have."""
    slack = size * absolute_tolerance(own_scale) * (1 + RTOL)
    return (total - slack) / (1 + RTOL) - 1e-9 * abs(total), (total + slack) / (1 - RTOL) + 1e-9 * abs(total)


def summary(array: "np.ndarray") -> tuple[tuple, float]:
    """What :func:`may_be_same` compares: shape, kind and non-finite count, and the sum of absolute values."""
    return _summary(array)


def may_be_same(a: tuple[tuple, float], scale_a: float, b: tuple[tuple, float]) -> bool:
    """Whether values with these summaries (from :func:`summary`) can be :func:`same_values` at all."""
    if a[0] != b[0]:
        return False
    size = 1
    for extent in a[0][0]:
        size *= extent
    low, high = _window(size, a[1], scale_a)
    return low <= b[1] <= high


class ValueIndex(Generic[Key]):
    """Values filed for equality look-ups; each value carries a key (a record index, a parameter name)."""

    def __init__(self) -> None:
        self._pending: dict[tuple, list[_Entry]] = defaultdict(list)
        self._sorted: dict[tuple, tuple[list[float], list[_Entry]]] = {}
        self._ordered: dict[tuple[tuple, int], list] = {}
        """For the values :meth:`find_permuted` looked at, by bucket and position: their smallest and largest
        elements, and their sorted copy once one was needed."""
        self._samples: dict[tuple, tuple["np.ndarray", "np.ndarray"] | None] = {}
        """Per float bucket of large values: every entry's sample (float64 rows) and scale, in sorted order."""

    def add(self, key: Key, value: "np.ndarray", measured: tuple[tuple, float, float] | None = None) -> None:
        """File ``value`` under ``key`` (``measured``: its :func:`measure`, where known)."""
        if not hasattr(value, "dtype") or value.dtype.kind not in "fciub":
            return
        bucket, total, value_scale = measured or measure(value)
        self._pending[bucket].append((total, key, value, value_scale))
        self._sorted.pop(bucket, None)
        if self._ordered:  # positions in the bucket move
            self._ordered = {k: v for k, v in self._ordered.items() if k[0] != bucket}

    def _bucket(self, bucket: tuple) -> tuple[list[float], list[_Entry]]:
        import numpy as np

        if bucket not in self._sorted:
            entries: list[_Entry] = []  # identical values (zero biases, one mask per layer) become one entry
            for total, key, value, value_scale in sorted(self._pending.get(bucket, []), key=lambda entry: entry[0]):
                position = len(entries) - 1
                while position >= 0 and entries[position][0] == total:  # identical values have identical sums
                    kept = entries[position][2]
                    if kept.dtype == value.dtype and np.array_equal(kept, value):
                        entries[position][1].append(key)
                        break
                    position -= 1
                else:
                    entries.append((total, [key], value, value_scale))
            self._sorted[bucket] = ([entry[0] for entry in entries], entries)
            large = entries and bucket[1] == "f" and entries[0][2].size >= 2 * SAMPLE
            self._samples[bucket] = (
                (np.stack([_sample(entry[2]).astype(np.float64) for entry in entries]),
                 np.array([entry[3] for entry in entries]))
                if large else None
            )
        return self._sorted[bucket]

    def of_shape(self, value: "np.ndarray", measured: tuple[tuple, float, float] | None = None) -> list[Key]:
        """Keys of every value of ``value``'s shape, element kind and count of non-finite elements, sorted."""
        if not hasattr(value, "dtype") or value.dtype.kind not in "fciub":
            return []
        bucket = (measured or measure(value))[0]
        return sorted({key for entry in self._bucket(bucket)[1] for key in entry[1]})

    def find_permuted(
        self, value: "np.ndarray", measured: tuple[tuple, float, float] | None = None, limit: int = PERMUTED_LIMIT
    ) -> list[Key]:
        """Keys of the values holding ``value``'s elements in another order (sorted, they are equal), sorted.

        An operation whose result order is unspecified (``topk(sorted=False)``) may order its result
        differently in each runtime, and every value computed from it row by row follows. The sum of
        absolute values ignores order, so only the candidates in its window are sorted, and none where
        more than ``limit`` are.
        """
        import numpy as np

        if not hasattr(value, "dtype") or value.dtype.kind not in "fciub" or value.size < 2:
            return []
        bucket, own_scale, entries, first, last = self._in_window(value, measured)
        if last == first or last - first > limit:
            return []
        ends = _ends(value)
        ordered = None
        found: set[Key] = set()
        for position in range(first, last):
            _, keys, candidate, candidate_scale = entries[position]
            known = self._ordered.setdefault((bucket, position), [_ends(candidate), None])
            if not _ends_close(ends, known[0], max(own_scale, candidate_scale)):
                continue  # the smallest or the largest element differs: nothing to sort
            if known[1] is None:  # each candidate sorted once
                known[1] = np.sort(candidate, axis=None)
            if ordered is None:
                ordered = np.sort(value, axis=None)
            if same_values(ordered, known[1], own_scale, candidate_scale):
                found.update(keys)
        return sorted(found)  # type: ignore[type-var]  # every key of one index is of one ordered kind

    def _in_window(
        self, value: "np.ndarray", measured: tuple[tuple, float, float] | None
    ) -> tuple[tuple, float, list[_Entry], int, int]:
        """``value``'s bucket, its scale, the bucket's entries and the positions (first, last) of those whose
        sum of absolute values an equal value may have."""
        bucket, total, own_scale = measured or measure(value)
        totals, entries = self._bucket(bucket)
        low, high = _window(value.size, total, own_scale)
        return bucket, own_scale, entries, bisect_left(totals, low), bisect_right(totals, high)

    def find(self, value: "np.ndarray", measured: tuple[tuple, float, float] | None = None) -> list[Key]:
        """Keys of the values equal to ``value``, sorted, each once; ``measured``: its :func:`measure`, if known."""
        if not hasattr(value, "dtype") or value.dtype.kind not in "fciub":
            return []
        bucket, own_scale, entries, first, last = self._in_window(value, measured)
        if not entries:
            return []
        positions: Iterable[int] = range(first, last)
        samples = self._samples.get(bucket)
        sampled = samples is not None and last > first
        if samples is not None and sampled:  # one vectorised look at every candidate's sample rejects most of them
            rows = _samples_close(
                samples[0][first:last], samples[1][first:last], _sample(value), own_scale, value.size
            )
            positions = (first + int(offset) for offset in rows.nonzero()[0])
        found: dict[Key, int] = {}
        for position in positions:
            _, keys, candidate, candidate_scale = entries[position]
            if any(key not in found for key in keys) and same_values(
                value, candidate, own_scale, candidate_scale, sampled=sampled
            ):
                for key in keys:
                    found.setdefault(key, position)
        return sorted(found)  # type: ignore[type-var]

