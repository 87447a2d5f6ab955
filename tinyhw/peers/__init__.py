"""Peer drivers on the emulated boards: one small adapter per driver at its lowest layer (docs/peer-drivers.md)."""
