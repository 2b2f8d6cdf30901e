"""Train small models under one CPU setting and print a JSON fingerprint (weights hash, losses).

``python tools/cpu_spread/probe.py OUT.npz [--set-env K=V ...]``: ``--set-env`` sets variables inside the
process *after* ``import torch`` and before the first operator, to check whether a variable set where a
package starts (rather than in the shell) still takes effect. The parent script ``compare.py`` runs this
under every setting and compares the fingerprints bitwise and by max |difference|.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import torch  # imported before --set-env on purpose


def tiny_llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--set-env", action="append", default=[])
    parser.add_argument("--teacher-steps", type=int, default=12, help="steps of the tiny teacher's recipe")
    args = parser.parse_args()
    for pair in args.set_env:
        key, _, value = pair.partition("=")
        os.environ[key] = value
    from hybridlib.models.tiny import TinySpec, build_model
    from hybridlib.train import PackedBatches, TrainConfig, causal_lm_loss, train

    arrays, record = (
        {},
        {
            "capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
            "env": {
                k: os.environ.get(k)
                for k in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS")
            },
        },
    )
    # 1. tests/test_train.py's model, full batch vs micro-batches of 1
    rows = torch.randint(0, 32, (12, 8), generator=torch.Generator().manual_seed(123))
    cfg = {
        "batch_size": 4,
        "seq_len": 8,
        "steps": 6,
        "lrs": {"rest": 1e-2},
        "warmup_frac": 0.2,
        "progress": False,
    }
    for tag, extra in (("llama_full", {}), ("llama_micro1", {"micro_batch_size": 1})):
        model = tiny_llama()
        hist = train(model, PackedBatches(rows, 4, seed=0), causal_lm_loss, TrainConfig(**cfg, **extra))
        arrays[tag] = torch.cat([p.detach().flatten() for p in model.parameters()]).numpy()
        record[f"{tag}_losses"] = [r["loss"] for r in hist.train]
    # 2. the tiny teacher's architecture and optimiser on random tokens (its real recipe, fewer steps)
    spec = TinySpec()
    model = build_model(spec, spec.vocab_size)
    data = torch.randint(
        0,
        spec.vocab_size,
        (spec.batch_size * args.teacher_steps, spec.seq_len),
        generator=torch.Generator().manual_seed(1),
    )
    hist = train(
        model,
        PackedBatches(data, spec.batch_size, seed=0),
        causal_lm_loss,
        TrainConfig(
            batch_size=spec.batch_size,
            seq_len=spec.seq_len,
            steps=args.teacher_steps,
            lrs={"rest": spec.lr},
            min_lr=spec.lr / 10,
            weight_decay=0.1,
            progress=False,
        ),
    )
    arrays["teacher"] = torch.cat([p.detach().flatten() for p in model.parameters()]).numpy()
    record["teacher_losses"] = [r["loss"] for r in hist.train]
    for tag, a in arrays.items():
        record[f"{tag}_sha"] = hashlib.sha256(a.tobytes()).hexdigest()[:16]
    import numpy as np

    np.savez(args.out, **arrays)
    json.dump(record, sys.stdout)


if __name__ == "__main__":
    main()
