"""A global --device that a command cannot use is refused with exit 2 naming what it does use, never silently
ignored (ARCHITECTURE.md, CLI conventions; issue 20 item 3: `--device mock:navi31 kernels run pattern` ran on
the cpu; since issue 23 `kernels run` takes AMD boards, tests/kernels/test_kernels_amd.py). $TINYHW_DEVICE is a default,
not an option: commands that use no device ignore it."""

from __future__ import annotations

import pytest
from clihelp import run

from tinyhw.kernels.manifest import prebuilt_dir

ELF = str(next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf")))


@pytest.mark.parametrize("args,uses", [
    (["kernels", "list"], "it reads the committed manifests only"),
    (["kernels", "build", "--target", "sm_90", "-o", "/tmp/tinyhw-no-such-dir/never"], "it compiles for --target"),
    (["firmware", "inspect", ELF], "it reads image files only"),
    (["firmware", "diff", ELF, ELF], "it compares image files only"),
    (["prof", "summary", "/tmp/tinyhw-no-such-dir/capture.pkl"], "it decodes capture files only"),
    (["prof", "waves", "/tmp/tinyhw-no-such-dir/capture.pkl"], "it decodes capture files only"),
    (["pci", "list"], "it lists every PCI function in sysfs"),
    (["list"], "only a remote: --device is listed through"),
])
@pytest.mark.parametrize("device", ["mock:navi31", "mock:navi31-usb", "pci:0000:03:00.0"])
def test_global_device_the_command_cannot_use_is_refused(args: list[str], uses: str, device: str) -> None:
    r = run("--device", device, *args)
    assert r.code == 2, (r.out, r.err)
    name = " ".join(a for a in args[:2] if not a.startswith(("-", "/", "pattern"))) if args[0] != "list" else "list"
    assert r.err.startswith(f"error: {name} cannot use --device {device}: ") and uses in r.err
    assert len(r.err.strip().splitlines()) == 1 and r.out == ""
    after = run(*args, "--device", device)  # the same rule after the command's name
    assert (after.code, after.out, after.err) == (r.code, r.out, r.err)


@pytest.mark.parametrize("device", ["mock:ad102", "remote:127.0.0.1:1"])
def test_kernels_run_refuses_a_device_that_is_no_amd_board(device: str) -> None:
    for args in (["--device", device, "kernels", "run", "pattern", "--n", "256"],
                 ["kernels", "run", "pattern", "--device", device]):
        r = run(*args)
        assert r.code == 2, (r.out, r.err)
        assert r.err.startswith(f"error: kernels run cannot use --device {device}: it runs on cpu, cuda:N or an AMD "
                                "board only") and len(r.err.strip().splitlines()) == 1 and r.out == ""


@pytest.mark.parametrize("device", ["mock:navi31", "mock:navi31-usb"])
def test_kernels_run_on_an_amd_board_that_is_not_booted_is_refused(device: str) -> None:
    r = run("--json", "--device", device, "kernels", "run", "fma")
    assert r.code == 2 and r.no_result and "is not a gpu tinyhw booted" in r.err
    r = run("--device", device, "kernels", "run", "pattern", "--device", "cpu")
    assert r.code == 2 and "disagree" in r.err


def test_a_device_given_before_and_after_the_command_must_agree() -> None:
    r = run("--device", "cuda:0", "kernels", "run", "pattern", "--device", "cpu")
    assert r.code == 2 and r.err == ("error: --device cuda:0 before the command and --device cpu after it disagree; "
                                     "give it once\n")
    r = run("--device", "mock:navi31", "probe", "--device", "mock:navi31-usb")
    assert r.code == 2 and "disagree" in r.err and r.out == ""
    assert run("--device", "mock:navi31", "reg", "find", "smuio.ROM_CNTL", "--device", "mock:navi31").code == 0


def test_the_environment_default_is_not_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYHW_DEVICE", "mock:navi31")
    assert run("kernels", "list").code == 0
    assert run("firmware", "inspect", ELF).code == 0


def test_commands_that_use_the_device_still_take_it() -> None:
    r = run("--device", "mock:navi31", "reg", "find", "smuio.ROM_CNTL")
    assert r.code == 0 and "ROM_CNTL" in r.out
