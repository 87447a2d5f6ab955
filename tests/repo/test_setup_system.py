"""README's test command, tests/setup-system.sh, .ci/run and the firmware cache location (issue 10 item 18)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from cachedirs import firmware_dir, guest_cache
from testpaths import ROOT

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
    for sub in ("amd", "nvidia-gsp", "nvidia-570"):
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


def _shims(tmp_path: Path, uid: int, installed: bool) -> tuple[dict[str, str], Path]:
    """A PATH where id, dpkg-query, getent, runuser, sudo, tee and apt-get are stand-ins that log their calls."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    scripts = {
        "id": f'echo {uid}',
        "dpkg-query": 'echo -n "install ok installed"' if installed else "exit 1",
        "getent": 'echo "alice:x:1000:1000::/home/alice:/bin/bash"',
        "runuser": f'echo "runuser $*" >> {log}',
        "sudo": f'echo "sudo $*" >> {log}; "$@"',
        "tee": f'cat > /dev/null; echo "tee $*" >> {log}',
        "apt-get": f'echo "apt-get $*" >> {log}',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("TINYHW_FIRMWARE_DIR", "TINYHW_CACHE", "SUDO_USER")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env, log


def _complete_firmware(cache: Path) -> None:
    for sub in ("amd", "nvidia-gsp", "nvidia-570"):
        (cache / "tinyhw" / "firmware" / sub).mkdir(parents=True)
        (cache / "tinyhw" / "firmware" / sub / ".complete").write_text("Package: x\n")


def test_setup_is_a_fast_no_op_without_root_when_everything_is_present(tmp_path: Path) -> None:
    env, log = _shims(tmp_path, uid=1000, installed=True)
    _complete_firmware(tmp_path / "xdg")
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    r = subprocess.run(["bash", "tests/setup-system.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert "all " in r.stdout and "packages present" in r.stdout and "already in" in r.stdout
    assert not log.exists()  # no apt-get, no sudo


def test_setup_installs_only_with_root_and_says_so(tmp_path: Path) -> None:
    env, log = _shims(tmp_path, uid=0, installed=False)
    _complete_firmware(tmp_path / "xdg")
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    r = subprocess.run(["bash", "tests/setup-system.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "apt-get update -qq" and calls[1].startswith("apt-get install -y -qq --no-install-recommends ")
    assert set(calls[1].split()) >= REQUIRED


def test_under_sudo_the_firmware_is_fetched_as_the_user(tmp_path: Path) -> None:
    env, log = _shims(tmp_path, uid=0, installed=True)
    env.update(SUDO_USER="alice", XDG_CACHE_HOME=str(tmp_path / "alice-cache"))
    r = subprocess.run(["bash", "tests/setup-system.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    runs = [c for c in log.read_text().splitlines() if c.startswith("runuser")]
    assert runs == [f"runuser -u alice -- env HOME=/home/alice XDG_CACHE_HOME={tmp_path}/alice-cache "
                    "bash tests/fetch_firmware.sh"]


def test_readme_quick_start_runs_on_the_emulated_board() -> None:
    """The first README command: after the install, its tinyhw commands work as written."""
    import shlex

    from clihelp import run

    text = (ROOT / "README.md").read_text()
    block = re.search(r"^## Set up and run on the emulated board\n\n```sh\n(.*?)\n```$", text, re.M | re.S)
    assert block, "README.md has no ```sh block under '## Set up and run on the emulated board'"
    steps = [shlex.split(part) for part in block[1].split("&&")]
    assert steps[0][:3] == ["python3", "-m", "venv"] and ["pip", "install", "."] in steps
    commands = [s[1:] for s in steps if s[0] == "tinyhw"]
    assert commands and all("mock:" in " ".join(c) for c in commands), "the quick start must use an emulated board"
    for argv in commands:
        r = run(*argv)
        assert r.code == 0 and r.out.strip(), (argv, r.err)


SCRIPTS = ("tests/setup-system.sh", "tests/fetch_firmware.sh")


def test_no_archive_host_is_written_into_the_scripts() -> None:
    """The apt archive is the machine's own: no URL with a host name appears in the setup scripts."""
    for name in SCRIPTS:
        text = (ROOT / name).read_text()
        hosts = re.findall(r"[a-z][a-z0-9+.-]*://[^\s'\"$/]+", text)
        assert not hosts, f"{name} names hosts: {hosts}"


def _apt_etc(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (etc / name).write_text(text)
    (tmp_path / "os-release").write_text('ID=debian\nVERSION_CODENAME=bookworm\n')
    env = {k: v for k, v in os.environ.items() if k not in ("TINYHW_FIRMWARE_DIR", "TINYHW_CACHE")}
    env.update(TINYHW_APT_ETC=str(etc), TINYHW_OS_RELEASE=str(tmp_path / "os-release"),
               TINYHW_FIRMWARE_PRINT_ARCHIVE="1", XDG_CACHE_HOME=str(tmp_path / "xdg"))
    return env


DEB822 = """Types: deb
URIs: http://mirror.example.invalid/debian-security
Suites: bookworm-security
Components: main

Types: deb
# a comment
URIs: https://mirror.example.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /k/archive.gpg
"""


@pytest.mark.parametrize(("files", "want"), [
    ({"sources.list.d/debian.sources": DEB822}, "https://mirror.example.invalid/debian /k/archive.gpg"),
    ({"sources.list": "# deb http://old.invalid/debian bookworm main\n"
                      "deb http://sec.invalid/debian-security bookworm-security main\n"
                      "deb [arch=amd64 signed-by=/k/x.gpg] http://one.invalid/debian bookworm main contrib\n"},
     "http://one.invalid/debian /k/x.gpg"),
    ({"sources.list": "deb http://two.invalid/debian bookworm main\n"},
     "http://two.invalid/debian /usr/share/keyrings/debian-archive-keyring.gpg"),
])
def test_fetch_firmware_uses_the_archive_apt_already_uses(tmp_path: Path, files: dict[str, str], want: str) -> None:
    env = _apt_etc(tmp_path, files)
    r = subprocess.run(["bash", str(ROOT / "tests" / "fetch_firmware.sh")], env=env, capture_output=True,
                       text=True, check=False, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, want), r.stderr


def test_fetch_firmware_without_an_entry_for_the_release_stops(tmp_path: Path) -> None:
    env = _apt_etc(tmp_path, {"sources.list": "deb http://x.invalid/debian trixie main\n"})
    r = subprocess.run(["bash", str(ROOT / "tests" / "fetch_firmware.sh")], env=env, capture_output=True,
                       text=True, check=False, timeout=60)
    assert r.returncode == 3 and r.stderr.strip() == f"fetch_firmware: no apt entry for bookworm under {tmp_path}/apt"


def test_fetch_firmware_checks_the_570_pins() -> None:
    """The 570.144 set is checked against the SHA-256 values tinygrad pins (specs/data-sources.md)."""
    text = (ROOT / "tests" / "fetch_firmware.sh").read_text()
    from tinyhw.boot.nv.fwfiles import KNOWN
    pins = {k for k, (rel, _) in KNOWN.items() if rel == "570.144"}
    assert pins and all(p in text for p in pins) and "sha256sum --quiet -c" in text
    assert "Dir::Etc::sourcelist=" in text and "Dir::State=" in text and "Dir::Cache=" in text
