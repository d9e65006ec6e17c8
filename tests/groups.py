"""The groups of the suite (issue 55, point 5), applied as markers from what each test uses: the fixtures it requests
(all of them, through the fixtures they request) and the names its code calls, followed through the tests' own
functions, fixtures and helpers. `make test-quick` runs the tests of no group: Django and the database in this
process, nothing started beside it. `pytest -m site` (or any group) runs one group.

A group is named by what makes its tests slow or needy: a test in none of them must not start a server, a browser, a
simulator or an episode. A new test that uses one of the names below joins its group without being told."""

from __future__ import annotations

import inspect
import types

# group -> the fixtures, and the names in a test's code, that put a test in it
GROUPS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "browser": (frozenset({"browser"}), frozenset()),
    "cluster": (frozenset({"cluster", "postgres_url", "run_redis"}), frozenset({"postgres_server", "redis_server"})),
    "site": (
        frozenset({"rsi"}),
        frozenset({"daphne_site", "DaphneServer", "set_up_site", "manage", "Session", "make_token"}),
    ),
    "process": (frozenset(), frozenset({"subprocess", "Popen"})),
    "native": (
        frozenset({"run_cell", "run_spec", "simple_double", "double_upstream", "stock_server", "simpler_env_host"}),
        frozenset(
            {
                "do_run_attempt",
                "NativeWorker",
                "TorchScriptPolicy",
                "LeRobotPolicy",
                "fresh_worker",
                "run_attempt",
                "do_start_attempts",
                "start_attempts",
                "evaluate",
                "run_evaluate",
            }
        ),
    ),
}
# Parts of tests/parts.py whose tests are a group of their own.
PART_GROUPS = ("lerobot", "sapien", "openpi", "root", "tracking")
MARKERS = (*GROUPS, *PART_GROUPS, "slow")


def _names(function, module_globals: dict, seen: set) -> set[str]:
    """The global names `function`'s code uses, and those of the tests' own functions it uses, transitively."""
    code = getattr(function, "__code__", None)
    if code is None or code in seen:
        return set()
    seen.add(code)
    names: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(const for const in current.co_consts if isinstance(const, types.CodeType))
    for name in list(names):
        found = getattr(function, "__globals__", module_globals).get(name)
        if inspect.isfunction(found) and found.__module__.startswith("tests"):
            names |= _names(found, found.__globals__, seen)
        elif inspect.isclass(found) and found.__module__.startswith("tests"):
            for member in vars(found).values():
                if inspect.isfunction(member):
                    names |= _names(member, member.__globals__, seen)
    return names


def groups_of(item) -> set[str]:
    """The groups a collected test belongs to."""
    fixtures = set(item.fixturenames)
    seen: set = set()
    names = _names(item.function, item.module.__dict__, seen)
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        for definition in definitions:
            names |= _names(definition.func, getattr(definition.func, "__globals__", {}), seen)
    found = {group for group, (by_fixture, by_name) in GROUPS.items() if fixtures & by_fixture or names & by_name}
    for mark in item.iter_markers("needs"):
        found |= {part for part in mark.args if part in PART_GROUPS}
    return found
