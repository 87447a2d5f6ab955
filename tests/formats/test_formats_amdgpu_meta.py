"""The code object metadata note (msgpack) of tinyhw/formats/amdgpu_meta.py: the committed probes' kernels and
arguments, and malformed input refused with a message (bounded: truncation, nesting, unknown types)."""

from __future__ import annotations

import pytest

from tinyhw.formats.amdgpu_meta import MetadataError, kernel_metadata, unpack
from tinyhw.formats.elf import parse_elf
from tinyhw.kernels.manifest import prebuilt_dir


def test_the_probes_metadata_lists_their_buffers() -> None:
    data = next((prebuilt_dir() / "gfx1100").glob("bandwidth.*.elf")).read_bytes()
    (meta,) = kernel_metadata(data, parse_elf(data)).values()
    assert meta.kernarg_size == 16 and [(a.offset, a.size, a.kind) for a in meta.buffers] == \
        [(0, 8, "global_buffer"), (8, 8, "global_buffer")]


def test_msgpack_subset() -> None:
    assert unpack(b"\x82\xa1a\x01\xa1b\x92\xc3\xcd\x01\x00") == {"a": 1, "b": [True, 256]}
    assert unpack(b"\xd9\x03abc") == "abc" and unpack(b"\xff") == -1 and unpack(b"\xd3" + b"\xff" * 8) == -1


@pytest.mark.parametrize("raw,says", [
    (b"\x92\x01", "needs"),                 # an array of 2 with one element
    (b"\xdb\xff\xff\xff\xff", "needs"),      # a 4 GiB string in 5 bytes
    (b"\x91" * 40 + b"\x00", "deeper than 16"),
    (b"\xc1", "type byte 0xc1"),
    (b"\x01\x02", "after the msgpack value"),
])
def test_malformed_msgpack_is_refused(raw: bytes, says: str) -> None:
    with pytest.raises(MetadataError, match=says):
        unpack(raw)
