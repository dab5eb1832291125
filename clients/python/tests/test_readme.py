"""The README's tables of the Worker's defaults and events match the code."""

from __future__ import annotations

import dataclasses
import re
from fractions import Fraction
from pathlib import Path

from hotq import WorkerEvent, WorkerPolicy

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _rows(header: str) -> list:
    table = README[README.index(header):].split("\n\n")[0]
    return [
        [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        for line in table.splitlines()[2:]
    ]


def test_the_policy_table_states_every_field_and_its_default() -> None:
    rows = {row[0]: row[1] for row in _rows("| Field | Default | Meaning |")}
    fields = {f.name: f.default for f in dataclasses.fields(WorkerPolicy)}
    assert set(rows) == set(fields)
    for name, default in fields.items():
        written = rows[name].replace(" ", "")
        if isinstance(default, bool):
            assert written == str(default), name
        elif isinstance(default, float):
            assert Fraction(written) == Fraction(default).limit_denominator(100), name
        else:
            assert int(written) == default, name


def test_the_event_table_states_every_kind_the_worker_emits() -> None:
    documented = {row[0] for row in _rows("| `kind` | `message` | `detail` |")}
    source = (Path(__file__).resolve().parents[1] / "src" / "hotq" / "worker.py").read_text()
    emitted = set(re.findall(r'_emit\("([a-z_]+)"', source))
    assert documented == emitted
    for kind in emitted:
        assert f"``{kind}``" in (WorkerEvent.__doc__ or ""), kind
