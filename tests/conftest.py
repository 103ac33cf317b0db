"""Settings for the whole suite.

Hypothesis runs derandomized by default (the ``ci`` profile): the examples of
each property test are a function of the test, so the suite cannot fail at
random, and a failure seen once is seen on every run. To hunt for new
failures locally, run with ``HYPOTHESIS_PROFILE=explore`` (random examples,
more of them); a failing example found that way becomes an explicit
``@example`` on the test.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("explore", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
