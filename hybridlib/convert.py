"""Teacher -> hybrid student conversion (the paper's Algorithm 1) for Llama, Qwen3 and Gemma 3 models.

``convert_to_hybrid`` deep-copies a Hugging Face causal LM and swaps the ``self_attn`` module of every
layer outside the layout's FA set for a stand-in with the same call signature
(``forward(hidden_states, position_embeddings, attention_mask, cache, **kw) -> (output, None)``):

- ``mixer="gdn"``: :class:`GatedDeltaNetAttention`, a Gated DeltaNet initialised from the teacher layer:
  ``q_proj <- W_Q``; ``k_proj, v_proj <- W_K, W_V`` with each grouped K/V head cloned to the query heads
  it serves (GQA, HF's ``repeat_kv`` order); ``o_proj <- W_O``; identity short convolutions (kernel
  ``[0, 0, 0, 1]``); ``A_log = -4`` (decay ``exp(-e^-4 softplus(.))``, near no-forgetting);
  ``dt ~ log-uniform[1e-3, 1e-1]`` and ``dt_bias = softplus^-1(dt)`` - fla's / Mamba-2's initialisation,
  which we read the paper's "dt_bias sampled in [log 1e-3, log 1e-1]" to mean (so
  ``dt_bias`` lies in ``[softplus^-1(1e-3), softplus^-1(1e-1)] = [-6.907, -2.252]``); the new
  ``a_proj, b_proj, g_proj`` ~ N(0, ``config.initializer_range``); output norm weights 1.
  Qwen3 / Gemma 3 q_norm and k_norm: GDN L2-normalises q and k itself, which makes the RMS division
  redundant; their per-channel gains (``w``, Gemma ``1 + w``) are folded into the rows of ``q_proj`` /
  ``k_proj`` so the normalised directions match the teacher's (exactly, up to the SiLU after the conv).
- ``mixer="swa"``: :class:`SlidingWindowAttention`, the teacher's own attention module (weights kept)
  with its mask narrowed so each query sees only the last ``swa_window`` keys, itself included (HF's
  convention) - the sliding-window control.

FA layers keep the teacher's module and tensors (Gemma 3's own sliding layers stay sliding if the layout
keeps them). The LM head is untied into its own trainable copy. The layout and mixer are stored in the
config (``hybrid_layout``, ``hybrid_mixer``, ``hybrid_swa_window``, ``hybrid_conv_size``) so
:func:`load_hybrid` rebuilds a student saved with ``save_pretrained``.

GDN layers ignore the teacher's attention mask: use unpadded or right-padded batches (causality makes right
padding exact for the real tokens); left padding is not supported through the HF model.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel
from transformers.cache_utils import Cache, LinearAttentionLayer
from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

from hybridlib.layouts import Layout
from kernels.layers.gated_deltanet import GatedDeltaNet, GatedDeltaNetState, inverse_softplus, sample_dt

SUPPORTED_MODEL_TYPES = ("llama", "qwen3", "gemma3_text")
MIXERS = ("gdn", "swa")
SWA_IMPLEMENTATIONS = ("eager", "sdpa")
A_LOG_INIT = -4.0
DT_RANGE = (1e-3, 1e-1)
RECURRENT_PATTERN = re.escape(".self_attn.gdn.")  # names of the GDN mixers' parameters (the recurrent group)


class GatedDeltaNetAttention(nn.Module):
    """Stands in for a HF attention module; the mixer is ``self.gdn`` (parameter names ``*.self_attn.gdn.*``).

    With a HF ``Cache`` the layer's cache slot becomes a ``LinearAttentionLayer`` holding the three conv
    states (state_idx 0-2) and the recurrent state, so ``generate`` decodes token by token.
    """

    def __init__(self, config, layer_idx: int, conv_size: int):
        super().__init__()
        self.layer_idx = layer_idx
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.gdn = GatedDeltaNet(
            config.hidden_size,
            config.num_attention_heads,
            head_dim,
            head_dim,
            conv_size,
            norm_eps=config.rms_norm_eps,
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        cache = cache if cache is not None else kwargs.get("past_key_values")  # transformers < 5.24 name
        if cache is None:
            return self.gdn(hidden_states), None
        state = self._load_state(cache)
        output = self.gdn(hidden_states, cache=state)
        self._store_state(cache, state)
        return output, None

    def _load_state(self, cache: Cache) -> GatedDeltaNetState:
        if not isinstance(cache.layers[self.layer_idx], LinearAttentionLayer):
            cache.layers[self.layer_idx] = LinearAttentionLayer(number_of_states=3)
        convs = [cache.get_conv_state(self.layer_idx, i) for i in range(3)]
        return GatedDeltaNetState(*convs, recurrent=cache.get_recurrent_state(self.layer_idx))

    def _store_state(self, cache: Cache, state: GatedDeltaNetState) -> None:
        for i, conv in enumerate((state.conv_q, state.conv_k, state.conv_v)):
            cache.update_conv_state(conv.detach(), self.layer_idx, state_idx=i)
        cache.update_recurrent_state(state.recurrent.detach(), self.layer_idx)


class SlidingWindowAttention(nn.Module):
    """The teacher's attention module ``self.attn`` with each query restricted to the last ``window`` keys."""

    def __init__(self, attn: nn.Module, window: int):
        super().__init__()
        self.attn, self.window, self.layer_idx = attn, window, attn.layer_idx

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        cache_seen = cache if cache is not None else kwargs.get("past_key_values")  # transformers < 5.24 name
        past = cache_seen.get_seq_length(self.layer_idx) if cache_seen is not None else 0
        if past and cache_seen.is_sliding[self.layer_idx]:
            raise NotImplementedError("mixer='swa' cannot decode on a layer whose cache is already sliding")
        mask = self._window_mask(attention_mask, hidden_states, past)
        return self.attn(
            hidden_states, position_embeddings=position_embeddings, attention_mask=mask, cache=cache, **kwargs
        )

    def _window_mask(
        self, incoming: torch.Tensor | None, hidden_states: torch.Tensor, past: int
    ) -> torch.Tensor:
        """Bool (sdpa) or additive float (eager) mask [B|1, 1, T, past + T]: causal, within the window, and
        allowed by ``incoming``."""
        T, device = hidden_states.shape[1], hidden_states.device
        q_pos = torch.arange(past, past + T, device=device)[:, None]
        k_pos = torch.arange(past + T, device=device)[None, :]
        allowed = (k_pos <= q_pos) & (q_pos - k_pos < self.window)
        if incoming is None:
            if self.attn.config._attn_implementation == "sdpa":
                return allowed[None, None]
            return torch.zeros(allowed.shape, dtype=hidden_states.dtype, device=device).masked_fill(
                ~allowed, torch.finfo(hidden_states.dtype).min
            )[None, None]
        allowed = allowed[..., -incoming.shape[-1] :]
        if incoming.dtype == torch.bool:
            return incoming & allowed
        return incoming.masked_fill(~allowed, torch.finfo(incoming.dtype).min)


def convert_to_hybrid(
    teacher: PreTrainedModel,
    layout: Layout | Sequence[int],
    mixer: str = "gdn",
    *,
    swa_window: int = 64,
    conv_size: int = 4,
    seed: int = 0,
) -> PreTrainedModel:
    """Return a new student: ``teacher`` deep-copied, non-FA layers' attention replaced by ``mixer``.

    ``layout``: a :class:`Layout` or a list of FA layer indices; ``mixer``: ``"gdn"`` or ``"swa"``;
    ``swa_window``: keys each query sees in ``"swa"`` layers; ``seed``: for the new GDN parameters.
    """
    layout = _check_arguments(teacher.config, layout, mixer, swa_window, conv_size)
    student = copy.deepcopy(teacher)
    _record_hybrid_config(student.config, layout, mixer, swa_window, conv_size)
    generator = torch.Generator().manual_seed(seed)
    for idx in layout.recurrent_layers:
        decoder_layer = _decoder_layers(student)[idx]
        teacher_attn = decoder_layer.self_attn
        decoder_layer.self_attn = _new_mixer(student.config, teacher_attn, idx)
        if mixer == "gdn":
            _init_gdn_from_attention(decoder_layer.self_attn.gdn, teacher_attn, student.config, generator)
            decoder_layer.self_attn.to(
                device=teacher_attn.q_proj.weight.device, dtype=teacher_attn.q_proj.weight.dtype
            )
    _untie_lm_head(student)
    return student


def load_hybrid(
    path: str | Path, dtype: torch.dtype | None = None, attn_implementation: str | None = None
) -> PreTrainedModel:
    """Rebuild a student saved with ``save_pretrained`` from its config and load its weights (strict).

    ``attn_implementation`` (HF's; e.g. "eager", "sdpa") is not stored in a config: pass it again.
    """
    path = Path(path)
    config = AutoConfig.from_pretrained(path)
    if getattr(config, "hybrid_mixer", None) is None:
        raise ValueError(
            f"{path} holds no hybrid student: its config has no 'hybrid_mixer' / 'hybrid_layout'"
        )
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    layout = Layout.from_list(config.num_hidden_layers, config.hybrid_layout)
    for idx in layout.recurrent_layers:
        decoder_layer = _decoder_layers(model)[idx]
        decoder_layer.self_attn = _new_mixer(config, decoder_layer.self_attn, idx)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path}")
    state = {k: v for f in files for k, v in load_file(f).items()}
    model.load_state_dict(state, strict=True, assign=True)
    if dtype is not None:
        model.to(dtype)
    return model.eval()


def is_recurrent_parameter(name: str) -> bool:
    """True for a parameter of a GDN mixer (:data:`RECURRENT_PATTERN` in the name); a trainer predicate."""
    return re.search(RECURRENT_PATTERN, name) is not None


def recurrent_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """The GDN mixers' parameters by name (the paper's recurrent learning-rate group)."""
    return {n: p for n, p in model.named_parameters() if is_recurrent_parameter(n)}


def _check_arguments(config, layout, mixer: str, swa_window: int, conv_size: int) -> Layout:
    if config.model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"teacher model_type={config.model_type!r} is not supported; allowed: {SUPPORTED_MODEL_TYPES}"
        )
    if mixer not in MIXERS:
        raise ValueError(f"mixer={mixer!r} is not allowed; choose one of {MIXERS}")
    if mixer == "swa" and config._attn_implementation not in SWA_IMPLEMENTATIONS:
        raise ValueError(
            f"mixer='swa' needs attn_implementation in {SWA_IMPLEMENTATIONS}, "
            f"got {config._attn_implementation!r}"
        )
    if not isinstance(swa_window, int) or swa_window < 1:
        raise ValueError(f"swa_window must be a positive integer, got {swa_window!r}")
    if not isinstance(conv_size, int) or conv_size < 1:
        raise ValueError(f"conv_size must be a positive integer, got {conv_size!r}")
    if getattr(config, "attention_bias", False):
        raise ValueError("teachers with attention_bias=True are not supported (GDN projections have no bias)")
    if not isinstance(layout, Layout):
        layout = Layout.from_list(config.num_hidden_layers, layout)
    if layout.n_layers != config.num_hidden_layers:
        raise ValueError(
            f"layout has n_layers={layout.n_layers} but the teacher has {config.num_hidden_layers} layers"
        )
    return layout


def _record_hybrid_config(config, layout: Layout, mixer: str, swa_window: int, conv_size: int) -> None:
    config.hybrid_layout = list(layout.fa_layers)
    config.hybrid_layout_name = layout.name
    config.hybrid_mixer = mixer
    config.hybrid_swa_window = swa_window
    config.hybrid_conv_size = conv_size
    config.tie_word_embeddings = False


def _decoder_layers(model: PreTrainedModel) -> nn.ModuleList:
    return model.model.layers


def _untie_lm_head(model: PreTrainedModel) -> None:
    """Give the LM head its own trainable copy of the (possibly tied) embedding matrix."""
    model.lm_head.weight = nn.Parameter(model.lm_head.weight.detach().clone())


def _new_mixer(config, teacher_attn: nn.Module, layer_idx: int) -> nn.Module:
    """The (uninitialised for GDN) stand-in for ``teacher_attn`` described by ``config.hybrid_*``."""
    if config.hybrid_mixer == "swa":
        return SlidingWindowAttention(teacher_attn, config.hybrid_swa_window)
    return GatedDeltaNetAttention(config, layer_idx, config.hybrid_conv_size)


@torch.no_grad()
def _init_gdn_from_attention(gdn: GatedDeltaNet, attn: nn.Module, config, generator: torch.Generator) -> None:
    """Algorithm 1's initialisation of ``gdn`` from the teacher's ``attn`` (module doc)."""
    n_heads, n_kv = config.num_attention_heads, config.num_key_value_heads
    q_gain, k_gain = _norm_gain(getattr(attn, "q_norm", None)), _norm_gain(getattr(attn, "k_norm", None))
    gdn.q_proj.weight.copy_(_scale_heads(attn.q_proj.weight, n_heads, q_gain))
    gdn.k_proj.weight.copy_(
        _repeat_heads(_scale_heads(attn.k_proj.weight, n_kv, k_gain), n_kv, n_heads // n_kv)
    )
    gdn.v_proj.weight.copy_(_repeat_heads(attn.v_proj.weight, n_kv, n_heads // n_kv))
    gdn.o_proj.weight.copy_(attn.o_proj.weight)
    for conv in (gdn.q_conv, gdn.k_conv, gdn.v_conv):
        conv.weight.zero_()
        conv.weight[..., -1] = 1.0
    gdn.A_log.fill_(A_LOG_INIT)
    gdn.dt_bias.copy_(inverse_softplus(sample_dt(gdn.num_heads, *DT_RANGE, generator=generator)))
    for proj in (gdn.a_proj, gdn.b_proj, gdn.g_proj):
        proj.weight.copy_(torch.randn(proj.weight.shape, generator=generator) * config.initializer_range)
    gdn.o_norm.weight.fill_(1.0)


def _norm_gain(norm: nn.Module | None) -> torch.Tensor | None:
    """Per-channel gain of a q/k RMSNorm: Gemma 3 scales by ``1 + w``, Qwen3 by ``w``; ``None`` if absent."""
    if norm is None:
        return None
    return 1.0 + norm.weight.float() if isinstance(norm, Gemma3RMSNorm) else norm.weight.float()


def _scale_heads(weight: torch.Tensor, n_heads: int, gain: torch.Tensor | None) -> torch.Tensor:
    """Multiply each head's rows of ``weight`` [n_heads * d, D] by ``gain`` [d] (no-op for ``None``)."""
    if gain is None:
        return weight
    rows = weight.float().view(n_heads, -1, weight.shape[-1]) * gain[None, :, None]
    return rows.reshape(weight.shape).to(weight.dtype)


def _repeat_heads(weight: torch.Tensor, n_kv: int, n_rep: int) -> torch.Tensor:
    """[n_kv * d, D] -> [n_kv * n_rep * d, D]: KV head j serves query heads j*n_rep..(j+1)*n_rep-1."""
    return (
        weight.view(n_kv, -1, weight.shape[-1]).repeat_interleave(n_rep, dim=0).reshape(-1, weight.shape[-1])
    )
