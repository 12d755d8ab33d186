"""Minimum-cost assignment of rows to columns (the Hungarian method), for sharing equal tensors out."""

from __future__ import annotations

from typing import Callable


def min_cost_assignment(rows: int, columns: int, cost: Callable[[int, int], float]) -> list[int]:
    """The column of each row in a minimum-cost assignment (Hungarian method; rows <= columns)."""
    inf = float("inf")
    u = [0.0] * (rows + 1)
    v = [0.0] * (columns + 1)
    match = [0] * (columns + 1)  # match[column] = row (1-based), 0 = free
    way = [0] * (columns + 1)
    for row in range(1, rows + 1):
        match[0] = row
        column = 0
        least = [inf] * (columns + 1)
        used = [False] * (columns + 1)
        while True:
            used[column] = True
            current_row = match[column]
            delta, next_column = inf, 0
            for c in range(1, columns + 1):
                if used[c]:
                    continue
                reduced = cost(current_row - 1, c - 1) - u[current_row] - v[c]
                if reduced < least[c]:
                    least[c] = reduced
                    way[c] = column
                if least[c] < delta:
                    delta, next_column = least[c], c
            for c in range(columns + 1):
                if used[c]:
                    u[match[c]] += delta
                    v[c] -= delta
                else:
                    least[c] -= delta
            column = next_column
            if match[column] == 0:
                break
        while column:
            previous = way[column]
            match[column] = match[previous]
            column = previous
    result = [0] * rows
    for c in range(1, columns + 1):
        if match[c]:
            result[match[c] - 1] = c - 1
    return result
