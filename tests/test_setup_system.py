"""README's test command, tests/setup-system.sh, .ci/run and the firmware cache location (issue 10 item 18)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from cachedirs import firmware_dir, guest_cache

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {"busybox-static", "qemu-system-x86", "linux-source-6.12", "usb.ids", "pci.ids", "libusb-1.0-0",
            "pciutils", "xz-utils", "python3-venv"}


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^## Run the tests\n\n```sh\n(.*?)\n```$", text, re.M | re.S)
    assert block, "README.md has no ```sh block under '## Run the tests'"
    return block[1]


def test_readme_command_sets_up_the_system_first() -> None:
    cmd = readme_test_command()
    assert cmd.startswith("bash tests/setup-system.sh && python3 -m venv .venv")
    assert cmd.endswith("python -m pytest tests")


def test_ci_runs_exactly_readmes_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    extract = re.search(r'cmd="\$\((awk .*)\)"', ci)
    assert extract, ".ci/run must take the command from README.md"
    got = subprocess.run(["bash", "-c", extract[1]], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert got.strip() == readme_test_command()
    assert "apt-get" not in ci and "fetch_firmware" not in ci and "pip install" not in ci


def test_setup_script_has_one_package_list() -> None:
    script = (ROOT / "tests" / "setup-system.sh").read_text()
    arrays = re.findall(r"^PACKAGES=\((.*?)^\)", script, re.M | re.S)
    assert len(arrays) == 1
    names = {w for line in arrays[0].splitlines() for w in line.split("#")[0].split()}
    assert names >= REQUIRED, REQUIRED - names
    assert "fetch_firmware.sh" in script
    subprocess.run(["bash", "-n", str(ROOT / "tests" / "setup-system.sh")], check=True)


def test_fetch_firmware_follows_xdg_cache_home(tmp_path: Path) -> None:
    cache = tmp_path / "xdg"
    for sub in ("amd", "nvidia-gsp"):
        (cache / "tinyhw" / "firmware" / sub).mkdir(parents=True)
        (cache / "tinyhw" / "firmware" / sub / ".complete").write_text("Package: x\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TINYHW_FIRMWARE_DIR", "TINYHW_CACHE")}
    env.update(XDG_CACHE_HOME=str(cache), HOME=str(tmp_path / "home"))
    out = subprocess.run(["bash", str(ROOT / "tests" / "fetch_firmware.sh")], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == f"fetch_firmware: already in {cache}/tinyhw/firmware"


def test_firmware_location_rule_and_pinning(tmp_path: Path) -> None:
    assert firmware_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/tinyhw/firmware")
    assert firmware_dir({"XDG_CACHE_HOME": "/x", "TINYHW_CACHE": "/c"}) == Path("/c/firmware")
    assert firmware_dir({"TINYHW_FIRMWARE_DIR": "/f", "XDG_CACHE_HOME": "/x"}) == Path("/f")
    assert guest_cache({"XDG_CACHE_HOME": "/x"}) == Path("/x/tinyhw/guest")
    # conftest gave this test a private XDG_CACHE_HOME; the firmware is still looked for where it was fetched
    private = Path(os.environ["XDG_CACHE_HOME"])
    pinned = Path(os.environ["TINYHW_FIRMWARE_DIR"])
    assert private not in pinned.parents and pinned == firmware_dir()
