"""``presage tune``: the cheapest policy that meets a service level, found on the user's own history.

``knobs`` is the search space and turns a point of it into a spec, ``split`` divides the trace into
the part the choice is made on and the part held out, ``prepared`` forecasts once per forecaster
setting and ``replay`` replays a policy from those forecasts through the backtest's simulator and
production's decision code; ``search`` picks the candidates and the winner, ``tuner`` runs the
whole thing, ``output`` and ``report`` write what it found, ``from_cluster`` reads a running
PredictiveScaler and its history from a cluster, ``from_flags`` turns the flags into a run and
``command`` is the CLI.
"""
