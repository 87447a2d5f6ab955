"""The emulated GSP-RM's answers: NV_STATUS values as NVIDIA's nvstatuscodes.h has them, an RM object model for
GSP_RM_ALLOC and GSP_RM_CONTROL, and real GSP-RM images known by their signature (specs/nv-bringup.md §13.4)."""

from __future__ import annotations

import hashlib
import struct
from types import SimpleNamespace

import pytest

from tinyhw.mocks.nvidia import nv_gsp, nv_gspfw

CLIENT = 0xC1E00004


def rm() -> tuple[nv_gsp.GspRm, list[tuple[int, bytes, int]]]:
    posted: list[tuple[int, bytes, int]] = []
    g = nv_gsp.GspRm(SimpleNamespace(vram_size=24 << 30, pci_ids=0x268410DE), "570.144", False)
    g._post = lambda function, payload, result=0: posted.append((function, payload, result))  # type: ignore[method-assign]
    return g, posted


def alloc(g: nv_gsp.GspRm, parent: int, obj: int, cls: int, params: bytes = b"") -> None:
    g.rm_alloc(struct.pack("<7I4x", CLIENT, parent, obj, cls, 0xFFFFFFFF, len(params), 0) + params)


def test_status_codes_are_nvidia_s() -> None:
    # nvstatuscodes.h: NV_OK 0, NV_ERR_INVALID_CLASS 0x22, NV_ERR_INVALID_OBJECT_PARENT 0x36, NV_ERR_NOT_SUPPORTED 0x56
    assert (nv_gsp.NV_OK, nv_gsp.NV_ERR_INVALID_CLASS, nv_gsp.NV_ERR_INVALID_OBJECT_PARENT,
            nv_gsp.NV_ERR_NOT_SUPPORTED) == (0, 0x22, 0x36, 0x56)


def test_golden_image_allocations_answer_nv_ok() -> None:
    g, posted = rm()
    alloc(g, 0, 0xCF000000, nv_gsp.NV01_ROOT, bytes(16))
    alloc(g, CLIENT, 0xCF000001, nv_gsp.NV01_DEVICE_0, bytes(40))
    alloc(g, 0xCF000001, 0xCF000002, nv_gsp.NV20_SUBDEVICE_0, bytes(4))
    alloc(g, 0xCF000001, 0xCF000003, nv_gsp.FERMI_VASPACE_A, bytes(8))
    alloc(g, 0xCF000001, 0xCF000004, nv_gsp.AMPERE_CHANNEL_GPFIFO_A, bytes(8))
    alloc(g, 0xCF000004, 0xCF000005, nv_gsp.ADA_COMPUTE_A)
    alloc(g, 0xCF000004, 0xCF000006, nv_gsp.AMPERE_DMA_COPY_B)
    assert [r for _, _, r in posted] == [0] * 7
    function, payload, _ = posted[1]
    assert function == 103 and struct.unpack_from("<5I", payload) == (CLIENT, CLIENT, 0xCF000001, 0x80, 0)
    assert payload[32:] == bytes(40)  # the params come back after the header


@pytest.mark.parametrize(("parent", "obj", "cls", "status"), [
    (CLIENT, 0xCF000002, nv_gsp.NV20_SUBDEVICE_0, nv_gsp.NV_ERR_INVALID_OBJECT_PARENT),  # a subdevice under the client
    (CLIENT, 0xCF000001, nv_gsp.NV01_DEVICE_0, nv_gsp.NV_ERR_INSERT_DUPLICATE_NAME),  # the handle is in use
    (CLIENT, 0xCF000009, 0x1234, nv_gsp.NV_ERR_INVALID_CLASS),
])
def test_a_bad_allocation_gets_the_rm_s_status(parent: int, obj: int, cls: int, status: int) -> None:
    g, posted = rm()
    alloc(g, 0, 0, nv_gsp.NV01_ROOT)
    alloc(g, CLIENT, 0xCF000001, nv_gsp.NV01_DEVICE_0)
    alloc(g, parent, obj, cls)
    assert posted[-1][2] == status and struct.unpack_from("<I", posted[-1][1], 16)[0] == status


def test_controls_and_unknown_functions() -> None:
    g, posted = rm()
    alloc(g, 0, 0, nv_gsp.NV01_ROOT)
    alloc(g, CLIENT, 0xCF000001, nv_gsp.NV01_DEVICE_0)
    alloc(g, 0xCF000001, 0xCF000002, nv_gsp.NV20_SUBDEVICE_0)
    size = nv_gsp.KGR_ENGINES * nv_gsp.KGR_BUFFERS * 8
    g.rm_control(struct.pack("<6I", CLIENT, 0xCF000002, nv_gsp.CTRL_KGR_GET_CONTEXT_BUFFERS_INFO, 0, size, 0)
                 + bytes(size))
    _, payload, result = posted[-1]
    assert result == 0 and struct.unpack_from("<II", payload, 24 + 8 * 0x10) == (0x10000, 0x1000)
    g.rm_control(struct.pack("<6I", CLIENT, 0xCF000002, 0x20801234, 0, 0, 0))
    assert posted[-1][2] == nv_gsp.NV_ERR_NOT_SUPPORTED
    g.rm_control(struct.pack("<6I", CLIENT, 0xCF0000FF, nv_gsp.CTRL_GPU_PROMOTE_CTX, 0, 0, 0))
    assert posted[-1][2] == nv_gsp.NV_ERR_INVALID_OBJECT_HANDLE


def test_a_real_image_is_known_by_its_signature() -> None:
    sig, page = b"s" * 4096, b"p" * 4096
    key = hashlib.sha256(sig).hexdigest()
    nv_gsp.GSP_RM_SIGNED[key] = ("570.144", hashlib.sha256(page).hexdigest())
    try:
        assert nv_gsp.gsp_rm_version(page[:64], sig, page) == "570.144"
        assert nv_gsp.gsp_rm_version(page[:64], sig, b"q" + page[1:]) is None  # another image, same signature
        assert nv_gsp.gsp_rm_version(page[:64], b"t" + sig[1:], page) is None
    finally:
        del nv_gsp.GSP_RM_SIGNED[key]
    marker = nv_gspfw.GSPRM_MARKER + b"570.144\0"
    assert nv_gsp.gsp_rm_version(marker, b"", b"") == "570.144"
