"""tinyhw in a labgrid board farm: resources, exporter support, a driver, a strategy and pytest fixtures.

The labgrid extra (``pip install -e '.[labgrid]'`` from the tinyhw checkout). Importing this package imports labgrid
and registers the classes with labgrid's target factory, so a labgrid environment file loads them with ``imports:
[tinyhw.labgrid]``. Nothing else in tinyhw imports it; ``labgrid:PLACE`` device strings use
:mod:`tinyhw.connect.place`, which imports labgrid lazily. Design notes: docs/labgrid.md.

* :mod:`tinyhw.labgrid.resources`: ``TinyhwRemote`` (a ``tinyhw serve remote`` on the exporter host: host, port,
  key file path, served device, tcp or ssh), ``TinyhwBridge``/``NetworkTinyhwBridge`` (the ASM24 bridge, matched by
  udev) and ``TinyhwPCI`` (a native PCI function).
* :mod:`tinyhw.labgrid.exporter`: ``python -m tinyhw.labgrid.exporter`` runs ``labgrid-exporter`` with the bridge
  export added.
* :mod:`tinyhw.labgrid.driver`: ``TinyhwDriver`` (MMIOProtocol, BootstrapProtocol, tinyhw's operations as steps).
* :mod:`tinyhw.labgrid.power`: ``TinyhwPowerDriver`` (PowerProtocol: the bridge's PCIe power toggle).
* :mod:`tinyhw.labgrid.strategy`: ``TinyhwStrategy`` (off -> link_up -> firmware_verified -> booted).
* :mod:`tinyhw.labgrid.fixtures`: pytest fixtures (``pytest_plugins = ["tinyhw.labgrid.fixtures"]``).
"""

from tinyhw.labgrid.driver import TinyhwDriver
from tinyhw.labgrid.power import TinyhwPowerDriver
from tinyhw.labgrid.resources import NetworkTinyhwBridge, TinyhwBridge, TinyhwPCI, TinyhwRemote
from tinyhw.labgrid.strategy import TinyhwStrategy

__all__ = ["NetworkTinyhwBridge", "TinyhwBridge", "TinyhwDriver", "TinyhwPCI", "TinyhwPowerDriver", "TinyhwRemote",
           "TinyhwStrategy"]
