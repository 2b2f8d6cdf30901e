"""The chapter's rules on one set of students, measured as the chapter measures them: its own students and the
layout chapter's largest-budget ones (:func:`hybridlib.findings.students.budget_students`). Every measurement is
memoized under the student's identity (:mod:`~hybridlib.findings.first_fa.measures`,
:func:`hybridlib.alignment.chapter_measure`), so a student carried here as its record is judged without its weights.

``models``: label -> :class:`~hybridlib.alignment.Probed` per replicate (replicate 0 first), GDN students and the
SWA student, as the chapter loads them; ``params``: the chapter's resolved parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hybridlib import alignment
from hybridlib.alignment import Alignment, Probed
from hybridlib.findings.first_fa import measures, report
from hybridlib.findings.students import BudgetStudents, at_budget

DETOK_ARTICLES = 30  # UDHR articles a language of the detokenisation probe reads


def event_students(
    models: Mapping[str, Sequence[Probed]], params: Mapping[str, Any]
) -> dict[str, list[Alignment]]:
    """Label -> the SoftCKA measurements the event rules read: replicate 0 of every student, and its other
    replicates where its first FA layer follows recurrent layers (a first FA layer at 0 cannot test them)."""
    out = {}
    for label, reps in models.items():
        first = alignment.chapter_measure(reps[0], params)
        later = reps[1:] if first.fa_layers[0] > 0 else []
        out[label] = [first] + [alignment.chapter_measure(m, params) for m in later]
    return out


def locality_table(
    teacher: Probed, models: Mapping[str, Sequence[Probed]], params: Mapping[str, Any]
) -> pd.DataFrame:
    """One row per student, replicate and FA layer: the mean attention distance (tokens) and the local share there,
    the teacher's at the same layer, and whether the student's is ``more local``; every UDHR text of the chapter in
    the teacher's tokens."""
    texts = alignment.udhr_texts(params["languages"], params["articles"])
    ids = measures.locality_ids(teacher, texts, params["max_tokens"])
    window = params["locality_window"]
    base = measures.locality(teacher, ids, range(teacher.n_layers), window=window)
    rows = []
    for label, reps in models.items():
        for r, m in enumerate(reps):
            ours = measures.locality(m, ids, m.fa_layers, window=window)
            for i, layer in enumerate(m.fa_layers):
                rows.append(
                    {
                        "model": label,
                        "replicate": r,
                        "layer": layer,
                        "distance": ours.mean_distance[i],
                        "teacher distance": base.mean_distance[layer],
                        "local share": ours.local_share[i],
                        "teacher local share": base.local_share[layer],
                    }
                )
    table = pd.DataFrame(rows)
    table["more local"] = table["distance"] < table["teacher distance"]
    return table


def locality_distances(table: pd.DataFrame, labels: Sequence[str]) -> dict[str, list[float]]:
    """Per student of ``labels`` (in the table's order) and replicate: its FA layers' mean attention distance minus
    the teacher's at the same layers, averaged over those layers (tokens), from :func:`locality_table`."""
    rows = table[table["model"].isin(labels)]
    return {
        label: (g["distance"] - g["teacher distance"]).groupby(g["replicate"]).mean().tolist()
        for label, g in rows.groupby("model", sort=False)
    }


def word_probe(m: Probed, params: Mapping[str, Any]) -> pd.DataFrame:
    """The detokenisation probe of ``m`` on the chapter's ``detok_languages``
    (:func:`~hybridlib.findings.first_fa.measures.word_probe`)."""
    texts = alignment.udhr_texts(params["detok_languages"], DETOK_ARTICLES)
    return measures.word_probe(
        m,
        [t for lang_texts in texts.values() for t in lang_texts],
        max_tokens=params["detok_max_tokens"],
        min_count=params["detok_min_count"],
    )


def layer0_gain(probe: pd.DataFrame) -> float:
    """Within-word minus across-word mixer gain at layer 0 of a :func:`word_probe` frame."""
    gain = probe.query("layer == 0").set_index("task")["mixer_gain"]
    return float(gain["within"] - gain["across"])


def detok_margins(
    models: Mapping[str, Sequence[Probed]], params: Mapping[str, Any]
) -> tuple[list[float] | None, str]:
    """The detokenisation rule's margins, one per replicate both students have: the FA-at-0 student's
    :func:`layer0_gain` minus the GDN-at-0 student's (:func:`~.report.detokenisation_pair`), and what they compare;
    None where there is no such pair."""
    gdn = {label: reps[0].fa_layers for label, reps in models.items() if reps[0].kind == "hybrid GDN"}
    fa0, gdn0 = report.detokenisation_pair(gdn)
    if fa0 is None or gdn0 is None:
        return None, "needs a GDN student with FA at layer 0 and one with GDN at layer 0"
    margins = [
        layer0_gain(word_probe(f, params)) - layer0_gain(word_probe(g, params))
        for f, g in zip(models[fa0], models[gdn0])
    ]
    return margins, f"{fa0} (FA at layer 0) minus {gdn0} (GDN at layer 0)"


def judge(
    teacher: Probed,
    models: Mapping[str, Sequence[Probed]],
    params: Mapping[str, Any],
    *,
    swa_window: int,
    swa_share: float,
) -> list[dict[str, Any]]:
    """The chapter's rows on ``models`` (:func:`~.report.judge_events`, :func:`~.report.judge_locality`,
    :func:`~.report.judge_detokenisation`); ``swa_window`` and ``swa_share`` as the event rules take them."""
    boot = {"n_boot": params["bootstrap"], "seed": params["seed"]}
    swa = next((label for label, reps in models.items() if reps[0].kind == "hybrid SWA"), None)
    rows = report.judge_events(
        event_students(models, params), swa=swa, swa_window=swa_window, swa_share=swa_share, **boot
    )
    gdn = [label for label, reps in models.items() if reps[0].kind == "hybrid GDN"]
    rows += report.judge_locality(locality_distances(locality_table(teacher, models, params), gdn), **boot)
    rows.append(report.judge_detokenisation(*detok_margins(models, params), **boot))
    return rows


def budget_rows(
    teacher: Probed,
    budget: BudgetStudents,
    params: Mapping[str, Any],
    *,
    swa_window: int,
    swa_share: float,
) -> list[dict[str, Any]]:
    """:func:`judge` on the layout chapter's largest-budget students (``budget``,
    :func:`~hybridlib.findings.students.budget_students`), ids qualified by the budget
    (:func:`~hybridlib.findings.students.at_budget`); [] without those students."""
    if not budget.models:
        return []
    rows = judge(teacher, budget.models, params, swa_window=swa_window, swa_share=swa_share)
    return at_budget(rows, budget.tokens)
