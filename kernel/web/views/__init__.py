"""The web front end's routes, grouped by concern (blueprints)."""
