"""What an experiment is: its variants, its rows and its progress.

The values the experiment store, the runner, the results and the pages share.  A variant is a
requested mode (AUTO / RULE_PLANNER / AGENTIC: the ``Mode`` names the traces show; the short
spellings auto / rule / agentic are accepted too, in any case) plus config overrides laid over the
acting user's settings for its runs only (``Workbench.ask(overrides=...)``: nothing is written to the
config store).
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from pydantic import BaseModel, Field, field_validator

from docmind_core.errors import ConfigError, ExperimentError
from docmind_core.values import Mode, RequestedMode
from docmind_core.settings import Settings, is_personal_key


RunMode = Literal["auto", "rule", "agentic"]  # stored and asked as RequestedMode values
# The name a variant's mode is shown with: the Mode the forced path runs (AUTO: the router decides).
MODE_NAMES: dict[str, str] = {RequestedMode.AUTO.value: "AUTO", RequestedMode.RULE_PLANNER.value: Mode.RULE_PLANNER.value,
                              RequestedMode.AGENTIC.value: Mode.AGENTIC.value}
MODE_CHOICES = "AUTO, RULE_PLANNER or AGENTIC"
ExperimentState = Literal["pending", "running", "cancelling", "cancelled", "done"]
MAX_VARIANTS = 8




class Variant(BaseModel):
    id: int | None = None
    name: str
    mode: RunMode = "auto"
    overrides: dict[str, Any] = Field(default_factory=dict)

    @field_validator("mode", mode="before")
    @classmethod
    def _one_vocabulary(cls, value: Any) -> Any:
        key = value.value if isinstance(value, (Mode, RequestedMode)) else value
        if isinstance(key, str):
            try:
                return RequestedMode.from_str(key).value  # every spelling RequestedMode reads, in any case
            except ConfigError:
                raise ValueError(f"mode {key!r} is not one of {MODE_CHOICES} (or auto, rule, agentic)") from None
        return value

    @property
    def mode_name(self) -> str:
        """AUTO, RULE_PLANNER or AGENTIC: the mode as the rest of DocMind names it."""
        return MODE_NAMES[self.mode]

    def describe(self) -> str:
        """``name: MODE`` and its overrides, e.g. ``strict: RULE_PLANNER, grader.high_threshold=0.95``."""
        extra = "".join(f", {k}={v}" for k, v in self.overrides.items())
        return f"{self.name}: {self.mode_name}{extra}"

    @field_validator("overrides")
    @classmethod
    def _tunable(cls, value: dict[str, Any]) -> dict[str, Any]:
        shared = [k for k in value if not is_personal_key(k)]
        if shared:
            raise ValueError(f"a variant may only override grader.*, agentic.*, retrieval.* and rag.* keys, "
                             f"not {', '.join(shared)}")
        try:
            Settings().with_overrides(value)
        except ConfigError as exc:  # names the bad key or value
            raise ValueError(str(exc)) from None
        return value


class Experiment(BaseModel):
    id: int
    name: str
    description: str = ""  # generated at creation: variants, thresholds, questions (describe_experiment)
    dataset_id: int
    owner_id: int | None = None
    leave_gold_out: bool = False
    item_limit: int | None = None
    state: ExperimentState = "pending"
    runner: str = ""
    heartbeat_at: float = 0.0
    created_at: str = ""
    updated_at: str = ""
    variants: list[Variant] = Field(default_factory=list)

    @property
    def trace_label(self) -> str:
        return f"experiment:{self.id}"


class ExperimentRun(BaseModel):
    """One (variant, item, gold-left-out) row."""

    id: int
    variant_id: int
    item_id: int
    gold_left_out: bool = False
    state: Literal["pending", "running", "done", "failed"] = "pending"
    run_id: str | None = None
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None


class Progress(BaseModel):
    state: ExperimentState
    total: int
    done: int
    failed: int
    running: int
    pending: int
    elapsed_s: float  # sum over finished rows of their wall time, divided by the parallelism used
    eta_s: float | None  # None until one row finished

    @property
    def fraction(self) -> float:
        return (self.done + self.failed) / self.total if self.total else 1.0



def parse_variant(text: str) -> Variant:
    """``NAME:MODE[:key=value,key=value]``, e.g. ``strict:rule:grader.high_threshold=0.75``."""
    from docmind_core.settings import coerce

    parts = text.split(":", 2)
    if len(parts) < 2 or not parts[0].strip():
        raise ExperimentError(f"variant {text!r}: expected NAME:MODE[:key=value,...] (MODE {MODE_CHOICES})")
    overrides: dict[str, Any] = {}
    if len(parts) == 3 and parts[2].strip():
        for pair in parts[2].split(","):
            key, sep, value = pair.partition("=")
            if not sep:
                raise ExperimentError(f"variant {text!r}: override {pair!r} is not key=value")
            overrides[key.strip()] = coerce(key.strip(), value.strip())
    try:
        return Variant(name=parts[0].strip(), mode=parts[1].strip(), overrides=overrides)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ExperimentError(f"variant {text!r}: {_first_error(exc)}") from None


def describe_experiment(variants: Sequence[Variant], grader: Any, leave_gold_out: bool, limit: int | None,
                        dataset_name: str) -> str:
    """One paragraph on what an experiment compares: each variant's mode and overrides, the grader
    thresholds its runs start from (``grader``: the creator's settings; a variant's overrides win), and
    the questions asked."""
    questions = f"the first {limit} questions of {dataset_name}" if limit else f"every question of {dataset_name}"
    if leave_gold_out:
        questions += ", each answerable one asked again with its gold documents left out"
    thresholds = (f"grader.high_threshold={grader.high_threshold}, grader.low_threshold={grader.low_threshold}, "
                  f"grader.gray_zone_mode={grader.gray_zone_mode}")
    return (f"Variants: {'; '.join(v.describe() for v in variants)}. Thresholds: {thresholds}. "
            f"Questions: {questions}.")


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return str(first.get("msg", exc)).removeprefix("Value error, ")
    return str(exc)
