"""Paper digest: personalised trending research papers in your inbox."""

import os

__version__ = "0.1.0"

# OpenBLAS's idle threads spin for 2**28 processor cycles (about 0.1 s) after each product before they sleep. A
# ranking run alternates short products with Python work, so the second core spent the run spinning while the
# Python work on the first slowed down beside it: ranking 100,000 readers took 24 s of CPU and 15.4 s; with the
# threads asleep after 2**4 cycles, 14.5 s of CPU and 13.3 s (docs/benchmarks.md). OpenBLAS reads this
# when it loads, so it is set here, before anything of the package imports numpy; an operator's own setting wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
