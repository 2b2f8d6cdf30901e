"""Losses against hand-computed cases and a float64 direct formula."""

import math

import pytest
import torch

from hybridlib.losses import IGNORE_INDEX, forward_kl, next_token_ce, shift_labels

LN3 = math.log(3.0)


def _direct_kl(student: torch.Tensor, teacher: torch.Tensor, tau: float) -> torch.Tensor:
    p_t = torch.softmax(teacher.double() / tau, -1)
    return tau**2 * (p_t * (p_t.log() - torch.log_softmax(student.double() / tau, -1))).sum(-1)


def test_kl_two_tokens_by_hand():
    # token 0: p_T = [1/2, 1/2], p_S = [1/4, 3/4] -> KL = 1/2 ln 2 + 1/2 ln(2/3) = 1/2 ln(4/3); token 1: equal
    teacher = torch.tensor([[[0.0, 0.0], [1.0, 2.0]]])
    student = torch.tensor([[[0.0, LN3], [1.0, 2.0]]])
    mean, per = forward_kl(student, teacher, per_token=True)
    assert per[0, 0].item() == pytest.approx(0.5 * math.log(4 / 3), rel=1e-6)
    assert per[0, 1].item() == pytest.approx(0.0, abs=1e-7)
    assert mean.item() == pytest.approx(0.25 * math.log(4 / 3), rel=1e-6)


def test_kl_temperature_by_hand():
    # tau = 2 halves the logits -> the same two distributions as above, scaled by tau^2 = 4
    teacher = torch.tensor([[[0.0, 0.0]]])
    student = torch.tensor([[[0.0, 2 * LN3]]])
    assert forward_kl(student, teacher, tau=2.0).item() == pytest.approx(4 * 0.5 * math.log(4 / 3), rel=1e-6)


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 1000])
def test_kl_matches_float64_formula(chunk_size):
    g = torch.Generator().manual_seed(0)
    student = torch.randn(2, 5, 11, generator=g) * 3
    teacher = torch.randn(2, 5, 11, generator=g) * 3
    mask = torch.rand(2, 5, generator=g) > 0.3
    expected = _direct_kl(student, teacher, 1.5)
    mean, per = forward_kl(student, teacher, tau=1.5, chunk_size=chunk_size, mask=mask, per_token=True)
    torch.testing.assert_close(per.double(), torch.where(mask, expected, 0.0), rtol=1e-5, atol=1e-6)
    assert mean.item() == pytest.approx(expected[mask].mean().item(), rel=1e-5)


def test_kl_gradient_matches_float64_and_skips_teacher():
    g = torch.Generator().manual_seed(1)
    student = (torch.randn(3, 4, 9, generator=g) * 2).requires_grad_()
    teacher = (torch.randn(3, 4, 9, generator=g) * 2).requires_grad_()
    forward_kl(student, teacher, tau=2.0, chunk_size=5).backward()
    ref = student.detach().double().requires_grad_()
    _direct_kl(ref, teacher.detach(), 2.0).mean().backward()
    torch.testing.assert_close(student.grad.double(), ref.grad, rtol=1e-5, atol=1e-7)
    assert teacher.grad is None


def test_kl_accepts_bf16_and_is_nonnegative():
    g = torch.Generator().manual_seed(2)
    student, teacher = torch.randn(2, 2, 6, 50, generator=g).bfloat16()
    mean, per = forward_kl(student, teacher, chunk_size=4, per_token=True)
    assert mean.dtype == torch.float32 and per.dtype == torch.float32 and (per >= -1e-6).all()
    expected = _direct_kl(student.float(), teacher.float(), 1.0).mean()
    assert mean.item() == pytest.approx(expected.item(), rel=1e-4)


def test_kl_rejects_bad_input():
    x = torch.zeros(1, 2, 3)
    with pytest.raises(ValueError, match="differ"):
        forward_kl(x, torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="tau"):
        forward_kl(x, x, tau=0)
    with pytest.raises(ValueError, match="chunk_size"):
        forward_kl(x, x, chunk_size=0)


def test_ce_by_hand_and_uniform_bound():
    # p = [1/4, 3/4], label 1 -> -ln(3/4); the second position is ignored
    logits = torch.tensor([[[0.0, LN3], [5.0, -5.0]]])
    labels = torch.tensor([[1, IGNORE_INDEX]])
    assert next_token_ce(logits, labels).item() == pytest.approx(-math.log(0.75), rel=1e-6)
    uniform = torch.zeros(2, 3, 17)
    assert next_token_ce(uniform, torch.randint(0, 17, (2, 3))).item() == pytest.approx(
        math.log(17), rel=1e-6
    )
    with pytest.raises(ValueError, match="disagree"):
        next_token_ce(uniform, torch.zeros(2, 4, dtype=torch.long))


def test_shift_labels():
    ids = torch.tensor([[5, 6, 7]])
    assert shift_labels(ids).tolist() == [[6, 7, IGNORE_INDEX]]
