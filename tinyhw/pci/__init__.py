"""Native PCIe transports: read-only sysfs enumeration (``scan``), and later sysfs BAR and VFIO access.

Spec: specs/pci-vfio-remote.md §2 (sysfs), §6-§8 (BAR mapping, resizing, VFIO).
"""
