"""``presage tune``: the cheapest policy that meets a service level, found on the user's own history.

``knobs`` is the search space and turns a point of it into a spec, ``space`` lists its points,
``split`` divides the trace into the part the choice is made on and the part held out, ``prepared``
forecasts once per forecaster setting, ``replay`` replays every candidate at once from those
forecasts with production's policy, ``measure`` gives each candidate's figures, ``search`` picks the
winner, ``tuner`` runs the whole thing (the function a caller tunes one scaler with), ``held_out``
checks the choice on the held-out part and ``advice`` says whether to act on it; ``output`` and
``report`` write what it found, ``from_cluster`` reads a running PredictiveScaler and its history from
a cluster; ``request`` is what ``presage tune`` asks (its flags are read in
:mod:`presage_scaler.cli.tune`) and ``invocation`` carries a request out.
"""
