"""The ``presage`` command line: ``main`` and the commands that live nowhere else (``scaledobject``)."""
