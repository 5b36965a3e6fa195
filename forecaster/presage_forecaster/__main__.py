"""``python -m presage_forecaster``: the same as the ``presage-forecaster`` command."""

from presage_forecaster.cli import main

main()
