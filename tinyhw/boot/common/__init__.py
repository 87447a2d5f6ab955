"""Vendor-neutral parts of the bring-up engines, shared by :mod:`tinyhw.boot.amd` and :mod:`tinyhw.boot.nv`.

:mod:`tinyhw.boot.common.steps`: the step log that names and times each boot step.
:mod:`tinyhw.boot.common.fwdirs`: tinyhw's firmware cache and the description of the firmware folder a command uses.
It imports neither vendor's driver; they import it, and never each other.
"""
