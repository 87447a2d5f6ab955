"""Every protocol number the boot code uses, taken from the modules generated from the Linux headers.

Nothing here is typed by hand: each value is looked up by its kernel name in the generated
``tinyhw.autogen`` modules (``amdgpu_psp``: PSP bootloader commands and component types from
amdgpu_psp.h; ``psp_gfx_if``: sOS control commands, ring command ids, GFX firmware types, statuses
and the frame / command-buffer layouts from psp_gfx_if.h; ``smu_v13_0_0_ppsmc``: SMU message ids and
response codes from smu_v13_0_0_ppsmc.h plus the debug-mailbox message of smu_v13_0_0_ppt.c;
``smu13_driver_if_v13_0_0``: table ids, clock ids, temperature/SVI/throttler indices and the
``SmuMetricsExternal_t`` layout; ``amd_discovery``: the gc_info structs of discovery.h).
specs/amd-bringup.md §5.1, §5.2, §5.5, §6.1-§6.4 name which of them are used and why.
A test compares every name used here with the value parsed from the headers.
"""

from __future__ import annotations

from tinyhw.autogen import amd_discovery, amdgpu_psp, psp_gfx_if, smu13_driver_if_v13_0_0, smu_v13_0_0_ppsmc

_PSP = amdgpu_psp.CONSTANTS
_GFX = psp_gfx_if.CONSTANTS
_SMU = smu_v13_0_0_ppsmc.CONSTANTS
_DRV = smu13_driver_if_v13_0_0.CONSTANTS


def psp(name: str) -> int:
    """A constant of amdgpu_psp.h / amdgpu_ucode.h (``PSP_BL__LOAD_SOSDRV``, ``PSP_FW_TYPE_PSP_KDB``)."""
    return _PSP[name]


def gfx(name: str) -> int:
    """A constant of psp_gfx_if.h (``GFX_CMD_ID_LOAD_TOC``, ``GFX_FW_TYPE_SMU``, ``PSP_ERR_UNKNOWN_COMMAND``)."""
    return _GFX[name]


def smu(name: str) -> int:
    """A constant of smu_v13_0_0_ppsmc.h (``PPSMC_MSG_GetSmuVersion``, ``PPSMC_Result_OK``, ``DEBUGSMC_MSG_*``)."""
    return _SMU[name]


def drv(name: str) -> int:
    """A constant of smu13_driver_if_v13_0_0.h (``TABLE_SMU_METRICS``, ``PPCLK_GFXCLK``, ``TEMP_HOTSPOT``)."""
    return _DRV[name]


def prefixed(table: dict[str, int], prefix: str) -> dict[str, int]:
    """``{suffix: value}`` of every constant starting with ``prefix`` (``TEMP_`` -> {"EDGE": 0, ...})."""
    return {k[len(prefix):]: v for k, v in table.items() if k.startswith(prefix)}


# -- PSP bootloader (§5.1): component order, command and the psp_fw_type of the image sent ---------------------
#: (label, bootloader command, psp_fw_type of the component whose bytes are sent). MP0 13.0.x sends the KDB
#: image with LOAD_TOS_SPL_TABLE (psp_v13_0.c, amd-bringup.md §5.1 and Q6).
BOOTLOADER_ORDER: tuple[tuple[str, int, int], ...] = (
    ("KDB", psp("PSP_BL__LOAD_KEY_DATABASE"), psp("PSP_FW_TYPE_PSP_KDB")),
    ("SPL", psp("PSP_BL__LOAD_TOS_SPL_TABLE"), psp("PSP_FW_TYPE_PSP_KDB")),
    ("SYS", psp("PSP_BL__LOAD_SYSDRV"), psp("PSP_FW_TYPE_PSP_SYS_DRV")),
    ("SOC", psp("PSP_BL__LOAD_SOCDRV"), psp("PSP_FW_TYPE_PSP_SOC_DRV")),
    ("INTF", psp("PSP_BL__LOAD_INTFDRV"), psp("PSP_FW_TYPE_PSP_INTF_DRV")),
    ("DBG", psp("PSP_BL__LOAD_DBGDRV"), psp("PSP_FW_TYPE_PSP_DBG_DRV")),
    ("RAS", psp("PSP_BL__LOAD_RASDRV"), psp("PSP_FW_TYPE_PSP_RAS_DRV")),
    ("SOS", psp("PSP_BL__LOAD_SOSDRV"), psp("PSP_FW_TYPE_PSP_SOS")),
)
PSP_FW_TOC = psp("PSP_FW_TYPE_PSP_TOC")
PSP_FW_SPL = psp("PSP_FW_TYPE_PSP_SPL")

# -- sOS control and KM ring (§5.2) ------------------------------------------------------------------------------
CTRL_INIT_GPCOM_RING = gfx("GFX_CTRL_CMD_ID_INIT_GPCOM_RING")
CTRL_DESTROY_RINGS = gfx("GFX_CTRL_CMD_ID_DESTROY_RINGS")
CTRL_MODE1_RST = gfx("GFX_CTRL_CMD_ID_MODE1_RST")
RESPONSE_FLAG = gfx("GFX_FLAG_RESPONSE")
STATUS_MASK = gfx("GFX_CMD_STATUS_MASK")
CMD_LOAD_TOC = gfx("GFX_CMD_ID_LOAD_TOC")
CMD_SETUP_TMR = gfx("GFX_CMD_ID_SETUP_TMR")
CMD_LOAD_IP_FW = gfx("GFX_CMD_ID_LOAD_IP_FW")
CMD_AUTOLOAD_RLC = gfx("GFX_CMD_ID_AUTOLOAD_RLC")
ERR_UNKNOWN_COMMAND = gfx("PSP_ERR_UNKNOWN_COMMAND")

_FRAME = psp_gfx_if.STRUCTS["struct psp_gfx_rb_frame"]
_CMD = psp_gfx_if.STRUCTS["struct psp_gfx_cmd_resp"]
FRAME_SIZE: int = _FRAME[0]
CMD_SIZE: int = _CMD[0]


def frame_off(name: str) -> int:
    """Byte offset of a ``psp_gfx_rb_frame`` field (``fence_value``)."""
    return _FRAME[1][name][0]


def cmd_off(name: str) -> int:
    """Byte offset of a ``psp_gfx_cmd_resp`` field (``cmd_id``, ``cmd.cmd_load_ip_fw.fw_type``, ``resp.status``)."""
    return _CMD[1][name][0]


def fw_type(name: str) -> int:
    """A GFX firmware type for LOAD_IP_FW (``SMU`` -> GFX_FW_TYPE_SMU)."""
    return gfx(f"GFX_FW_TYPE_{name}")


# -- SMU (§6) ------------------------------------------------------------------------------------------------------
def msg(name: str) -> int:
    """An SMU 13.0.0 message id (``GetSmuVersion`` -> PPSMC_MSG_GetSmuVersion)."""
    return smu(f"PPSMC_MSG_{name}")


RESULT_OK = smu("PPSMC_Result_OK")
RESULT_NAMES: dict[int, str] = {v: k.removeprefix("PPSMC_Result_") for k, v in _SMU.items()
                                if k.startswith("PPSMC_Result_")}
DEBUG_MODE1_RESET = smu("DEBUGSMC_MSG_Mode1Reset")
TABLE_SMU_METRICS = drv("TABLE_SMU_METRICS")
CLOCKS: dict[str, int] = {k: v for k, v in prefixed(_DRV, "PPCLK_").items() if k != "COUNT"}
TEMPS: dict[str, int] = {k: v for k, v in prefixed(_DRV, "TEMP_").items() if k != "COUNT"}
SVI_PLANES: dict[str, int] = {k: v for k, v in prefixed(_DRV, "SVI_PLANE_").items() if k != "COUNT"}
THROTTLERS: dict[str, int] = {k.removesuffix("_BIT"): v for k, v in prefixed(_DRV, "THROTTLER_").items()
                              if k.endswith("_BIT")}
METRICS_STRUCT = "SmuMetricsExternal_t"
METRICS_SIZE: int = smu13_driver_if_v13_0_0.STRUCTS[METRICS_STRUCT][0]
METRICS_FIELDS: dict[str, tuple[int, str, int]] = {
    k.removeprefix("SmuMetrics."): v for k, v in smu13_driver_if_v13_0_0.STRUCTS[METRICS_STRUCT][1].items()}

# -- discovery gc_info (§2.8) --------------------------------------------------------------------------------------
GC_INFO_HEADER = amd_discovery.STRUCTS["struct gpu_info_header"]


def gc_info_struct(major: int, minor: int) -> tuple[int, dict[str, tuple[int, str, int]]] | None:
    """(size, fields) of ``gc_info_v<major>_<minor>``, or None when discovery.h has no such version."""
    return amd_discovery.STRUCTS.get(f"struct gc_info_v{major}_{minor}")
