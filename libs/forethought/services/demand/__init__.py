"""The demand service (Hermes application demand graphs). ``shell`` wires it; ``python -m forethought.services.demand`` runs it."""
