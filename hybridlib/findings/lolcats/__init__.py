"""LoLCATs (Zhang et al., ICLR 2025) on Hugging Face Llama / Gemma 3 models: linearised attention
(``linearize``, with the module :mod:`hybridlib.models.linearized`, which the efficiency chapter's decoder shares),
attention transfer (``transfer``), LoRA (``lora``), the ablation grid
(``ablation``), evaluations (``evals``, ``passkey``) and decoding throughput (``throughput``).
The chapter's parameters and the paper's numbers are in ``spec``."""
