"""The emulated NVIDIA board (AD102, ``mock:ad102``) and its parts, written from the specs (never from
tinyhw.boot.nv): config space, falcons, secure boot and scripted GSP-RM, the invented VBIOS and GSP
firmware. Shared parts come from :mod:`tinyhw.mocks.common`.
"""
