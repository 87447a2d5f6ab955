"""README is a user's guide: no issue numbers, and every page it links under docs/ exists; the same for the
docs/ pages, the CLI's help texts, and the docstrings of the documented library packages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest
from testpaths import ROOT

#: "issue 12", "Issue 20 item 5", "issues 3-4": development history, not something a user can look up
ISSUE = re.compile(r"\bissues?\s+\d", re.I)
#: Markdown links [text](target); targets with a scheme or a bare #anchor are not files
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: a path a page cites as part of this repository (tinyhw/..., tests/..., docs/..., specs/..., ARCHITECTURE.md), in
#: prose or code spans: it must be a file or folder the repository holds, so the docs stand alone
CITE = re.compile(r"(?<![\w./~-])((?:tinyhw|tests|bench|docs|specs|shared|\.ci)/[\w./-]*[\w/]"
                  r"|[A-Z][A-Z_]{2,}\.md)(?![\w*<])")
#: packages whose every public class and function carries a docstring
DOCUMENTED = ("formats", "flash", "firmware", "regs", "probe", "prof")


def issue_mentions(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if ISSUE.search(line)]


def broken_links(md: Path) -> list[str]:
    """Relative link targets of ``md`` that name no file (an #anchor after the path is ignored)."""
    out = []
    for target in LINK.findall(md.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (md.parent / path).is_file():
            out.append(target)
    return out


def missing_citations(md: Path, root: Path = ROOT) -> list[str]:
    """Repository paths ``md`` cites (see :data:`CITE`) that name nothing in ``root`` or beside ``md``; a path
    ending in an upper-case placeholder (``prebuilt/T``) or a glob is not a citation."""
    out = []
    for line in md.read_text().splitlines():
        for m in CITE.finditer(line):
            path = m.group(1).rstrip("./")
            if re.search(r"/[A-Z]$", path):
                continue
            if not ((root / path).exists() or (md.parent / path).exists()):
                out.append(path)
    return out


def pages(root: Path = ROOT) -> list[Path]:
    """README, docs/ and every other Markdown page the repository holds (build outputs and venvs aside)."""
    skip = {"build", "dist", ".venv", "venv", ".git", "node_modules"}
    return sorted(p for p in root.rglob("*.md") if not skip & set(p.relative_to(root).parts))


def test_pages_cite_only_files_the_repository_holds() -> None:
    bad = {str(p.relative_to(ROOT)): missing_citations(p) for p in pages()}
    assert {k: v for k, v in bad.items() if v} == {}, "pages citing files the repository does not hold"


def test_missing_citations_sees_a_spec_the_repository_lacks(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "tinyhw" / "boot").mkdir(parents=True)
    (tmp_path / "tinyhw" / "boot" / "sqtt.py").write_text("")
    md = tmp_path / "docs" / "page.md"
    md.write_text("from specs/amd-bringup.md §1, the layering of ARCHITECTURE.md; `tinyhw/boot/sqtt.py` and\n"
                  "tinyhw/boot/ exist; tests/test_prof_*.py is a glob, -o tinyhw/kernels/prebuilt/T a placeholder;\n"
                  "[x](https://example.org/specs/a.md) is a web page, ~/.cache/tinyhw/firmware a user path.")
    assert missing_citations(md, tmp_path) == ["specs/amd-bringup.md", "ARCHITECTURE.md"]


def test_readme_names_no_issue_numbers() -> None:
    assert issue_mentions((ROOT / "README.md").read_text()) == []


def test_readme_links_pages_under_docs_and_each_exists() -> None:
    readme = ROOT / "README.md"
    docs_links = [t for t in LINK.findall(readme.read_text()) if t.startswith("docs/")]
    assert len(docs_links) >= 10, "README should link its design notes under docs/"
    assert broken_links(readme) == []
    linked = {t.split("#", 1)[0] for t in docs_links}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, f"docs/ pages README does not link: {sorted(pages - linked)}"


def test_docs_pages_name_no_issue_numbers_and_their_links_resolve() -> None:
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert pages
    for page in pages:
        assert issue_mentions(page.read_text()) == [], page.name
        assert broken_links(page) == [], page.name


def test_broken_links_sees_a_missing_page(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("x")
    md = tmp_path / "README.md"
    md.write_text("[a](there.md) [b](missing.md#x) [c](https://example.org/) [d](#anchor)")
    assert broken_links(md) == ["missing.md#x"]


def test_help_texts_name_no_issue_numbers() -> None:
    from tinyhw.cli import cli

    pages: dict[str, str] = {}

    def walk(cmd: click.Command, path: list[str]) -> None:
        ctx = click.Context(cmd, info_name=" ".join(path))
        pages[" ".join(path)] = cmd.get_help(ctx)
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, path + [name])

    walk(cli, ["tinyhw"])
    assert len(pages) > 40
    found = {p: issue_mentions(t) for p, t in pages.items() if issue_mentions(t)}
    assert found == {}


def undocumented(package: Path, root: Path = ROOT) -> list[str]:
    """Public classes and functions (methods of public classes included) without a docstring."""
    out: list[str] = []
    for path in sorted(package.rglob("*.py")):
        _visit(ast.parse(path.read_text()).body, f"{path.relative_to(root)}:", "", out)
    return out


def _visit(body: list[ast.stmt], where: str, prefix: str, out: list[str]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            if not ast.get_docstring(node):
                out.append(f"{where}{node.lineno} {prefix}{node.name}")
            if isinstance(node, ast.ClassDef):
                _visit(node.body, where, f"{prefix}{node.name}.", out)


def test_documented_packages_have_a_docstring_on_every_public_name() -> None:
    missing = [m for pkg in DOCUMENTED for m in undocumented(ROOT / "tinyhw" / pkg)]
    assert missing == []


def test_undocumented_sees_a_missing_docstring(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text('class A:\n    """A."""\n    def f(self):\n        return 1\n    def _g(self):\n'
                              '        return 2\n\ndef h():\n    """H."""\n')
    assert undocumented(pkg, tmp_path) == ["pkg/m.py:3 A.f"]


@pytest.mark.slow
def test_readme_examples_run_in_the_order_written_on_one_board(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Every README command that an emulated board can run, in README's order, on one board and flash file
    (tests/helpers/readmerun.py says what is mapped and what skipped): each ends as README says."""
    from amfake import FW_DIR
    from clihelp import run
    from readmerun import walk

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"Debian's firmware-amd-graphics is not extracted in {FW_DIR}: run bash tests/fetch_firmware.sh",
                    pytrace=False)
    monkeypatch.chdir(tmp_path)
    w = walk(ROOT / "README.md", tmp_path, FW_DIR, run)
    ran = [s for s in w.steps if s.args is not None]
    print(f"{len(ran)} README commands ran, {len(w.steps) - len(ran)} skipped:")
    for s in w.steps:
        if s.args is None:
            print(f"  skipped ({s.skip}): {s.line}")
    assert len(ran) >= 50, [s.line for s in ran]
    assert {" ".join(s.line.split()[1:4]) for s in ran} >= {"--device usb flash", "--device usb link"}
    assert w.failed == [], "\n".join(f"{s.line}  -> exit {s.code}: {s.err.strip()[-300:]}" for s in w.failed)
