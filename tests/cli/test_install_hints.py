"""Install hints say what works: tinyhw is installed from its checkout (no package index serves it), so every
hint reads ``pip install -e '.[EXTRA]'`` and comes from one helper, tinyhw.errors.install_hint."""

from __future__ import annotations

import re
import tomllib

from testpaths import ROOT

from tinyhw.errors import install_hint

#: an install from an index that does not serve tinyhw: pip install tinyhw, 'tinyhw[x]', "tinyhw[x]", tinyhw[x]
FROM_INDEX = re.compile(r"pip3? install (?:-U |--upgrade )?['\"]?tinyhw\b")


def test_the_hint_names_the_extra_and_the_checkout() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in extras:
        assert install_hint(extra) == f"install the {extra} extra from the tinyhw checkout: pip install -e '.[{extra}]'"
    assert install_hint("compile", "tinygrad==0.14.0").endswith("pip install -e '.[compile]' (tinygrad==0.14.0)")
    assert install_hint(None, "pyusb").endswith("pip install -e . (pyusb)")


def test_the_library_hints_use_the_helper() -> None:
    from tinyhw.connect.place import INSTALL_HINT as LABGRID
    from tinyhw.cuda.device import INSTALL_HINT as CUDA
    from tinyhw.kernels.seam import INSTALL_HINT as COMPILE

    assert (install_hint("labgrid"), install_hint("cuda", "cuda-bindings"),
                                        install_hint("compile", "tinygrad==0.14.0")) == (LABGRID, CUDA, COMPILE)


def test_no_source_or_page_says_install_tinyhw_from_an_index() -> None:
    files = [*sorted((ROOT / "tinyhw").rglob("*.py")), ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "bench").iterdir())]
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in files if p.is_file() and "autogen" not in p.parts
           for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if FROM_INDEX.search(line)]
    assert bad == [], "install hints that no index serves (say pip install -e '.[EXTRA]' from the checkout):\n" + \
        "\n".join(bad)


def test_the_scan_sees_an_index_install() -> None:
    assert FROM_INDEX.search("hint: pip install 'tinyhw[labgrid]'")
    assert FROM_INDEX.search("pip install tinyhw")
    assert not FROM_INDEX.search("pip install -e '.[labgrid]'")
