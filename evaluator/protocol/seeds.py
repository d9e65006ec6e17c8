"""The frozen reset seeds of a campaign plan: one cell per (task, seed).

Repeating every task over several seeds is what makes an aggregate an estimate; the seeds are
fixed in the plan before anything runs, and the protocol identity does not depend on how many
there are. A plan names them as a list, or as N consecutive seeds from a base seed.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ProtocolError
from .numbers import whole_number

SEED_LIMIT = 2**32
MAX_SEEDS = 1_000  # per task
MAX_CELLS = 10_000  # per campaign


class InvalidSeeds(ProtocolError):
    pass


def check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise InvalidSeeds(f"a reset seed is a whole number in [0, 2**32), got {seed!r}"[:120])
    return seed


def consecutive_seeds(base: int, count: int) -> tuple[int, ...]:
    """`count` seeds from `base`: base, base+1, ..."""
    check_seed(base)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SEEDS:
        raise InvalidSeeds(f"the number of seeds per task is a whole number in [1, {MAX_SEEDS}], got {count!r}")
    if base + count > SEED_LIMIT:
        raise InvalidSeeds(f"{count} seeds from {base} pass 2**32 - 1")
    return tuple(range(base, base + count))


def parse_seed_list(text: str) -> tuple[int, ...]:
    """Seeds written as "3, 7, 11" (commas or spaces)."""
    words = text.replace(",", " ").split()
    if not words:
        raise InvalidSeeds("the seed list is empty")
    if len(words) > MAX_SEEDS:
        raise InvalidSeeds(f"at most {MAX_SEEDS} seeds per task, got {len(words)}")
    seeds = []
    for word in words:
        seed = whole_number(word, most_digits=10)
        if seed is None:
            raise InvalidSeeds(f"a reset seed is a whole number in [0, 2**32), got {word[:30]!r}")
        seeds.append(check_seed(seed))
    return check_seeds(seeds)


def check_seeds(seeds: Iterable[object]) -> tuple[int, ...]:
    """A plan's seeds: at least one, each valid, none twice (a repeat would count one episode twice)."""
    seeds = tuple(check_seed(s) for s in seeds)
    if not seeds:
        raise InvalidSeeds("select at least one reset seed")
    if len(seeds) > MAX_SEEDS:
        raise InvalidSeeds(f"at most {MAX_SEEDS} seeds per task, got {len(seeds)}")
    seen: set[int] = set()
    for seed in seeds:
        if seed in seen:
            raise InvalidSeeds(f"seed {seed} is listed twice: each (task, seed) cell runs once")
        seen.add(seed)
    return seeds


def check_cell_count(tasks: int, seeds: int) -> int:
    cells = tasks * seeds
    if cells > MAX_CELLS:
        raise InvalidSeeds(f"{tasks} tasks x {seeds} seeds = {cells} cells; a campaign holds at most {MAX_CELLS}")
    return cells
