"""The ``presage`` command line: ``main`` builds the parser from one module per command (``backtest``,
``tune``, ``advise``, ``scaledobject``, ``run``, ``crds``), each declaring its flags and reading them into
typed values for the package that does the work; the flags several commands share are declared once
(``trace_flags``, ``kube_flags``, ``flag_types``). No package below this one parses a flag.
"""
