"""One call numbering everywhere: "call N" is the N-th API call of an agent, numbered from 1 in record order.

Calls were stored numbered from 0 (``ApiCall.index``, ``Message.call_index``) while events counted the calls before
them (``after_call``), so one record was "call 125" on one page and "after call 126" on the next. Stored calls are
renumbered from 1 (``ApiCall.number``, ``Message.call_number``); a run's point, "after call N", was stored as the
0-based index of that call and moves up by one (``CompactionRun.after_call``, and the hand cut's edges). Events'
``after_call`` already counted calls and is unchanged. Stored analyses name calls by the old numbers: they are
deleted, and the task worker's sweep computes them again (``sweeps.enqueue_missing_analyses``).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models import F, OuterRef, Subquery

# Unique (session, agent, number) is checked row by row on both databases, so the shift goes through numbers no
# call has (far above any call count) instead of moving each row onto its neighbour's number.
_OUT_OF_THE_WAY = 1_000_000_000


def _shift(apps: Any, by: int) -> None:
    api_call = apps.get_model("sessions_app", "ApiCall")
    message = apps.get_model("sessions_app", "Message")
    run = apps.get_model("sessions_app", "CompactionRun")
    analysis = apps.get_model("sessions_app", "SessionAnalysis")
    api_call.objects.update(number=F("number") + _OUT_OF_THE_WAY + by)
    api_call.objects.update(number=F("number") - _OUT_OF_THE_WAY)
    message.objects.filter(call_number__isnull=False).update(call_number=F("call_number") + by)
    for field in ("after_call", "cut_start_call", "cut_end_call"):
        run.objects.filter(**{f"{field}__isnull": False}).update(**{field: F(field) + by})
    analysis.objects.all().delete()
    if by > 0:
        # The headline peak's call, by its one definition (compaction.calls.peak_of): the largest recorded main-chain
        # context, the first of equals. A log without usage gets it from its next estimate.
        session = apps.get_model("sessions_app", "Session")
        first_largest = api_call.objects.filter(session=OuterRef("pk"), agent="main").order_by("-context", "number")
        session.objects.update(peak_call=Subquery(first_largest.values("number")[:1]))


def forwards(apps: Any, schema_editor: Any) -> None:
    _shift(apps, 1)


def backwards(apps: Any, schema_editor: Any) -> None:
    _shift(apps, -1)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0021_unchecked_record_keys")]

    operations = [
        migrations.RemoveConstraint(model_name="apicall", name="apicall_unique_index"),
        migrations.RenameField(model_name="apicall", old_name="index", new_name="number"),
        migrations.AddConstraint(
            model_name="apicall",
            constraint=models.UniqueConstraint(fields=["session", "agent", "number"], name="apicall_unique_index"),
        ),
        migrations.AlterModelOptions(name="apicall", options={"ordering": ["session", "agent", "number"]}),
        migrations.RenameField(model_name="message", old_name="call_index", new_name="call_number"),
        migrations.RenameField(model_name="compactionrun", old_name="at_call", new_name="after_call"),
        migrations.AddField(model_name="session", name="peak_call", field=models.PositiveIntegerField(null=True)),
        migrations.RunPython(forwards, backwards),
    ]
