"""The planner service (SamuLLM offline multi-LLM batch plans). ``shell`` wires it; ``python -m forethought.services.planner`` runs it."""
