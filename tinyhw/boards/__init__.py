"""Frozen board descriptions: vendor facts shared by drivers and emulators (never behaviour)."""
