"""The scheduler service: the front door and the global queue. ``shell`` wires it; ``python -m forethought.services.scheduler`` runs it."""
