"""The worker service: one engine behind WorkerService. ``shell`` wires it; ``python -m forethought.services.worker`` runs it."""
