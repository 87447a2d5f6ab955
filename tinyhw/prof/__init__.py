"""``tinyhw prof``: offline decoding of tinygrad's AMD SQTT and PMC captures (specs/sqtt-pmc.md §14).

Layer 3: reads capture files (a ``profile.pkl`` through the restricted loader, or a directory of
plain files), decodes them with :mod:`tinyhw.formats.sqtt` / :mod:`tinyhw.formats.pmc`, and builds
the documents the CLI prints: summary, packet lists, wave timelines, instruction tables, trace export.
"""

from tinyhw.prof.capture import MAX_INPUT_BYTES, Capture, load_capture

__all__ = ["MAX_INPUT_BYTES", "Capture", "load_capture"]
