"""The configuration: every flag, the typed RunConfig, the plan of runs, and the presets (*.cfg)."""
