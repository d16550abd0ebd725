"""Where a send run's CPU goes: the real command under cProfile, its functions attributed to pipeline stages.

A function of the product belongs to the stage its source path names (the table `STAGES`, first
match wins). Library and built-in code (SQLAlchemy, Jinja2, the email package, dkimpy, smtplib,
tomllib, C functions) has no stage of its own: its time goes to the stages of its callers, in
proportion to the time each caller spent in it, up to the nearest product function. So SQLAlchemy
under the send log counts as send log, tomllib under the profile loader as profiles. cProfile records
only direct callers, so a library function shared by two stages is split by its overall callers'
mix rather than per call path: good enough to see where time goes, not exact to the millisecond.
"""

from __future__ import annotations

import pstats
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# (where, stage): `where` is a path prefix relative to the repository ("digest/select/"), optionally
# followed by ":" and a function-name prefix; an empty path matches any file. First match wins, so
# the narrow entries come before the folders that contain them. A renamed module falls through to
# a broader entry (at worst "orchestration"), never out of the table. A stage of None makes the
# product's own helpers count like library code, for their callers' stages.
STAGES: tuple[tuple[str, str | None], ...] = (
    ("<frozen importlib", "imports"),
    (":<module>", "imports"),
    ("digest/subscribers/profiles.py", "profiles"),
    ("digest/subscribers/roster.py", "profiles"),
    ("digest/store/roster.py", "profiles"),
    ("digest/app.py:roster", "profiles"),
    ("digest/app.py:signals", "history/signals"),
    ("digest/store/sendlog.py:received", "history/signals"),
    ("digest/store/feedback.py:feedback_by", "history/signals"),
    ("digest/store/feedback.py:papers_by", "history/signals"),
    ("digest/store/feedback.py:find_papers", "history/signals"),
    ("digest/select/batch.py", "selection (batch ranking)"),
    ("digest/select/", "selection"),
    ("digest/app.py:corpus", "selection"),
    ("digest/tokens.py", "link tokens"),
    ("digest/render/renderer.py", "render"),
    ("digest/render/inlining.py", "render"),
    ("digest/render/filters.py", "render"),
    ("templates/", "render"),  # the compiled Jinja templates' code
    ("digest/delivery/message.py", "MIME"),
    ("digest/delivery/dkim.py", "DKIM"),
    ("digest/delivery/dkim_keys.py", "DKIM"),
    ("digest/delivery/smtp.py", "transport"),
    ("digest/delivery/handover.py", "transport"),  # retries and the outbox; the send log's marks are the store's
    ("digest/delivery/owners.py", "send log/claims"),
    ("digest/store/queue.py", "send log/claims"),
    ("digest/store/sendlog.py", "send log/claims"),
    ("digest/store/engine.py", None),  # transactions and commits: the stage that writes pays for them
    ("digest/store/tables.py", None),  # row helpers, likewise
    ("digest/store/", "store (other)"),
    ("digest/schedule.py", "schedule"),
    ("digest/config.py", "config"),
    ("digest/", "orchestration"),
)
OTHER = "other"

# Runs the command under cProfile with a CPU clock (not wall time: waiting for the sink or the disk
# is not CPU), as `python -m cProfile -m digest ...` would with its default clock.
PROFILE_RUNNER = """
import cProfile, runpy, sys, time
out = sys.argv[1]
sys.argv = ["digest", *sys.argv[2:]]
profile = cProfile.Profile(time.process_time)
try:
    profile.runcall(runpy.run_module, "digest", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    profile.dump_stats(out)
"""

Func = tuple[str, int, str]  # pstats' key: file, line, function name


def profile_command(out: Path, digest_args: list[str]) -> list[str]:
    """The command that runs `digest <digest_args>` under the profiler, writing its stats to `out`."""
    return [sys.executable, "-c", PROFILE_RUNNER, str(out), *digest_args]


def relative(filename: str, root: Path) -> str:
    """A product file as `digest/...`; anything else as cProfile names it."""
    path = Path(filename)
    try:
        return path.resolve().relative_to(root).as_posix() if path.is_absolute() else filename
    except ValueError:
        return filename


def stage_of(func: Func, root: Path) -> str | None:
    """The stage `STAGES` gives a function, None for library code (it takes its callers' stages)."""
    where, name = relative(func[0], root), func[2]
    for pattern, stage in STAGES:
        path, _, prefix = pattern.partition(":")
        if where.startswith(path) and name.startswith(prefix) and (path or prefix):
            return stage
    return None


@dataclass
class Attribution:
    """Self time of every profiled function, summed per stage."""

    stats: Mapping[Func, tuple]  # type: ignore[type-arg]
    root: Path

    def __post_init__(self) -> None:
        self.shares: dict[Func, dict[str, float]] = {}
        self.visiting: set[Func] = set()

    def share(self, func: Func) -> dict[str, float]:
        """How a function's time splits over stages: its own stage, else its callers' mix ({} inside a cycle)."""
        if func in self.shares:
            return self.shares[func]
        stage = stage_of(func, self.root)
        if stage is not None:
            self.shares[func] = {stage: 1.0}
        elif func in self.visiting or func not in self.stats:
            return {}  # a cycle through library code (recursion): the other callers decide
        else:
            self.visiting.add(func)
            callers = self.stats[func][4]
            mixed = self._mix({caller: edge[3] for caller, edge in callers.items()})
            self.visiting.discard(func)
            if not mixed and callers:
                return {}  # every caller was in the cycle being resolved: decided by the caller's other callers
            self.shares[func] = mixed or {OTHER: 1.0}
        return self.shares[func]

    def _mix(self, weights: Mapping[Func, float]) -> dict[str, float]:
        """The callers' stage shares, weighted; {} when none of them has one yet."""
        mixed: Counter[str] = Counter()
        for caller, weight in weights.items():
            for stage, part in self.share(caller).items():
                mixed[stage] += weight * part
        total = sum(mixed.values())
        return {s: v / total for s, v in mixed.items()} if total else {}

    def seconds(self) -> Counter[str]:
        """CPU seconds per stage."""
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 50_000))  # caller chains run as deep as the program's calls
        try:
            out: Counter[str] = Counter()
            for func, (_cc, _nc, tt, _ct, callers) in self.stats.items():
                own = stage_of(func, self.root)
                split = {own: 1.0} if own else self._mix({c: e[2] for c, e in callers.items()}) or {OTHER: 1.0}
                for stage, part in split.items():
                    out[stage] += tt * part
            return out
        finally:
            sys.setrecursionlimit(limit)


def by_stage(profile: Path, root: Path) -> Counter[str]:
    """CPU seconds per stage of a profile written by `profile_command`."""
    return Attribution(pstats.Stats(str(profile)).stats, root).seconds()  # type: ignore[attr-defined]


def hottest(profile: Path, root: Path, count: int = 15) -> list[tuple[str, float, int]]:
    """The functions with the most self time: (file:line(name), seconds, calls)."""
    stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:count]
    return [(f"{relative(f[0], root)}:{f[1]}({f[2]})", v[2], v[1]) for f, v in top]
