"""The book's generated pages, each written from committed results and never edited by hand: the scoreboard and
the chapters' summary boxes (:mod:`~hybridlib.pages.scoreboard`), the whole-model page
(:mod:`~hybridlib.pages.wholemodel`) and the distillation-speed page (:mod:`~hybridlib.pages.speed`), with their
shared helpers (:mod:`~hybridlib.pages.tables`, :mod:`~hybridlib.pages.equivalence`). A page reads results and
writes only pages; no page imports another. ``python -m hybridlib.pages`` writes them all.
"""
