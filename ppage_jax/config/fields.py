"""How a config value is judged and how a refusal reads: :class:`Field` (one leaf of a
schema), the common field rules, :class:`ConfigError` and :func:`notice`."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import reprlib
import sys
import warnings
from collections.abc import Callable
from typing import Any

# Numbers reach the device as int32 / float32: every integer of a config must fit int32 and
# every number must be finite in float32.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FLOAT32_MAX = 3.4028234663852886e38
# The smallest normal float32: devices flush smaller non-zero numbers to 0, so a non-zero
# number below it in magnitude is refused (it would silently become 0).
FLOAT32_TINY = 1.1754943508222875e-38
# Error messages show values in a short form of at most this many characters.
MAX_VALUE_CHARS = 80
_MAX_MESSAGE_CHARS = 2000

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxtuple, _SHORT.maxset = 3, 6, 6, 6, 6
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = MAX_VALUE_CHARS, MAX_VALUE_CHARS, 40

# notice() names the first caller outside the package (the user's line) as the warning's origin.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def short_repr(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """``repr(value)`` cut to at most ``limit`` characters (nested and long values elided)."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # noqa: BLE001 (an odd object must never break an error message)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(text: str, limit: int = _MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ConfigError(ValueError):
    """A config value that is not allowed; names the file, the key, the value and the rule.

    The message shows the value in a short form (:func:`short_repr`); ``err.value`` holds it
    whole.
    """

    def __init__(self, source: str, key: str, value: Any, allowed: str):
        self.source, self.key, self.value, self.allowed = source, key, value, allowed
        super().__init__(
            clip(
                f"{clip(str(source), 300)}: {clip(str(key), 200)} = {short_repr(value)}: {allowed}"
            )
        )


class ConfigNotice(UserWarning):
    """A config was adjusted the way its overrides ask (e.g. params dropped); not an error."""


def notice(message: str) -> None:
    """Tell the user (on stderr, through :mod:`warnings`) how a config was adjusted.

    The warning is attributed to the first caller outside the package.
    """
    frame, level = sys._getframe(1), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, ConfigNotice, stacklevel=level)


@dataclasses.dataclass(frozen=True)
class Field:
    """One leaf of the schema: accepted types, nullability and a range check."""

    kind: type | tuple[type, ...]
    nullable: bool = False
    check: Callable[[Any], bool] | None = None
    allowed: str = ""

    @property
    def kinds(self) -> tuple[type, ...]:
        """The accepted types as a tuple."""
        return self.kind if isinstance(self.kind, tuple) else (self.kind,)

    def validate(self, value: Any) -> Any:
        """Return the value coerced to its kind, or raise ValueError(allowed)."""
        if value is None:
            if self.nullable:
                return None
            raise ValueError(self.describe())
        kinds = self.kinds
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value) if abs(value) <= FLOAT32_MAX else math.inf
        if isinstance(value, bool) and bool not in kinds:
            raise ValueError(self.describe())
        if not isinstance(value, kinds):
            raise ValueError(self.describe())
        if isinstance(value, float) and float32_problem(value):
            raise ValueError(f"{self.describe()}; {float32_problem(value)}")
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not INT32_MIN <= value <= INT32_MAX
        ):
            raise ValueError(
                f"{self.describe()}; integers must fit int32 [{INT32_MIN}, {INT32_MAX}]"
            )
        if self.check is not None and not _passes(self.check, value):
            raise ValueError(self.describe())
        return value

    def describe(self) -> str:
        names = {
            int: "an integer",
            float: "a number",
            bool: "true or false",
            str: "a string",
            list: "a list",
            dict: "a mapping",
        }
        text = " or ".join(names.get(k, k.__name__) for k in self.kinds)
        if self.allowed:
            text += f" {self.allowed}"
        if self.nullable:
            text += " (or null)"
        return f"must be {text}"


def _passes(check: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(check(value))
    except (TypeError, ValueError, OverflowError):  # e.g. a list check meeting odd items
        return False


def float32_number(value: Any) -> bool:
    """True for a real number (not a bool) that is finite in float32 (|x| <= FLOAT32_MAX)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and abs(value) <= FLOAT32_MAX
    )


# The rule of a number a config gives the device as float32 (a reward weight, a term param).
FLOAT32_RULE = f"must be a finite number in float32 range (|x| <= {FLOAT32_MAX:.4g})"


def float32_problem(value: float) -> str:
    """Why a real number cannot reach the device as float32 ('' when it can): not finite, beyond
    ``FLOAT32_MAX`` (it would become inf), or non-zero below ``FLOAT32_TINY`` (it would become
    0)."""
    if not (math.isfinite(value) and abs(value) <= FLOAT32_MAX):
        return f"numbers must be finite in float32 (|x| <= {FLOAT32_MAX:.4g})"
    if value != 0 and abs(value) < FLOAT32_TINY:
        return (
            f"a non-zero number must be at least {FLOAT32_TINY:.4g} in magnitude (float32 "
            f"turns smaller ones into 0); write 0 or a larger number"
        )
    return ""


def int_at_least(lo: int, nullable: bool = False, extra: str = "") -> Field:
    """An integer that must be >= ``lo`` (``extra`` is appended to the rule's wording)."""
    return Field(int, nullable, lambda v: v >= lo, f">= {lo}{extra}")


def positive(kind: type = float) -> Field:
    """A number (or integer, with ``kind=int``) that must be > 0."""
    return Field(kind, False, lambda v: v > 0, "> 0")


UNIT_INTERVAL = Field(float, False, lambda v: 0 <= v <= 1, "in [0, 1]")
NON_NEGATIVE = Field(float, False, lambda v: v >= 0, ">= 0")

# The rule for every name that becomes a file path or a table cell: agent name prefixes
# (agents.naming), env.name, sweep arm names and tracked run names.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
NAME_RULE = "of letters, digits, '_' or '-' starting with a letter (<= 64 characters)"


def is_safe_name(value: Any) -> bool:
    """True when ``value`` is a string that follows :data:`NAME_RULE` (no '/', '.', spaces
    or control characters, so it is safe as one path part and as a table cell)."""
    return isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None
