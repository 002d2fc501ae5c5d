"""The compile time of each program of a command (summary.json's
``compile_seconds_by_program``), read from JAX's monitoring events."""

from __future__ import annotations

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # JAX's monitoring event

_recorders: list[CompileTimes] = []
_listening = False


class CompileTimes:
    """The seconds XLA spent compiling (or loading from the cache) each program while this
    recorder is open (``with CompileTimes() as times``), by the jitted function's name; read
    from JAX's monitoring events, so nothing is timed twice and no program is changed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __enter__(self) -> CompileTimes:
        global _listening
        if not _listening:
            import jax

            jax.monitoring.register_event_duration_secs_listener(_record)
            _listening = True
        _recorders.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _recorders.remove(self)

    def by_program(self, min_seconds: float = 0.1, digits: int = 2) -> dict[str, float]:
        """``{program: seconds}``, longest first; the programs under ``min_seconds`` each
        (eager array ops, small helpers) summed into one ``"other (N programs)"`` entry."""
        ranked = sorted(self.seconds.items(), key=lambda kv: -kv[1])
        out = {name: round(t, digits) for name, t in ranked if t >= min_seconds}
        rest = [t for _, t in ranked if t < min_seconds]
        if rest:
            out[f"other ({len(rest)} programs)"] = round(sum(rest), digits)
        return out


def _record(event: str, duration_secs: float, **details: str | int) -> None:
    if event != BACKEND_COMPILE_EVENT:
        return
    name = str(details.get("fun_name", "?"))
    for recorder in _recorders:
        recorder.seconds[name] = recorder.seconds.get(name, 0.0) + float(duration_secs)
