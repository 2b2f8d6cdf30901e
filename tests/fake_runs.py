"""Hand-made :class:`~hybridlib.train.distill.DistillRun` records for the analysis and rule tests."""

from typing import Any

from hybridlib.train import distill


def distill_run(
    key: str,
    label: str,
    evals: list[dict[str, Any]],
    settings: dict[str, Any],
    path: str = "",
    tokens: int = 800,
) -> distill.DistillRun:
    """A finished run of ``tokens`` with the given validation records (``evals``) and ``settings``, cached at
    ``path`` ("" for none)."""
    return distill.DistillRun(
        key=key,
        path=path,
        layout_name=label,
        pattern="",
        settings=settings,
        evals=evals,
        train_loss=[],
        grad_norm_max=1.0,
        tokens_trained=tokens,
        tokens_per_s=1.0,
        flops_per_token=1.0,
        mfu=None,
        cpu_s_per_1m_tokens=1.0,
        wall_s=1.0,
        device="cpu",
        teacher_compiled=False,
    )
