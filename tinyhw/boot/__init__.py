"""Bring-up engines, one package per vendor (layer 3a: handed a transport, never constructing one).

:mod:`tinyhw.boot.amd`: AMD bring-up (identify, PSP and SMU boot, mode-1 reset, metrics, SDMA copies,
compute queues and dispatch). :mod:`tinyhw.boot.nv`: NVIDIA bring-up (FWSEC-FRTS, the booter, GSP-RM).
:mod:`tinyhw.boot.common`: the vendor-neutral parts both take (the step log, the firmware cache rule). The AMD and
NVIDIA drivers never import each other (tests/repo/test_layers.py).
"""
