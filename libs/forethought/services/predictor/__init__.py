"""The predictor service (SSJF output-length forecasts). ``shell`` wires it; ``python -m forethought.services.predictor`` runs it."""
