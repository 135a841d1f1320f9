"""eventsim: predict how fast a transformer trains on many GPUs under a hybrid parallel strategy.

The eventsim CLI's commands, run in process (the same flags, defaults, checks and messages),
with typed results (eventsim.results; docs/PYTHON.md):

    import eventsim
    r = eventsim.simulate(model="gpt3-175b", cluster="dgx-a100", strategy="8M8P16D",
                          micro_batch=1, global_batch=1536)
    r.iteration_time_ms, r.mfu, r["stages"][0]

Keywords are the command's long flags with '_' for '-' (tp=8, sequence_parallel=True,
micro_batch=[1, 2]). Bad input raises ValueError with the CLI's one-line message; an unknown
keyword raises TypeError.
"""

from __future__ import annotations

import builtins
from typing import Any, Optional

from . import _core
from .results import (CalibrationResult, Candidate, CollectivePoint, CollectiveResult,
                      ConfigEntry, Event, EventsResult, Report, SearchResult, SimulateResult)

_core._set_module_file(_core.__file__)

__version__: str = _core.__version__

__all__ = [
    "__version__",
    "version",
    "simulate",
    "search",
    "events",
    "collective",
    "list",
    "calibrate",
    "config_dir",
    "SimulateResult",
    "SearchResult",
    "Candidate",
    "EventsResult",
    "Event",
    "CollectiveResult",
    "CollectivePoint",
    "ConfigEntry",
    "CalibrationResult",
    "Report",
]


def version() -> str:
    """The version, as ``eventsim --version`` prints it after the name."""
    return __version__


def config_dir() -> str:
    """The folder of the bundled models, clusters and devices this package reads."""
    return _core._config_dir()


def simulate(**kwargs: Any) -> SimulateResult:
    """``eventsim simulate``: one iteration of a model under a strategy (docs/JSON.md, simulate)."""
    return SimulateResult.from_report(_core.simulate(**kwargs))


def search(**kwargs: Any) -> SearchResult:
    """``eventsim search``: every strategy for ``gpus``, ranked (docs/JSON.md, search)."""
    return SearchResult.from_report(_core.search(**kwargs))


def events(**kwargs: Any) -> EventsResult:
    """``eventsim events``: the unique compute and communication events of one iteration."""
    return EventsResult.from_report(_core.events(**kwargs))


def collective(**kwargs: Any) -> CollectiveResult:
    """``eventsim collective``: a collective's predicted time per message size."""
    return CollectiveResult.from_report(_core.collective(**kwargs))


def list(what: Optional[str] = None) -> builtins.list[ConfigEntry]:  # noqa: A001 (the CLI's name)
    """``eventsim list [models|clusters|devices]``: the bundled configs, all kinds by default."""
    report = _core.list(what=what)
    return [ConfigEntry(kind, e["name"], e["path"], e["description"])
            for kind, entries in report.items() for e in entries]


def calibrate(**kwargs: Any) -> CalibrationResult:
    """``eventsim calibrate``: fit a device model and write it to ``output`` (a device file)."""
    return CalibrationResult.from_report(_core.calibrate(**kwargs))


# The CLI's help for each command's keywords.
for _name in ("simulate", "search", "events", "collective", "calibrate"):
    globals()[_name].__doc__ += "\n\n" + getattr(_core, _name).__doc__
