"""The README and docs/ say what the code does: the README's example runs as shown, the
state-table reference is the schemas', and every link leads somewhere."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from state_tables.schemas import reference

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))


def test_the_readme_is_a_front_door_and_every_link_resolves():
    assert README.stat().st_size < 12_000, "the README is a front door: move detail to docs/"
    for page in [README, *DOCS]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name} links to {target}"
    linked = set(re.findall(r"\(docs/([\w-]+\.md)\)", README.read_text()))
    assert linked == {p.name for p in DOCS}, "the README's table lists every page of docs/"


def test_the_state_table_reference_is_generated_from_the_schemas():
    page = (ROOT / "docs" / "state-tables.md").read_text()
    start = page.index("-->\n\n", page.index("<!-- generated from state_tables/schemas.py")) + 5
    block = page[start:page.index("\n<!-- end of the generated reference -->")]
    assert block == reference(), ("docs/state-tables.md differs from state_tables/schemas.py: "
                                  "paste the output of `python -m state_tables.schemas`")


def _layout_entries() -> dict[str, set[str]]:
    """docs/layout.md's tree: the file names each folder's block mentions (a continuation
    line belongs to the entry above it: a folder's, or a module's, in its parent)."""
    [tree] = _blocks((ROOT / "docs" / "layout.md").read_text(), "")
    named: dict[str, set[str]] = {}
    path: list[tuple[int, str]] = []  # (indent, folder) of the open folder entries
    owner = ""
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip())
        entry = re.match(r"\s*(\S+)\s*", line)
        if entry is None:
            continue
        if indent <= 2:  # an entry: a folder (``name/``) or a module of the open folder
            path = [(i, f) for i, f in path if i < indent]
            if entry[1].endswith("/"):
                path.append((indent, entry[1]))
            owner = "".join(f for _, f in path)
        for name in re.findall(r"[\w.]+\.py\b", line):
            named.setdefault(owner, set()).add(name)
    return named


def test_the_layout_names_every_module_where_it_is():
    named = _layout_entries()
    modules = [p.relative_to(ROOT) for package in ("framework", "state_tables")
               for p in (ROOT / package).rglob("*.py")
               if p.name not in ("__init__.py", "__main__.py")]
    missing = [str(m) for m in modules if m.name not in named.get(f"{m.parent}/", set())]
    assert not missing, f"docs/layout.md does not name {', '.join(missing)} in their folder"


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def _masked(text: str) -> list[str]:
    """Lines with what differs from run to run (seconds, run ids) masked."""
    text = re.sub(r"\b[0-9a-f]{32}\b", "RUN_ID", text)
    return re.sub(r"\b\d+(\.\d+)? s\b", "N s", text).strip().splitlines()


@pytest.mark.compat
@pytest.mark.spark  # deltamark run, in processes of its own
@pytest.mark.parametrize("delta", ["auto", "embedded"])
def test_the_readme_example_runs_as_shown(tmp_path, delta):
    """The files the README's example names are written as its code blocks show them, its
    commands run in that directory, and their output is the README's; on the Delta path
    of the conf (auto: native where Delta's jars are) and on the embedded one."""
    readme = README.read_text()
    for block in _blocks(readme, "python") + _blocks(readme, "yaml"):
        first, _, body = block.partition("\n")
        path = tmp_path / first.removeprefix("# ")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body + (f"delta: {delta}\n" if path.name == "deltamark.yaml" else ""))
    [console] = _blocks(readme, "console")
    steps = re.split(r"^\$ ", console, flags=re.M)[1:]
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for step in steps:
        command, _, shown = step.partition("\n")
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=240)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
        assert _masked(done.stdout) == _masked(shown), command
        # in a pipe, plain log lines: no terminal codes, no live line of Spark's stages
        assert "\x1b[" not in done.stderr and "Spark: stage" not in done.stderr, command
        if command == "deltamark run copy_orders" and "succeeded" in shown:  # runs 1, 3
            assert "deltamark.job.copy_orders: " in done.stderr, done.stderr[-2000:]
