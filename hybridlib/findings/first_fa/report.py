"""The first-FA chapter's verdict rules (the hybrid paper's Findings 4-6) on replicated students.

Inputs: ``students``: label -> one :class:`~hybridlib.alignment.Alignment` per replicate (replicate
``r`` of every student shares its seeds: ``recipes.replicate_seeds``), all on the same UDHR articles. The unit
of replication is a distilled student; intervals resample replicates, then articles within them (jointly over
languages and over the models a statistic compares), and are widened to the t interval on the replicates
(:func:`hybridlib.verdicts.statistic_bootstrap`).

**Jump profile.** Per layer ``l`` the parallel ``attn_delta`` SoftCKA minus the mean of its neighbours (``l +- 1``
that exist), averaged over languages (as ``alignment.jump_profile``). An *event* is a large jump of either sign
(the paper's spikes are positive in some hybrids and negative in others), so the rules compare ``|jump|``.

Rules (the paper gives no sizes comparable across models, so every tolerance is ``any_magnitude``):

- **largest event at the first FA layer** (per GDN student): ``|jump(f)| - max_{l != f} |jump(l)|`` above 0, ``f``
  the student's first FA layer. Not tested when ``f = 0``: the teacher's layer 0 is full attention too, so an
  event there says nothing about hybrids.
- **larger than the SWA student's** (GDN students whose first FA layer matches the SWA student's):
  ``|jump_GDN(f)| - |jump_SWA(f)|`` above 0. Not tested unless the window cuts the context of at least half of the
  compared states (:func:`beyond_window`; a state within the first ``window`` tokens sees its whole context, so
  short probes make the "sliding-window" student a full-attention one).
- **no event in the SWA student where the GDN student has one**: the SWA student's ``|jump(f)| - max_{l != f}
  |jump(l)|`` below 0 (same precondition). The paper's claim is a contrast, so it is not tested unless the event
  rule is *reproduced* or *direction only* for every GDN student with the same first FA layer (at least one). This
  precondition was added after the H200 run of 2026-11-30, which it also judges (issue 47).
- **FA layers attend more locally** (Finding 6): mean attention distance of a GDN student's FA layers minus the
  teacher's at the same layers (tokens), averaged over the FA layers, below 0; one value per replicate.
- **detokenisation** (the paper's untested hypothesis; not in the chapter verdict): at layer 0, the probe's
  within-word minus across-word mixer gain of the FA-at-0 student minus that of the GDN-at-0 student, above 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hybridlib.alignment import REFERENCE, Alignment, pair_lengths
from hybridlib.models import ModelCard, encode
from hybridlib.verdicts import (
    Precondition,
    Rule,
    Tolerance,
    Verdict,
    binds,
    established,
    statistic_bootstrap,
)

SIGNAL = "attn_delta"
UNIT = "distilled student (data-order and model-init seed)"
_NO_SIZE = (
    "the paper shows where the event is, in pre-trained models 10-200x larger, not a size comparable here"
)

EVENT_RULE = Rule(
    "the first full-attention layer of a GDN hybrid carries the largest attn_delta event of its curve",
    "|jump| at the first FA layer minus the largest |jump| elsewhere (SoftCKA)",
    UNIT,
    1,
    Tolerance.any_magnitude(_NO_SIZE),
    id="first_fa.event",
)
SWA_RULE = Rule(
    "the GDN hybrid's event at its first FA layer is larger than the SWA hybrid's at that layer",
    "|jump| GDN minus |jump| SWA at the first FA layer (SoftCKA)",
    UNIT,
    1,
    Tolerance.any_magnitude(_NO_SIZE),
    id="first_fa.event_vs_swa",
)
SWA_NONE_RULE = Rule(
    "a sliding-window hybrid has no largest event at its first full-attention layer, where a GDN hybrid has one",
    "SWA student: |jump| at the first FA layer minus the largest |jump| elsewhere (SoftCKA)",
    UNIT,
    -1,
    Tolerance.any_magnitude(_NO_SIZE),
    id="first_fa.swa_no_event",
)
LOCALITY_RULE = Rule(
    "full-attention layers in hybrids attend more locally than in the non-hybrid",
    "mean attention distance, student minus teacher, mean over FA layers (tokens)",
    UNIT,
    -1,
    Tolerance.any_magnitude(
        "the paper compares different pre-trained models; our probes are short, which bounds every distance"
    ),
    id="first_fa.locality",
)
"""The control is the teacher itself: an all-attention student distilled with the same recipe starts at the teacher's
weights, where the forward KL and its gradient are zero, so it stays the teacher (up to weight decay)."""
DETOK_RULE = Rule(
    "a full-attention layer 0 assembles words from their subword tokens (detokenises)",
    "layer-0 within - across probe gain, FA-at-0 student minus GDN-at-0 student",
    UNIT,
    1,
    Tolerance.any_magnitude("a hypothesis the paper states without a number"),
    id="first_fa.detokenisation",
)


def _stack(models: Sequence[Alignment]) -> np.ndarray:
    """``[n_models, n_langs, n_layers, n_articles, 3]`` parallel ``attn_delta`` terms of ``models`` on the
    languages they share."""
    langs = [
        lang for lang in models[0].languages if all((SIGNAL, lang, "parallel") in m.terms for m in models)
    ]
    if not langs or len({m.n_layers for m in models}) != 1:
        raise ValueError(f"{[m.label for m in models]} must share depth and at least one language")
    return np.stack([[m.get(SIGNAL, lang) for lang in langs] for m in models])


def jump_profiles(terms: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """Language-mean jump profiles ``[..., n_models, n_layers]`` from ``terms [n_models, n_langs, n_layers,
    n_articles, 3]``; ``counts [m, n_articles]`` (how often each article is drawn) adds a leading resample axis."""
    sums = terms.sum(-2) if counts is None else np.einsum("ma,...ak->m...k", counts, terms)
    scores = sums[..., 2] / np.sqrt(sums[..., 0] * sums[..., 1])  # [..., M, langs, L]
    if scores.shape[-1] < 2:
        raise ValueError("a jump profile needs at least 2 layers")
    pad = np.concatenate([scores[..., 1:2], scores, scores[..., -2:-1]], -1)  # ends: the one neighbour twice
    return (scores - (pad[..., :-2] + pad[..., 2:]) / 2).mean(-2)


def event_margin(profile: np.ndarray, layer: int) -> np.ndarray:
    """``|jump(layer)| - max_{l != layer} |jump(l)|`` over the last axis of ``profile [..., n_layers]``."""
    size = np.abs(profile)
    return size[..., layer] - np.delete(size, layer, axis=-1).max(-1)


def _counts(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """``[m, n]``: how often each of ``n`` articles is drawn in ``m`` resamples of size ``n``."""
    idx = rng.integers(0, n, size=(m, n))
    return (idx[:, :, None] == np.arange(n)).sum(1).astype(np.float64)


def _interval(replicates: Sequence[Sequence[Alignment]], statistic, *, n_boot: int, seed: int):
    """Run-level interval of ``statistic(profiles [..., n_models, n_layers]) -> [...]``; ``replicates[r]``: the
    models compared in replicate ``r``."""
    terms = [_stack(models) for models in replicates]
    values = [float(statistic(jump_profiles(t))) for t in terms]
    return statistic_bootstrap(
        values,
        lambda r, m, rng: statistic(jump_profiles(terms[r], _counts(terms[r].shape[-2], m, rng))),
        n_documents=sum(t.shape[-2] for t in terms),
        n_boot=n_boot,
        seed=seed,
    )


def compared_lengths(
    tokenizer: Any, card: ModelCard, texts: Mapping[str, Sequence[str]], max_tokens: int
) -> list[tuple[int, int]]:
    """Tokens compared on each side of every parallel pair (English first), cut as ``alignment.measure`` cuts
    them (special tokens not counted, both sides to the same fraction, the longer at most ``max_tokens``)."""
    special = set(tokenizer.all_special_ids)
    n = {
        lang: [sum(t not in special for t in encode(tokenizer, x, card)) for x in xs]
        for lang, xs in texts.items()
    }
    return [
        pair_lengths(a, b, max_tokens)
        for lang in n
        if lang != REFERENCE
        for a, b in zip(n[REFERENCE], n[lang])
    ]


def beyond_window(lengths: Sequence[tuple[int, int]], window: int) -> float:
    """Share of the compared states (both sides of every pair; ``lengths`` from :func:`compared_lengths`) at a
    position >= ``window``: the states whose sliding-window context is cut short (the others see everything)."""
    k = np.asarray(lengths, dtype=np.float64).ravel()
    return float(np.clip(k - window, 0, None).sum() / k.sum())


def swa_binds(window: int, share: float) -> Precondition:
    """The SWA control binds when its window cuts the context of at least half of the compared states."""
    return binds(
        "SWA window cuts most probed contexts",
        share >= 0.5,
        f"{share:.0%} of the compared states lie beyond the {window}-token window (needs >= 50%)",
    )


def judge_events(
    students: Mapping[str, Sequence[Alignment]],
    *,
    swa: str | None,
    swa_window: int,
    swa_share: float,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Rows for ``notebook.paper_vs_book`` (metric, paper, verdict, note, paper_claim) of the event rules: one per
    GDN student (``students`` minus ``swa``), its comparison with the SWA student ``swa`` when their first FA
    layers match, and the SWA student's own event. ``swa_share``: :func:`beyond_window` of the probes."""
    rows: list[dict[str, Any]] = []
    events: dict[int, dict[str, Verdict]] = {}  # first FA layer -> GDN student -> its event verdict
    control = swa_binds(swa_window, swa_share)
    for label, reps in students.items():
        if label == swa:
            continue
        first = reps[0].fa_layers[0]
        follows = binds(
            "first FA layer follows recurrent layers",
            first > 0,
            f"{label}'s first FA layer is {first}"
            + ("; the teacher's layer 0 is full attention too" if first == 0 else ""),
        )
        verdict = _decide(
            EVENT_RULE.at(label),
            [[al] for al in reps],
            lambda p, f=first: event_margin(p[..., 0, :], f),
            [follows],
            n_boot,
            seed,
        )
        events.setdefault(first, {})[label] = verdict
        rows.append(
            {
                "metric": f"largest attn_delta event at the first FA layer, {label}",
                "paper": "yes: + in Qwen3.5 / OLMo-Hybrid / Granite-H, - in Ring / Ling",
                "verdict": verdict,
                "note": f"first FA layer: {first}",
                "paper_claim": True,
            }
        )
        if swa is not None and students[swa][0].fa_layers[0] == first:
            pairs = [[g, s] for g, s in zip(reps, students[swa])]
            same = Precondition(
                "paired replicates",
                len(reps) == len(students[swa]),
                f"{len(reps)} GDN and {len(students[swa])} SWA replicates",
            )
            verdict = _decide(
                SWA_RULE.at(label),
                pairs,
                lambda p, f=first: np.abs(p[..., 0, f]) - np.abs(p[..., 1, f]),
                [control, same, follows],
                n_boot,
                seed,
            )
            rows.append(
                {
                    "metric": f"|event| at the first FA layer: {label} minus {swa}",
                    "paper": "GDN hybrids reorganise there, SWA hybrids (Tiny Aya, OLMo-3) do not",
                    "verdict": verdict,
                    "note": f"first FA layer: {first}",
                    "paper_claim": True,
                }
            )
    if swa is not None:
        first = students[swa][0].fa_layers[0]
        follows = binds(
            "first FA layer follows recurrent layers", first > 0, f"{swa}'s first FA layer is {first}"
        )
        verdict = _decide(
            SWA_NONE_RULE.at(swa),
            [[al] for al in students[swa]],
            lambda p: event_margin(p[..., 0, :], first),
            [control, follows, gdn_event(events.get(first, {}), first)],
            n_boot,
            seed,
        )
        rows.append(
            {
                "metric": f"largest attn_delta event at the first FA layer, {swa}",
                "paper": "no such event in SWA hybrids",
                "verdict": verdict,
                "note": f"first FA layer: {first}",
                "paper_claim": True,
            }
        )
    return rows


def gdn_event(verdicts: Mapping[str, Verdict], layer: int) -> Precondition:
    """The contrast's other side: the event rule's ``verdicts`` (GDN student -> verdict) of the GDN students whose
    first FA layer is ``layer`` show the event (:func:`~hybridlib.verdicts.established`)."""
    return established(f"GDN event at layer {layer} established", verdicts)


def _decide(
    rule: Rule,
    replicates: Sequence[Sequence[Alignment]],
    statistic,
    checks: Sequence[Precondition],
    n_boot: int,
    seed: int,
) -> Verdict:
    """The rule's verdict (the estimate is reported even when a precondition fails); nothing is measured when
    the replicates cannot be paired."""
    if any(p.name == "paired replicates" and not p.holds for p in checks):
        return rule.decide(None, checks)
    return rule.decide(_interval(replicates, statistic, n_boot=n_boot, seed=seed), checks)


def judge_locality(distances: Mapping[str, Sequence[float]], n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """Rows of the locality rule: ``distances``: GDN student -> per replicate, its FA layers' mean attention
    distance minus the teacher's at the same layers (tokens), averaged over those layers."""
    return [
        {
            "metric": f"mean attention distance of the FA layers minus the teacher's, {label} (tokens)",
            "paper": "FA layers in hybrids attend more locally",
            "note": "",
            "paper_claim": True,
            "verdict": LOCALITY_RULE.at(label).judge_repeats(list(values), n_boot=n_boot, seed=seed),
        }
        for label, values in distances.items()
    ]


def detokenisation_pair(students: Mapping[str, Sequence[int]]) -> tuple[str | None, str | None]:
    """The detokenisation rule's two students among the GDN ``students`` (label -> FA layers, in the chapter's
    order): the first with full attention at layer 0 and the first with GDN there (None where there is none)."""
    fa0 = next((label for label, layers in students.items() if 0 in layers), None)
    gdn0 = next((label for label, layers in students.items() if 0 not in layers), None)
    return fa0, gdn0


def judge_detokenisation(
    margins: Sequence[float] | None, why: str, n_boot: int = 2000, seed: int = 0
) -> dict:
    """Row of the detokenisation rule: ``margins`` per replicate (see the module docstring); None when no
    FA-at-0 / GDN-at-0 pair was probed (``why`` says so)."""
    ran = binds("an FA-at-0 and a GDN-at-0 student probed", margins is not None and len(margins) > 0, why)
    verdict = (
        DETOK_RULE.judge_repeats(list(margins), preconditions=[ran], n_boot=n_boot, seed=seed)
        if ran.holds
        else DETOK_RULE.decide(None, [ran])
    )
    return {
        "metric": "layer-0 within - across probe gain, FA-at-0 minus GDN-at-0 student",
        "paper": "hypothesis, untested",
        "verdict": verdict,
        "note": why,
        "paper_claim": False,
    }
