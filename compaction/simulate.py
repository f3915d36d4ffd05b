"""The settings simulator's arithmetic: one session's replay summed up beside what happened, its estimated cost,
and the setting to recommend per project. Pure Python; the replay itself is ``compaction.replay.replay``.

**Estimated cost.** What happened costs what the session's recorded calls cost (``compaction.costs``, the one price
table: the number the session list and page show). A replay changes only the main chain's contexts and compactions;
its cost is estimated as that real cost plus the difference between two modelled costs of the main chain, each
computed by the same rule from the same calls (``modelled_input_cost``):

- every call sends its context (the recorded one, or the replay's ``series``); the part the previous call of the same
  path already sent is read from the prompt cache, the rest is written to it (a 5-minute write); the first call and
  the first call after a compaction write their whole context (a compaction changes the prefix);
- every compaction makes a summarizer call that reads the context it summarises and writes the summary as output
  (``summary_tokens``: the replay's simulated summary size, for the real compactions as for the modelled ones);
- output tokens are the recorded ones on both paths, so they cancel.

Each call is priced at its own model's rates (its long-context tier by the context it sends). The estimate is a model
(labelled so on every page): it ignores cache expiry and assumes the agent's work, its outputs and its turns, would be
the same whatever the setting.

**Recommendation.** Among the settings one run tried, per project: those that replayed every session of the project
with no more overflows than really happened (costs compared over the sessions that have a price and recorded usage,
the same sessions for every setting) (a cheaper setting that overflows more is no saving); of these, the one
with the lowest estimated cost (ties: fewer compactions, then the order tried). It is recommended when its estimated
cost is at least ``MIN_SAVING`` (1 %) below what happened; the expected saving is
the difference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.costs import PER_MILLION, PriceOverrides, price_for
from compaction.replay import ReplayResult, api_steps, main_agent
from compaction.transcript import Message

# A saving under this share of what happened is within the estimate's own error (a replay that takes up every real
# compaction differs from the recording by a few tokens per call): no recommendation is made for it.
MIN_SAVING = 0.01

COST_NOTE = (
    "Estimated: what happened (the recorded calls' cost) plus the difference between the replayed and the recorded "
    "main chain, both priced by one model (cache reads of what the previous call sent, cache writes of the rest and "
    "after each compaction, one summarizer call per compaction); outputs as recorded."
)


def modelled_input_cost(
    *,
    contexts: Sequence[tuple[int, int | None]],
    models: Mapping[int, str | None],
    compactions: Iterable[tuple[int, int]],
    summary_tokens: int,
    prices: PriceOverrides | None = None,
) -> float | None:
    """The modelled cost of one path of the main chain (see the module's note): ``contexts`` (call, context sent) in
    call order, ``models`` each call's model, ``compactions`` (after call N, context summarised). None when a call's
    model has no price."""
    after: dict[int, int] = {}
    for after_call, tokens in compactions:
        after[after_call] = after.get(after_call, 0) + tokens
    total = 0.0
    previous: int | None = None
    for call, context in contexts:
        if context is None:
            continue
        price = price_for(models.get(call), overrides=prices)
        if price is None:
            return None
        rates = price.rates_for(context)
        summarised = after.pop(call - 1, None)
        if summarised is not None:
            previous = None  # the prefix changed: the whole context is written again
            total += summarised * rates.cache_read + summary_tokens * rates.output
        read = 0 if previous is None else min(previous, context)
        total += read * rates.cache_read + (context - read) * rates.cache_write_5m
        previous = context
    return total / PER_MILLION


@dataclass(slots=True)
class SessionOutcome:
    """One setting replayed over one session: the replay's own numbers, as ``manage.py replay --json`` gives them,
    and the estimated cost."""

    compactions: int
    prunes: int
    overflows: int
    blocked: int
    peak: dict[str, int | None]
    tokens_summarised: int
    follow_reality: bool
    events: list[dict[str, Any]]
    estimated_cost_usd: float | None
    cost_change_usd: float | None  # the estimate less what happened (negative: a saving)

    def as_json(self) -> dict[str, Any]:
        return {
            "compactions": self.compactions,
            "prunes": self.prunes,
            "overflows": self.overflows,
            "blocked": self.blocked,
            "peak": self.peak,
            "tokens_summarised": self.tokens_summarised,
            "follow_reality": self.follow_reality,
            "events": self.events,
            "estimated_cost_usd": self.estimated_cost_usd,
            "cost_change_usd": self.cost_change_usd,
        }


# The replay's fields a simulation keeps per session (``manage.py replay --json`` has the same names and values).
REPLAY_FIELDS = ("compactions", "prunes", "overflows", "blocked", "peak", "tokens_summarised", "follow_reality")
EVENT_FIELDS = ("kind", "after_call", "tokens_before", "tokens_after", "trigger", "followed")


def outcome(
    result: ReplayResult,
    *,
    messages: Sequence[Message],
    real_cost_usd: float | None,
    prices: PriceOverrides | None = None,
) -> SessionOutcome:
    """``result`` (the replay of ``messages``) summed up, with its estimated cost against ``real_cost_usd``."""
    data = result.as_json()
    agent = main_agent(messages)
    steps = api_steps([m for m in messages if m.agent == agent])
    models = {step.number: step.model for step in steps}
    real_compactions = [
        (row.real_after_call, row.real_tokens_before if row.real_tokens_before is not None else 0)
        for row in result.comparison
        if row.kind == "compaction" and row.real_after_call is not None
    ]
    recorded = dict(result.recorded)
    for index, (after_call, tokens) in enumerate(real_compactions):
        if not tokens:  # the agent's own count is not recorded: the context its last call sent
            real_compactions[index] = (after_call, recorded.get(after_call) or 0)
    replayed = [(e.after_call, e.tokens_before) for e in result.events if e.kind == "compaction"]
    change: float | None = None
    estimated: float | None = None
    # Only the calls with a recorded context are priced on both paths (a log without usage has nothing to compare).
    priced = {call for call, context in result.recorded if context}
    if real_cost_usd is not None and not result.series:  # no call to replay: nothing changes
        change, estimated = 0.0, real_cost_usd
    elif real_cost_usd is not None and priced:

        def priced_path(contexts: Iterable[tuple[int, int | None]], compactions: list[tuple[int, int]]) -> float | None:
            kept = [(call, context) for call, context in contexts if call in priced]
            return modelled_input_cost(
                contexts=kept,
                models=models,
                compactions=compactions,
                summary_tokens=result.summary_tokens,
                prices=prices,
            )

        real_model = priced_path(result.recorded, real_compactions)
        replay_model = priced_path(result.series, replayed)
        if real_model is not None and replay_model is not None:
            change = round(replay_model - real_model, 6)
            estimated = round(max(real_cost_usd + change, 0.0), 6)
    return SessionOutcome(
        compactions=data["compactions"],
        prunes=data["prunes"],
        overflows=data["overflows"],
        blocked=data["blocked"],
        peak=data["peak"],
        tokens_summarised=data["tokens_summarised"],
        follow_reality=data["follow_reality"],
        events=[{key: event[key] for key in EVENT_FIELDS} for event in data["events"]],
        estimated_cost_usd=estimated,
        cost_change_usd=change,
    )


@dataclass(slots=True)
class Totals:
    """What happened, or one setting's replay, summed over sessions; costs only over the costed sessions (those
    with a cost for what happened and an estimate for every setting), so that every cost compared is of the same
    sessions."""

    sessions: int = 0
    compactions: int = 0
    overflows: int = 0
    peak: int = 0  # the largest session peak
    cost_usd: float = 0.0  # over the costed sessions
    uncosted: int = 0  # sessions without a price or without recorded usage to price

    def add(self, *, compactions: int, overflows: int, peak: int, cost_usd: float | None) -> None:
        self.sessions += 1
        self.compactions += compactions
        self.overflows += overflows
        self.peak = max(self.peak, peak)
        if cost_usd is None:
            self.uncosted += 1
        else:
            self.cost_usd = round(self.cost_usd + cost_usd, 6)

    def as_json(self) -> dict[str, Any]:
        costed = self.sessions - self.uncosted
        return {
            "sessions": self.sessions,
            "compactions": self.compactions,
            "overflows": self.overflows,
            "peak": self.peak,
            "cost_usd": self.cost_usd if costed else None,
            "sessions_costed": costed,
        }


@dataclass(slots=True)
class ProjectSummary:
    project: str
    happened: Totals
    settings: list[Totals]  # one per setting tried, in order
    skipped: int = 0
    recommended: int | None = None  # index of the setting recommended, None: keep what happened
    saving_usd: float | None = None
    why: str = ""
    notes: list[str] = field(default_factory=list)

    def as_json(self, *, labels: Sequence[str]) -> dict[str, Any]:
        return {
            "project": self.project,
            "happened": self.happened.as_json(),
            "settings": [{"setting": labels[i], **t.as_json()} for i, t in enumerate(self.settings)],
            "skipped": self.skipped,
            "recommended": labels[self.recommended] if self.recommended is not None else None,
            "recommended_index": self.recommended,
            "expected_saving_usd": self.saving_usd,
            "why": self.why,
        }


def summarise(
    sessions: Sequence[Mapping[str, Any]], *, settings: int, project_of: str = "project"
) -> list[ProjectSummary]:
    """Per project (and "" for all, first): what happened, each setting's totals, and the recommendation.

    ``sessions`` are a simulation's per-session results (``happened`` and ``outcomes``, or ``skipped``)."""
    groups: dict[str, list[Mapping[str, Any]]] = {"": []}
    for row in sessions:
        groups[""].append(row)
        groups.setdefault(str(row.get(project_of) or "(no project)"), []).append(row)
    out = []
    for project, rows in groups.items():
        summary = ProjectSummary(project=project, happened=Totals(), settings=[Totals() for _ in range(settings)])
        for row in rows:
            if row.get("skipped"):
                summary.skipped += 1
                continue
            happened = row["happened"]
            costs = [happened["cost_usd"], *(result["estimated_cost_usd"] for result in row["outcomes"])]
            costed = all(cost is not None for cost in costs)
            summary.happened.add(
                compactions=happened["compactions"],
                overflows=happened["overflows"],
                peak=happened["peak"]["tokens"] or 0,
                cost_usd=happened["cost_usd"] if costed else None,
            )
            for index, result in enumerate(row["outcomes"]):
                summary.settings[index].add(
                    compactions=result["compactions"],
                    overflows=result["overflows"],
                    peak=result["peak"]["tokens"] or 0,
                    cost_usd=result["estimated_cost_usd"] if costed else None,
                )
        recommend(summary)
        out.append(summary)
    return out


def recommend(summary: ProjectSummary) -> None:
    """Fill in the recommendation (the module's note says how it is chosen)."""
    happened = summary.happened
    if not happened.sessions:
        summary.why = "No session of this project was replayed."
        return
    if happened.uncosted == happened.sessions:
        summary.why = "No cost can be compared: no session has a price and recorded usage to price."
        return
    candidates = [
        (t.cost_usd, t.compactions, index)
        for index, t in enumerate(summary.settings)
        if t.sessions == happened.sessions and t.overflows <= happened.overflows
    ]
    if not candidates:
        summary.why = "Every setting tried overflows more often than what happened."
        return
    cost, _, index = min(candidates)
    saving = round(happened.cost_usd - cost, 6)
    if saving < MIN_SAVING * happened.cost_usd or saving <= 0:
        summary.why = (
            f"No setting tried is estimated at least {MIN_SAVING:.0%} cheaper than what happened without more "
            "overflows: keep what you have."
        )
        return
    summary.recommended = index
    summary.saving_usd = saving
    summary.why = "The lowest estimated cost among the settings tried that overflow no more often than what happened."
    if happened.uncosted:
        summary.why += (
            f" Costs are of the {happened.sessions - happened.uncosted} sessions that can be priced; "
            f"{happened.uncosted} have no price or no recorded usage."
        )
