"""The OpenAI-compatible HTTP front door (docs/http.md). ``shell`` wires it; ``python -m forethought.services.http`` runs it."""
