"""Every code block in README.md, CONTRIBUTING.md and docs/*.md runs as written.

The rules (CONTRIBUTING.md, "Documentation examples", says the same to writers):

* A ```` ```python ```` block is executed. The python blocks of one page run in order in
  one fresh namespace (a page is one story: a later block may use what an earlier one
  defined, nothing else), with a fresh temporary directory as the working directory.
  That directory holds a copy of the repository's ``examples/`` folder, so a page may
  start ``examples/mcp_server_demo.py`` as it would from a checkout.
* Provider spec strings and SDK clients reach loopback fakes: ``OPENAI_BASE_URL`` /
  ``ANTHROPIC_BASE_URL`` / ``GOOGLE_GEMINI_BASE_URL`` point at servers from ``tests/fakes`` speaking the real wire
  formats, with ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` set to dummy keys. The fakes
  answer like a cooperative model (``tests/fakes/plausible.py``: they call a tool when
  tools are offered, then answer), so the official SDKs' code paths really run.
* A page that leaves files in its directory (a session store, notes) is run a second
  time there, as a reader who runs it again would: it must work then too.
* A ```` ```text ```` block (a file layout, sample output) is not code and is not run; a
  ```` ```json ```` block must parse.
* Any other block (``bash``, a block without a language) is run by nobody here, so it
  must be preceded by a marker naming why: ``<!-- docs-test: not run: <reason> -->`` on
  the line right before its opening fence (an HTML comment, invisible on the rendered
  page). Install commands are the usual case. A python block may not carry it: make the
  block run instead.
* A page that names ``bedrock`` reaches a loopback Bedrock Runtime fake through boto3's own
  ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, with dummy AWS keys and a region in the environment.
* A page that reads ``DATABASE_URL`` gets the URL of the tests' throwaway PostgreSQL
  server (tests/_pg.py) in it.
* A page that reads ``REDIS_URL`` gets the URL of a throwaway redis-server (tests/_celery.py).
* A page that starts a ``ChromiumBrowser(`` needs Chromium: without it the page's test
  skips, saying how to install it (tests/_browser.py), and fails in CI.
* Every ``pip install '<name>[<extras>]'`` on a page, in a block or in the text, must name
  the distribution and extras pyproject.toml defines.

A failing block fails its page's test with the page, the block's first line and the
traceback (whose line numbers are the page's own).
"""

from __future__ import annotations

import builtins
import gc
import json
import os
import re
import shutil
import subprocess
import symtable
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest depends on tomli before 3.11
    import tomli as tomllib

from fakes.plausible import anthropic_responder, bedrock_responder, gemini_responder, openai_responder
from fakes.server import FakeServer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!--\s*docs-test:\s*not run:\s*(?P<reason>\S.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass(frozen=True, kw_only=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int
    """1-based line of the block's first code line (the line after the opening fence)."""
    language: str
    code: str
    skip_reason: str | None

    @property
    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}"


def _shown(page: Path) -> Path:
    return page.relative_to(ROOT) if page.is_relative_to(ROOT) else page


class DocBlockError(AssertionError):
    """A block of a page failed (or breaks the rules above)."""


def extract_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with their line numbers and markers."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, info = opening.group("fence"), opening.group("info").strip()
        previous = lines[i - 1].strip() if i else ""
        marker = MARKER.match(previous)
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if end == len(lines):
            raise DocBlockError(f"{page}:{i + 1}: a code fence is never closed")
        blocks.append(
            Block(
                page=page,
                line=i + 2,
                language=info.split()[0].lower() if info else "",
                code="\n".join(lines[i + 1 : end]) + "\n",
                skip_reason=marker.group("reason") if marker else None,
            )
        )
        i = end + 1
    return blocks


def _pyproject() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project: dict[str, Any] = tomllib.load(f)["project"]
    return project


_INSTALL = re.compile(r"pip install\s+(?:-e\s+)?['\"]?(?P<name>[A-Za-z0-9_.\-]+)\[(?P<extras>[^\]]+)\]")


def check_unrun_block(block: Block) -> None:
    """A block that is not run must say why."""
    if block.skip_reason is None:
        raise DocBlockError(
            f"{block.where}: a {block.language or 'plain'} block that nothing runs. Make it a "
            f"```python block that runs, a ```text block if it is not code, or put "
            f"'<!-- docs-test: not run: <reason> -->' on the line before its fence"
        )


def check_json_block(block: Block) -> None:
    """A ``json`` block is data a reader may copy: it must parse."""
    try:
        json.loads(block.code)
    except ValueError as exc:
        raise DocBlockError(
            f"{block.where}: the json block starting at line {block.line} does not parse: {exc}"
        ) from None


def check_install_hints(page: Path) -> None:
    """Every ``pip install '<name>[<extras>]'`` on the page (in a block or in the text)
    names this project's distribution and extras it defines."""
    project = _pyproject()
    dist = project["name"]
    extras = set(project.get("optional-dependencies", {}))
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        for found in _INSTALL.finditer(line):
            name = found.group("name")
            if name not in (dist, "."):
                raise DocBlockError(
                    f"{_shown(page)}:{number}: installs {name!r}, but this project is distributed as {dist!r}"
                )
            for extra in (e.strip() for e in found.group("extras").split(",")):
                if extra not in extras:
                    raise DocBlockError(
                        f"{_shown(page)}:{number}: installs the extra {extra!r}, which pyproject.toml does not define "
                        f"(it has {', '.join(sorted(extras))})"
                    )


def _close_leftovers(namespace: dict[str, Any]) -> None:
    """Close what a page left open (sessions, contexts, MCP toolsets), as its reader's
    process would on exit; a page that closes its own objects loses nothing."""
    for value in list(namespace.values()):
        try:
            close = getattr(value, "close", None)
        except Exception:  # a proxy that needs a context to look at (flask.request)
            continue
        if callable(close) and type(value).__module__.startswith("agentkit"):
            try:
                close()
            except Exception:
                pass


def _globals_used_in_bodies(code: str) -> set[str]:
    """Global names that the functions, lambdas and classes of ``code`` refer to. Running
    a block only checks the names its top level uses; a function body that is never
    called (a tool the example only defines) is checked through these."""
    used: set[str] = set()

    def walk(table: symtable.SymbolTable) -> None:
        for child in table.get_children():
            used.update(s.get_name() for s in child.get_symbols() if s.is_referenced() and s.is_global())
            walk(child)

    walk(symtable.symtable(code, "<block>", "exec"))
    return used


def check_names_resolve(blocks: list[Block], namespace: dict[str, Any]) -> None:
    """Every global name a page's functions use is defined by the page (or a builtin)."""
    for block in blocks:
        missing = sorted(n for n in _globals_used_in_bodies(block.code) if n not in namespace
                         and not hasattr(builtins, n))
        if missing:
            raise DocBlockError(
                f"{block.where}: the python block starting at line {block.line} uses "
                f"{', '.join(missing)}, defined nowhere on the page: define or import it"
            )


def run_page(page: Path) -> list[Block]:
    """Run a page's python blocks in order in one namespace (in the current directory);
    raise :class:`DocBlockError` naming the page and line of the first block that fails.
    Returns the blocks that ran."""
    check_install_hints(page)
    ran: list[Block] = []
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        for block in extract_blocks(page):
            if block.language == "json" and block.skip_reason is None:
                check_json_block(block)
                continue
            if block.language != "python" or block.skip_reason is not None:
                if block.language != "text":
                    check_unrun_block(block)
                continue
            # Pad so that tracebacks give the page's own line numbers.
            source = "\n" * (block.line - 1) + block.code
            try:
                exec(compile(source, str(page), "exec"), namespace)  # the page's own code
            except (Exception, SystemExit) as exc:  # report any failure, with its block
                detail = "".join(traceback.format_exception(exc)[-12:])
                raise DocBlockError(
                    f"{block.where}: the python block starting at line {block.line} failed: "
                    f"{type(exc).__name__}: {exc}\n{detail}"
                ) from exc
            ran.append(block)
        check_names_resolve(ran, namespace)
    finally:
        _close_leftovers(namespace)
        namespace.clear()
        gc.collect()
    return ran


@pytest.fixture
def providers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeServer, FakeServer]]:
    """Loopback OpenAI and Anthropic fakes, wired in through the SDKs' own environment
    variables, as a reader's real keys would be."""
    with FakeServer(openai_responder) as openai, FakeServer(anthropic_responder) as anthropic:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{openai.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs-test")
        for name in ("AGENTKIT_MODEL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "ANTHROPIC_AUTH_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        yield openai, anthropic


@pytest.fixture
def bedrock_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    """A loopback Bedrock Runtime fake, reached through boto3's own endpoint and credential
    environment variables."""
    from fakes import bedrock_wire

    with FakeServer(bedrock_responder) as server:
        bedrock_wire.fake_credentials(monkeypatch)
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        yield server


@pytest.fixture(autouse=True)
def gemini_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    """A loopback Gemini fake, wired in through the google-genai SDK's own
    ``GOOGLE_GEMINI_BASE_URL``, with ``GEMINI_API_KEY`` set to a dummy key."""
    with FakeServer(gemini_responder) as gemini:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.url)
        monkeypatch.setenv("GEMINI_API_KEY", "gemini-docs-test")
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        yield gemini


# a page is many blocks (docs/mcp.md starts a dozen servers): one page's whole run may take
# minutes on a loaded 2-core machine, so each page gets more than the default 120 s
@pytest.mark.timeout(600)
@pytest.mark.filterwarnings("ignore:`langchain-community` is being sunset:DeprecationWarning")
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_block_of_the_page_runs(
    page: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    providers: tuple[FakeServer, FakeServer],
    request: pytest.FixtureRequest,
) -> None:
    if "DATABASE_URL" in page.read_text(encoding="utf-8"):  # a page about the PostgreSQL stores
        monkeypatch.setenv("DATABASE_URL", request.getfixturevalue("pg_cluster").url)
    if "REDIS_URL" in page.read_text(encoding="utf-8"):  # a page about Celery (agentkit.celery)
        monkeypatch.setenv("REDIS_URL", request.getfixturevalue("redis_server").url)
    if "bedrock" in page.read_text(encoding="utf-8"):  # a page using AWS Bedrock
        request.getfixturevalue("bedrock_provider")
    if "ChromiumBrowser(" in page.read_text(encoding="utf-8"):  # a page driving a browser
        request.getfixturevalue("chromium")  # skips without one; fails in CI
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(page)])
    failure = None
    try:
        run_page(page)
        if {p.name for p in tmp_path.iterdir()} - {"examples"}:
            # It left files behind (a store, notes): a reader who runs it again meets them.
            try:
                run_page(page)
            except DocBlockError as exc:
                raise DocBlockError(f"on a second run in the same directory (the files of the first were "
                                    f"still there, as for a reader who runs the page again): {exc}") from None
    except DocBlockError as exc:
        failure = str(exc)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    skipped = [b.where for b in extract_blocks(page) if b.language == "python" and b.skip_reason]
    assert not skipped, f"python blocks marked not run: {skipped}; make them run instead"


def test_provider_specs_on_a_page_reach_the_loopback_fakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, providers: tuple[FakeServer, FakeServer]
) -> None:
    openai, anthropic = providers
    monkeypatch.chdir(tmp_path)
    run_page(ROOT / "README.md")  # "echo" (offline), then "openai:gpt-4.1-mini" twice: one provider throughout
    assert [r.path for r in openai.requests] == ["/v1/chat/completions"] * 4  # run_agent, then the Session
    for first, second in (openai.bodies[:2], openai.bodies[2:]):
        assert [t["function"]["name"] for t in first["tools"]] == ["add"]
        assert second["messages"][-1]["role"] == "tool"  # the add tool ran
    assert openai.bodies[1]["messages"][-1]["content"] == "42"  # add(7, 35)
    headers = openai.requests[0].headers
    assert headers.get("authorization") == "Bearer sk-docs-test"
    assert anthropic.requests == []  # the README names Anthropic but does not switch to it


def test_the_gemini_section_reaches_the_gemini_fake_through_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, providers: tuple[FakeServer, FakeServer],
    gemini_fake: FakeServer, bedrock_provider: FakeServer,
) -> None:
    """docs/providers.md, "Google Gemini": the blocks reach the Gemini fake (through
    ``GOOGLE_GEMINI_BASE_URL``), the thinking model's signed function call goes back with
    its signature, and the structured output asks for ``responseJsonSchema``."""
    monkeypatch.chdir(tmp_path)
    run_page(ROOT / "docs" / "providers.md")
    paths = {r.path for r in gemini_fake.requests}
    (path,) = paths  # v1 (google-genai 3) or v1beta (2.x, the last for Python 3.10): the SDK's default
    assert path in {f"/{v}/models/gemini-2.5-flash:streamGenerateContent?alt=sse" for v in ("v1", "v1beta")}
    first, second = gemini_fake.bodies[:2]
    assert first["generationConfig"]["thinkingConfig"] == {"thinking_budget": 1024, "include_thoughts": True}
    call = next(p for p in second["contents"][1]["parts"] if "functionCall" in p)
    assert call["functionCall"]["name"] == "add" and "thoughtSignature" in call
    assert second["contents"][2]["parts"][0]["functionResponse"]["response"] == {"output": 42}
    assert any("responseJsonSchema" in b.get("generationConfig", {}) for b in gemini_fake.bodies)
    assert {r.headers["x-goog-api-key"] for r in gemini_fake.requests} == {"gemini-docs-test"}


def test_the_readmes_first_agent_runs_without_a_provider_extra_or_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a reader sees first runs right after the README's `pip install -e .`: the
    first python block needs no provider SDK, no key and no network."""
    monkeypatch.chdir(tmp_path)
    first = next(b for b in extract_blocks(ROOT / "README.md") if b.language == "python")
    blocked = "import sys\nfor name in ('openai', 'anthropic'):\n    sys.modules[name] = None  # not installed\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "AGENTKIT_"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", blocked + first.code], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "add returned: 42\n"


def test_the_sessions_listener_example_hears_every_event_of_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, providers: tuple[FakeServer, FakeServer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/sessions.md, "Listeners": the listener prints the four events of the turn
    (the question, the call of add, its result, the answer) before unsubscribe returns."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    run_page(ROOT / "docs" / "sessions.md")
    out = capsys.readouterr().out
    assert "1 user-message\n2 assistant-message\n3 tool-result\n4 assistant-message\n" in out, out


# -- the harness itself -------------------------------------------------------------------


def test_a_failing_block_is_named_by_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n```python\nvalue = 1\n```\n\nText.\n\n```python\n\nprint(value)\nadd(1, 2)\n```\n",
        encoding="utf-8",
    )
    with pytest.raises(DocBlockError) as caught:
        run_page(page)
    message = str(caught.value)
    assert f"{page}:10: the python block starting at line 10 failed: NameError" in message
    assert f'File "{page}", line 12' in message  # the traceback points at the page's line


def test_blocks_of_one_page_share_a_namespace_and_pages_do_not(tmp_path: Path) -> None:
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text("```python\nshared = 41\n```\n\n```python\nassert shared + 1 == 42\n```\n", encoding="utf-8")
    second.write_text("```python\nshared\n```\n", encoding="utf-8")
    assert [b.line for b in run_page(first)] == [2, 6]
    with pytest.raises(DocBlockError, match="NameError: name 'shared' is not defined"):
        run_page(second)


def test_a_name_used_only_inside_a_function_must_be_defined_too(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\ndef crawl(url):\n    return [fetch(p) for p in pages(url)]\n\nLIMIT = 3\n```\n\n"
        "```python\ndef pages(url):\n    return [url] * LIMIT\n```\n",
        encoding="utf-8",
    )
    with pytest.raises(DocBlockError, match=r"page.md:2: .* uses fetch, defined nowhere on the page"):
        run_page(page)


def test_a_json_block_must_parse(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('```json\n{"a": 1}\n```\n\n```json\n{"a": 1,}\n```\n', encoding="utf-8")
    with pytest.raises(DocBlockError, match=r"page.md:6: the json block starting at line 6 does not parse"):
        run_page(page)


def test_an_unmarked_shell_block_is_refused_and_a_marked_one_is_checked(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\nrm -rf build\n```\n", encoding="utf-8")
    with pytest.raises(DocBlockError, match=r"page.md:2: a bash block that nothing runs"):
        run_page(page)
    dist = _pyproject()["name"]
    page.write_text(
        f"<!-- docs-test: not run: installs packages -->\n```bash\npip install '{dist}[no-such-extra]'\n```\n",
        encoding="utf-8",
    )
    with pytest.raises(DocBlockError, match="the extra 'no-such-extra', which pyproject.toml does not define"):
        run_page(page)
    page.write_text(
        f"<!-- docs-test: not run: installs packages -->\n```bash\npip install '{dist}[mcp]'\n```\n"
        "\n```text\nanything/at/all\n```\n",
        encoding="utf-8",
    )
    assert run_page(page) == []


def test_the_pages_have_blocks_to_run() -> None:
    python_blocks = [b for p in PAGES for b in extract_blocks(p) if b.language == "python"]
    assert len(python_blocks) >= 30, "the block extractor found too few python blocks: is it broken?"


@dataclass
class _Point:
    x: int
    y: int = 0


def _plot(mode: Literal["line", "scatter"], points: list[_Point], title: Optional[str] = None) -> str:
    """Plot points."""
    return mode


def test_the_fake_models_arguments_satisfy_the_tools_schema() -> None:
    """The fakes call tools with arguments a real model would send: valid for the schema."""
    import jsonschema
    from fakes.plausible import _arguments

    from agentkit import tool

    schema = tool(_plot).input_schema
    args = _arguments(schema, "Plot 3 and 4")
    jsonschema.validate(args, schema)
    assert args == {"mode": "line", "points": [{"x": 3}]}


def test_user_pages_install_what_they_use_not_the_test_extra() -> None:
    """The test extra pulls in every SDK and test tool (langchain-community...): a user's
    page names the extra or packages it needs (docs/web.md: the `web` extra and the
    framework), and the extras list in the README names every extra pyproject.toml has."""
    users = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    sent = [p.name for p in users if re.search(r"pip install [^\n`]*\[[^\]]*\btest\b", p.read_text(encoding="utf-8"))]
    assert sent == [], f"pages that tell users to install the test extra: {sent}"
    web = (ROOT / "docs" / "web.md").read_text(encoding="utf-8")
    assert "pip install 'sync-agentkit[web]' flask`" in web
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [e for e in extras if f"`[{e}]`" not in readme] == []
