"""Stand-ins for the packages SIMPLE imports but a CPU host cannot install: cuRobo (a CUDA-compiled fork:
SIMPLE's robots import its names at module load, robots/mixin.py:20-29) and unitree_sdk2py (cyclonedds:
the Teleop env and gear_sonic's bridge import it, envs/sonic_loco_manip.py:18). Loaded by Python at start
when this folder is on PYTHONPATH (environment/simple/cpu_run.py puts it there); used by nothing of RSI's.

Any module under those packages imports, and any public name in it is a class; constructing or calling
one raises RuntimeError naming it. So SIMPLE's imports succeed and any real use of either package fails
loudly: the SONIC path through MuJoCo uses neither (upstream_simple_facts.md §8).
"""

import importlib.abc
import importlib.machinery
import sys
import types

STANDING_IN = ("curobo", "unitree_sdk2py")


class _StandInMeta(type):
    def __call__(cls, *args, **kwargs):
        raise RuntimeError(f"{cls.__module__}.{cls.__qualname__} is a stand-in on this host (environment/simple)")


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        stand_in = _StandInMeta(name, (), {"__module__": self.__name__, "__qualname__": name})
        setattr(self, name, stand_in)
        return stand_in


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in STANDING_IN:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        print(f"stand-in module {module.__name__} (environment/simple/standins)", file=sys.stderr)


sys.meta_path.insert(0, _StandInFinder())
