"""Finding 1 and the retrieval claims: token inflation, cost against context (``cost``), multilingual
needle-in-a-haystack (``needle``) and MQAR recall (``mqar``, ``models``, ``runs``), with their paper-vs-book
rules (``verdicts``). The chapter's parameters are in ``spec``."""
