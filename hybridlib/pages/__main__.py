"""``python -m hybridlib.pages``: write every generated page from the committed results."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from hybridlib.pages import budgets, scoreboard, speed, wholemodel
from hybridlib.paths import REPO_ROOT


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python -m hybridlib.pages", description=__doc__).parse_args(argv)
    for path in [*wholemodel.write(), *speed.write(), *budgets.write(), *scoreboard.write()]:
        print(f"wrote {path.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
