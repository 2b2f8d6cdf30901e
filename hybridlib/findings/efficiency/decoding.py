"""Serving-style decoding of whole models: a pre-allocated cache per layer and a step a CUDA graph can capture.

``StaticDecoder(model, batch, capacity)`` wraps a Hugging Face Llama / Qwen3 / Gemma 3 causal LM, a Gated DeltaNet
student (:func:`hybridlib.convert.convert_to_hybrid`) or a LoLCATs model
(:func:`hybridlib.findings.lolcats.linearize.linearize`) and gives every layer a fixed-size cache allocated once:

- softmax attention (the teacher's module, kept layers of a hybrid): keys and values ``[B, H_kv, capacity, D]``,
  or a ring of ``sliding_window`` slots for Gemma 3's sliding layers (token p in slot p % W);
- Gated DeltaNet: the three short-convolution windows ``[B, C, conv_size - 1]`` and the recurrent state
  ``[B, H, K, V]`` (float32), updated by the layer's own forward (fla's fused recurrent kernel for one token on
  CUDA, the chunked PyTorch recurrence on CPU) and copied back in place;
- window + linear: a :class:`kernels.WindowLinearRing` (window keys/values/features + linear state) updated by
  :func:`kernels.window_linear_decode_step`.

The decoder layers, norms, MLPs, embeddings and LM head are the model's own modules (each decoder layer is run
through a shallow copy whose ``self_attn`` is the cache-owning mixer; the model itself is not changed).
:meth:`StaticDecoder.prefill` fills the caches from a prompt in chunks (host-side positions);
:meth:`StaticDecoder.step` decodes one token at the position held in a device tensor, so the step launches
the same kernels on the same buffers every time: :class:`DecodeLoop` replays it from a CUDA graph on CUDA
(eager on CPU), with greedy argmax inside the step and no host synchronisation.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right
from transformers import PreTrainedModel

from hybridlib.convert import GatedDeltaNetAttention
from hybridlib.models.linearized import LinearizedAttention
from kernels import WindowLinearRing, window_linear_attention, window_linear_decode_step
from kernels.layers.gated_deltanet import GatedDeltaNetState

MODES = ("eager", "graph")


@dataclass
class Clock:
    """Where the decoder is: ``start`` (host int) while prefilling a chunk, else the device ``position``
    (0-dim int64) of the token being decoded."""

    position: torch.Tensor
    start: int | None = None


class _Mixer(nn.Module):
    """Stands in for a layer's ``self_attn`` (HF call signature); owns that layer's cache."""

    def __init__(self, clock: Clock):
        super().__init__()
        self.clock = clock

    def forward(
        self, hidden_states: torch.Tensor, position_embeddings=None, attention_mask=None, **kwargs
    ) -> tuple[torch.Tensor, None]:
        if self.clock.start is not None:
            return self.prefill(hidden_states, position_embeddings, self.clock.start), None
        return self.step(hidden_states, position_embeddings, self.clock.position), None

    def prefill(self, h: torch.Tensor, pe, start: int) -> torch.Tensor:
        """Mix a chunk ``h`` [B, T, d] that starts at position ``start`` (host int) and cache it: [B, T, d]."""
        raise NotImplementedError

    def step(self, h: torch.Tensor, pe, position: torch.Tensor) -> torch.Tensor:
        """Mix one token ``h`` [B, 1, d] at the device ``position`` and cache it, capturably: [B, 1, d]."""
        raise NotImplementedError

    def buffers_(self) -> tuple[torch.Tensor, ...]:
        """The cache tensors (allocated once)."""
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        """Bytes this layer's cache holds."""
        return sum(t.numel() * t.element_size() for t in self.buffers_())

    def zero_(self) -> None:
        for t in self.buffers_():
            t.zero_()

    def workspace_bytes(self, tokens: int) -> int:
        """Largest temporary a call on ``tokens`` new tokens allocates beyond linear-in-T activations (for the
        simulated memory cap)."""
        return 0


class KVMixer(_Mixer):
    """Softmax attention with keys/values in fixed slots: ``capacity`` slots, or ``sliding_window`` slots used as
    a ring for a sliding layer. ``attn``: the teacher's Llama / Qwen3 / Gemma 3 attention module."""

    def __init__(self, attn: nn.Module, batch: int, capacity: int, clock: Clock, device, dtype):
        super().__init__(clock)
        if getattr(attn, "attn_logit_softcapping", None) is not None:
            raise NotImplementedError("attention logit soft-capping is not supported by the static decoder")
        config = attn.config
        self.attn, self.head_dim, self.scaling = attn, attn.head_dim, attn.scaling
        self.n_heads, self.n_kv = config.num_attention_heads, config.num_key_value_heads
        window = getattr(attn, "sliding_window", None)
        self.ring = window is not None and window < capacity
        self.size = window if self.ring else capacity
        self._rope = importlib.import_module(type(attn).__module__).apply_rotary_pos_emb
        shape = (batch, self.n_kv, self.size, self.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)

    def buffers_(self) -> tuple[torch.Tensor, ...]:
        return self.k, self.v

    def workspace_bytes(self, tokens: int) -> int:
        keys = self.size - 1 + tokens if self.ring else self.size
        return self.k.shape[0] * self.n_kv * tokens * keys * 4  # one GQA group's float32 scores at a time

    def _qkv(self, h: torch.Tensor, pe) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [B, H, T, D], k and v [B, H_kv, T, D] (normed if the teacher norms them, after RoPE)."""
        attn, shape = self.attn, (*h.shape[:-1], -1, self.head_dim)
        q, k, v = (p(h).view(shape).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
        if hasattr(attn, "q_norm"):
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = self._rope(q, k, *pe)
        return q, k, v

    def prefill(self, h: torch.Tensor, pe, start: int) -> torch.Tensor:
        B, T, _ = h.shape
        q, k, v = self._qkv(h, pe)
        end = start + T
        if not self.ring:
            if end > self.size:
                raise ValueError(f"prefill to {end} tokens exceeds the cache capacity {self.size}")
            self.k[:, :, start:end], self.v[:, :, start:end] = k, v
            keys, values = self.k[:, :, :end], self.v[:, :, :end]
            mask = None if start == 0 else causal_lower_right(T, end)
        else:
            W = self.size
            past = torch.arange(max(0, start - W + 1), start, device=h.device)
            keys, values = (
                torch.cat([buf.index_select(2, past % W), new], 2) for buf, new in ((self.k, k), (self.v, v))
            )
            k_pos = torch.cat([past, torch.arange(start, end, device=h.device)])
            q_pos = torch.arange(start, end, device=h.device)[:, None]
            mask = (k_pos[None] <= q_pos) & (k_pos[None] > q_pos - W)
            last = torch.arange(max(start, end - W), end, device=h.device)
            self.k.index_copy_(2, last % W, k[:, :, last - start])
            self.v.index_copy_(2, last % W, v[:, :, last - start])
        # one call per position in the GQA group (query heads g, g + G, ...; HF's repeat_kv order): the keys
        # and values are read in place, never repeated to every query head
        groups = self.n_heads // self.n_kv
        y = torch.empty_like(q)
        for g in range(groups):
            y[:, g::groups] = F.scaled_dot_product_attention(
                q[:, g::groups].contiguous(),
                keys,
                values,
                attn_mask=mask,
                is_causal=mask is None,
                scale=self.scaling,
            )
        return self.attn.o_proj(y.transpose(1, 2).reshape(B, T, -1))

    def step(self, h: torch.Tensor, pe, position: torch.Tensor) -> torch.Tensor:
        B = h.shape[0]
        q, k, v = self._qkv(h, pe)  # [B, H, 1, D], [B, H_kv, 1, D]
        slot = (position % self.size).reshape(1)
        self.k.index_copy_(2, slot, k)
        self.v.index_copy_(2, slot, v)
        # slots 0..position are written (all of them once a ring has wrapped: it holds the last W tokens)
        valid = torch.arange(self.size, device=h.device) <= position
        q = q.view(B, self.n_kv, -1, self.head_dim)  # query heads grouped by their key/value head
        f32 = torch.promote_types(self.k.dtype, torch.float32)  # softmax in float32 at least
        scores = (q @ self.k.transpose(-1, -2)).to(f32) * self.scaling  # [B, H_kv, groups, slots]
        probs = scores.masked_fill(~valid, float("-inf")).softmax(-1).to(self.v.dtype)
        y = (probs @ self.v).reshape(B, 1, -1)
        return self.attn.o_proj(y)


class GDNMixer(_Mixer):
    """A Gated DeltaNet layer (``GatedDeltaNetAttention``) with its conv windows and state in fixed buffers."""

    def __init__(self, attn: GatedDeltaNetAttention, batch: int, clock: Clock, device, dtype):
        super().__init__(clock)
        gdn = self.gdn = attn.gdn
        key, value, past = gdn.num_heads * gdn.head_k_dim, gdn.num_heads * gdn.head_v_dim, gdn.conv_size - 1
        z = lambda *shape, dt=dtype: torch.zeros(shape, device=device, dtype=dt)
        state_dtype = torch.promote_types(dtype, torch.float32)
        self.conv = (z(batch, key, past), z(batch, key, past), z(batch, value, past))
        self.recurrent = z(batch, gdn.num_heads, gdn.head_k_dim, gdn.head_v_dim, dt=state_dtype)

    def buffers_(self) -> tuple[torch.Tensor, ...]:
        return (*self.conv, self.recurrent)

    def step(self, h: torch.Tensor, pe, position: torch.Tensor) -> torch.Tensor:
        state = GatedDeltaNetState(*self.conv, recurrent=self.recurrent)
        out = self.gdn(h, cache=state)
        for buf, new in zip(self.buffers_(), (state.conv_q, state.conv_k, state.conv_v, state.recurrent)):
            buf.copy_(new)
        return out

    def prefill(self, h: torch.Tensor, pe, start: int) -> torch.Tensor:
        return self.step(h, pe, self.clock.position)  # the recurrence does not depend on the position


class WindowLinearMixer(_Mixer):
    """A LoLCATs window + linear layer (:class:`LinearizedAttention`) on a :class:`WindowLinearRing`."""

    def __init__(self, attn: LinearizedAttention, batch: int, clock: Clock, device, dtype):
        super().__init__(clock)
        if attn.use_softmax:
            raise ValueError("the layer runs as softmax attention (use_softmax=True); decode it as a teacher")
        self.attn = attn
        d = attn.head_dim
        like = attn.attn.q_proj.weight  # probe the feature map where its weights live (device may be "meta")
        features = attn.phi_k(
            torch.zeros(1, 1, attn.num_heads, d, dtype=like.dtype, device=like.device)
        ).shape[-1]
        self.ring = WindowLinearRing.empty(
            batch,
            attn.num_heads,
            d,
            d,
            features,
            window=attn.window,
            terraced=attn.terraced,
            dtype=dtype,
            state_dtype=torch.promote_types(dtype, torch.float32),
            device=device,
        )

    def buffers_(self) -> tuple[torch.Tensor, ...]:
        r = self.ring
        return r.k, r.v, r.k_phi, r.kv, r.z

    def _common(self, h: torch.Tensor, pe):
        a = self.attn
        q, k, v = a.qkv(h, pe)  # [B, T, H, D]
        return q, k, v, a.phi_q(q), a.phi_k(k), torch.sigmoid(a.window_factors), a.attn.scaling

    def prefill(self, h: torch.Tensor, pe, start: int) -> torch.Tensor:
        q, k, v, qf, kf, gamma, scale = self._common(h, pe)
        y, state = window_linear_attention(
            q,
            k,
            v,
            qf,
            kf,
            window=self.ring.window,
            terraced=self.ring.terraced,
            softmax_weight=gamma,
            scale=scale,
            state=self.ring.to_state(start),
            output_state=True,
        )
        self.ring.load_(state)
        return self.attn.attn.o_proj(y.flatten(2))

    def step(self, h: torch.Tensor, pe, position: torch.Tensor) -> torch.Tensor:
        q, k, v, qf, kf, gamma, scale = self._common(h, pe)
        y = window_linear_decode_step(
            q[:, 0],
            k[:, 0],
            v[:, 0],
            qf[:, 0],
            kf[:, 0],
            self.ring,
            position,
            softmax_weight=gamma,
            scale=scale,
        )
        return self.attn.attn.o_proj(y.reshape(h.shape[0], 1, -1))


def _mixer(attn: nn.Module, batch: int, capacity: int, clock: Clock, device, dtype) -> _Mixer:
    if isinstance(attn, GatedDeltaNetAttention):
        return GDNMixer(attn, batch, clock, device, dtype)
    if isinstance(attn, LinearizedAttention):
        return WindowLinearMixer(attn, batch, clock, device, dtype)
    if all(hasattr(attn, p) for p in ("q_proj", "k_proj", "v_proj", "o_proj", "scaling")):
        return KVMixer(attn, batch, capacity, clock, device, dtype)
    raise NotImplementedError(f"no static cache for a {type(attn).__name__} layer")


def _with_mixer(layer: nn.Module, mixer: _Mixer) -> nn.Module:
    """A shallow copy of decoder ``layer`` (same parameters) whose ``self_attn`` is ``mixer``."""
    clone = copy.copy(layer)
    clone._modules = {**layer._modules, "self_attn": mixer}
    return clone


class StaticDecoder:
    """A model plus a pre-allocated cache for ``batch`` sequences of up to ``capacity`` tokens (module docstring).

    ``device="meta"`` allocates nothing: the caches' sizes (:attr:`cache_nbytes`) before committing memory.
    """

    def __init__(
        self, model: PreTrainedModel, batch: int, capacity: int, device: torch.device | str | None = None
    ):
        for name, value in (("batch", batch), ("capacity", capacity)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        weight = next(model.parameters())
        self.model, self.batch, self.capacity = model, batch, capacity
        self.device = torch.device(device) if device is not None else weight.device
        self.dtype = weight.dtype
        self.config = model.config.get_text_config()
        self.clock = Clock(torch.zeros((), dtype=torch.long, device=self.device))
        self.mixers = [
            _mixer(layer.self_attn, batch, capacity, self.clock, self.device, self.dtype)
            for layer in model.model.layers
        ]
        self.layers = [_with_mixer(layer, m) for layer, m in zip(model.model.layers, self.mixers)]
        self.layer_types = list(
            getattr(self.config, "layer_types", None) or ["full_attention"] * len(self.layers)
        )
        rotary = model.model.rotary_emb
        self._typed_rope = "layer_type" in inspect.signature(rotary.forward).parameters
        self.length = 0  # tokens in the cache (host-side bookkeeping of prefill; decode loops add their own)

    @property
    def cache_nbytes(self) -> int:
        """Bytes of every layer's cache (allocated once, whatever the position)."""
        return sum(m.nbytes for m in self.mixers)

    def workspace_bytes(self, tokens: int) -> int:
        """Largest attention-score temporary of one call on ``tokens`` tokens (simulated memory cap)."""
        return max((m.workspace_bytes(tokens) for m in self.mixers), default=0)

    def reset(self) -> None:
        """Empty every cache (a new batch of sequences)."""
        for m in self.mixers:
            m.zero_()
        self.clock.position.zero_()
        self.length = 0

    def _forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """Logits [B, vocab] of the last position of ``input_ids`` [B, T] at ``position_ids`` [1, T]."""
        inner = self.model.model
        h = inner.embed_tokens(input_ids)
        rope = {
            t: inner.rotary_emb(h, position_ids, *([t] if self._typed_rope else []))
            for t in set(self.layer_types)
        }
        for layer, kind in zip(self.layers, self.layer_types):
            h = layer(h, position_embeddings=rope[kind], attention_mask=None, position_ids=position_ids)
        logits = self.model.lm_head(inner.norm(h[:, -1:]))[:, 0]
        cap = getattr(self.config, "final_logit_softcapping", None)
        return logits if cap is None else torch.tanh(logits / cap) * cap

    @torch.no_grad()
    def prefill(self, input_ids: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
        """Append prompt ids [B, T] to the caches in pieces of ``chunk`` tokens (None: one piece); the last
        position's logits [B, vocab]."""
        if input_ids.shape[0] != self.batch:
            raise ValueError(f"input_ids holds {input_ids.shape[0]} sequences, the cache {self.batch}")
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
            raise ValueError(f"chunk must be a positive int or None, got {chunk!r}")
        if self.length + input_ids.shape[1] > self.capacity:
            raise ValueError(
                f"{self.length} + {input_ids.shape[1]} tokens exceed the capacity {self.capacity}"
            )
        try:
            for piece in input_ids.split(chunk or input_ids.shape[1], dim=1):
                self.clock.start = self.length
                pos = torch.arange(self.length, self.length + piece.shape[1], device=self.device)[None]
                logits = self._forward(piece, pos)
                self.length += piece.shape[1]
        finally:
            self.clock.start = None
        self.clock.position.fill_(self.length)
        return logits

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Decode ``tokens`` [B, 1] at the device position and advance it: logits [B, vocab]. No host sync,
        no allocation that outlives the call; the caller keeps ``length`` <= ``capacity``."""
        logits = self._forward(tokens, self.clock.position.view(1, 1))
        self.clock.position.add_(1)
        return logits


class DecodeLoop:
    """Greedy decoding from a prefilled :class:`StaticDecoder`: each step feeds the previous argmax.

    ``mode="graph"`` (CUDA only) runs ``warmup`` eager steps on a side stream, captures one step in a CUDA graph
    and replays it; ``"eager"`` calls the step. Either way :meth:`run` issues ``n`` steps without synchronising;
    generated ids are written to :attr:`tokens` [B, capacity] at their positions.
    """

    def __init__(self, decoder: StaticDecoder, logits: torch.Tensor, mode: str = "eager", warmup: int = 2):
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}; allowed: {', '.join(MODES)}")
        if mode == "graph" and decoder.device.type != "cuda":
            raise ValueError(f"mode='graph' needs a CUDA model, got device {decoder.device}")
        self.decoder, self.mode = decoder, mode
        self.token = logits.argmax(-1, keepdim=True)
        self.tokens = torch.zeros(decoder.batch, decoder.capacity, dtype=torch.long, device=decoder.device)
        self.graph = None
        if mode == "graph":
            self._warm_and_capture(warmup)

    def _body(self) -> None:
        position = self.decoder.clock.position.reshape(1)
        self.tokens.index_copy_(1, position, self.token)
        logits = self.decoder.step(self.token)
        self.token.copy_(logits.argmax(-1, keepdim=True))

    def _advance(self, n: int) -> None:
        if self.decoder.length + n > self.decoder.capacity:
            raise ValueError(
                f"{n} more steps exceed the capacity {self.decoder.capacity} "
                f"({self.decoder.length} tokens cached)"
            )
        self.decoder.length += n

    def _warm_and_capture(self, warmup: int) -> None:
        self._advance(warmup)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(warmup):
                self._body()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(self.graph), torch.no_grad():
                self._body()
        except RuntimeError as err:  # out of memory while capturing may surface as a capture error
            if isinstance(err, torch.OutOfMemoryError) or isinstance(err.__context__, torch.OutOfMemoryError):
                raise torch.OutOfMemoryError(f"out of memory while capturing the decode step: {err}") from err
            raise

    @torch.no_grad()
    def run(self, n: int) -> None:
        """Issue ``n`` decoding steps (asynchronously on CUDA)."""
        self._advance(n)
        for _ in range(n):
            if self.graph is not None:
                self.graph.replay()
            else:
                self._body()

    def generated(self, start: int, n: int) -> torch.Tensor:
        """Ids [B, n] decoded at positions ``start .. start + n - 1`` (synchronises)."""
        return self.tokens[:, start : start + n]
