"""The ``presage`` command line: ``main`` builds the parser from one module per command (``backtest``,
``tune``, ``advise``, ``scaledobject``, ``run``, ``crds``), each declaring its flags and reading them into
typed values for the package that does the work; the flags several commands share are declared once
(``trace_flags``, ``kube_flags``, ``flag_types``). No package below this one parses a flag.
"""

import os

# numpy asks the kernel for huge pages for every array of 4 MiB or more. A tuning run allocates and frees
# arrays of hundreds of MiB (a replay's count per decision and candidate), and where free huge pages are
# scarce the kernel's search for them costs more CPU than they save; benchmarks/bench_readvice.py runs as
# the commands do. numpy reads this once, when first imported, which the commands' modules do after this
# package runs; a value set outside is kept.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
