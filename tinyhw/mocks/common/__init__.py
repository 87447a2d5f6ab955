"""Parts every emulated product shares: the virtual clock, the services interface a block is built with,
a PCI function's config space, host memory (behind an IOMMU or at physical addresses) and the faults
an attachment raises. Imports no product package.
"""
