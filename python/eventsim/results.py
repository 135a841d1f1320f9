"""Typed results of the eventsim Python API.

Each result is a read-only mapping over the command's JSON report (docs/JSON.md), so
``result["iteration_time_ms"]`` and ``result == json.loads(cli_output)`` keep working, with the
fields most asked for as typed attributes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = [
    "Report",
    "SimulateResult",
    "Candidate",
    "SearchResult",
    "Event",
    "EventsResult",
    "CollectivePoint",
    "CollectiveResult",
    "ConfigEntry",
    "CalibrationResult",
]


@dataclass(frozen=True, eq=False)
class Report(Mapping):
    """A read-only mapping over one JSON report; ``report`` holds it whole."""

    report: dict = field(repr=False)

    def __getitem__(self, key: str) -> Any:
        return self.report[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.report)

    def __len__(self) -> int:
        return len(self.report)


@dataclass(frozen=True, eq=False)
class SimulateResult(Report):
    """One simulated iteration (``eventsim simulate --json``)."""

    strategy: str = ""
    iteration_time_ms: Optional[float] = None
    throughput_tokens_per_s: Optional[float] = None
    model_tflops_per_gpu: Optional[float] = None
    mfu: Optional[float] = None
    bubble_fraction: Optional[float] = None
    peak_memory_bytes: int = 0
    memory_margin_bytes: int = 0

    @classmethod
    def from_report(cls, report: dict) -> "SimulateResult":
        return cls(
            report=report,
            strategy=report.get("strategy", ""),
            iteration_time_ms=report.get("iteration_time_ms"),
            throughput_tokens_per_s=report.get("throughput_tokens_per_s"),
            model_tflops_per_gpu=report.get("model_tflops_per_gpu"),
            mfu=report.get("mfu"),
            bubble_fraction=report.get("bubble_fraction"),
            peak_memory_bytes=report.get("peak_memory_bytes", 0),
            memory_margin_bytes=report.get("memory_margin_bytes", 0),
        )


@dataclass(frozen=True, eq=False)
class Candidate(Report):
    """One strategy of a search: ``status`` is ok, oom or invalid."""

    strategy: str = ""
    status: str = ""
    rank: Optional[int] = None
    iteration_time_ms: Optional[float] = None
    mfu: Optional[float] = None
    peak_memory_bytes: Optional[int] = None

    @classmethod
    def from_report(cls, report: dict) -> "Candidate":
        return cls(
            report=report,
            strategy=report.get("strategy", ""),
            status=report.get("status", ""),
            rank=report.get("rank"),
            iteration_time_ms=report.get("iteration_time_ms"),
            mfu=report.get("mfu"),
            peak_memory_bytes=report.get("peak_memory_bytes"),
        )


@dataclass(frozen=True, eq=False)
class SearchResult(Sequence):
    """A search (``eventsim search --json``): a sequence of its ranked candidates, with the
    best one, the counts and the command that simulates the best (``report`` holds it whole)."""

    report: dict = field(repr=False)
    candidates: tuple = ()
    best: Optional[Candidate] = None
    simulate_command: Optional[str] = None

    @classmethod
    def from_report(cls, report: dict) -> "SearchResult":
        candidates = tuple(Candidate.from_report(c) for c in report.get("candidates", []))
        # The report names the best plan; it is the candidate ranked first.
        best = next((c for c in candidates if c.rank == 1), None)
        return cls(
            report=report,
            candidates=candidates,
            best=best,
            simulate_command=report.get("simulate_command"),
        )

    def __getitem__(self, index):  # type: ignore[override]
        return self.candidates[index]

    def __len__(self) -> int:
        return len(self.candidates)


@dataclass(frozen=True)
class Event:
    """One unique compute or communication event of an iteration."""

    signature: str
    kind: str
    count: int
    flops: float
    bytes: float
    scope: str  # intra or inter for communication, "" for compute


@dataclass(frozen=True, eq=False)
class EventsResult(Report):
    """The unique events of a model and strategy (``eventsim events --json``)."""

    op_executions: int = 0
    unique_events: int = 0
    events: tuple = ()
    parameters_total: int = 0
    parameters_active: int = 0

    @classmethod
    def from_report(cls, report: dict) -> "EventsResult":
        return cls(
            report=report,
            op_executions=report.get("op_executions", 0),
            unique_events=report.get("unique_events", 0),
            events=tuple(
                Event(e["signature"], e["kind"], e["count"], e["flops"], e["bytes"],
                      e.get("scope", ""))
                for e in report.get("events", [])
            ),
            parameters_total=report.get("parameters_total", 0),
            parameters_active=report.get("parameters_active", 0),
        )


@dataclass(frozen=True)
class CollectivePoint:
    """One message size of a collective: predicted time and bandwidths, NCCL's choice."""

    bytes: int
    time_us: float
    algbw_gb_s: float
    busbw_gb_s: float
    algorithm: str
    protocol: str
    measured_time_us: Optional[float] = None


@dataclass(frozen=True, eq=False)
class CollectiveResult(Report):
    """A collective's predicted times over sizes (``eventsim collective --json``)."""

    op: str = ""
    gpus: int = 0
    points: tuple = ()

    @classmethod
    def from_report(cls, report: dict) -> "CollectiveResult":
        return cls(
            report=report,
            op=report.get("op", ""),
            gpus=report.get("gpus", 0),
            points=tuple(
                CollectivePoint(r["bytes"], r["time_us"], r["algbw_gb_s"], r["busbw_gb_s"],
                                r["algorithm"], r["protocol"], r.get("measured_time_us"))
                for r in report.get("results", [])
            ),
        )


@dataclass(frozen=True)
class ConfigEntry:
    """A bundled model, cluster or device: the name --model/--cluster take, and its file."""

    kind: str
    name: str
    path: str
    description: str


@dataclass(frozen=True, eq=False)
class CalibrationResult(Report):
    """A fitted device file written by ``calibrate``."""

    device_file: str = ""
    device: str = ""
    predictions_file: Optional[str] = None

    @classmethod
    def from_report(cls, report: dict) -> "CalibrationResult":
        return cls(
            report=report,
            device_file=report["device_file"],
            device=report["device"],
            predictions_file=report.get("predictions_file"),
        )
