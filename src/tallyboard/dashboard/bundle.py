"""A page's ES modules joined into one script when the server starts, from the files in static/.

Why: a browser learns a module's imports only once it has the module, and even with the whole
graph preloaded it makes one request per module (~15 on the compare page) before anything draws.
One script is one request, and it is built from the source modules every time the app is created,
so those stay the one place people edit and no committed build output can go stale.

The modules are ours and keep to a small dialect, which is all this understands (anything else is
a `ValueError` at start, never a broken page): `import { a, b as c } from "./x.js"`,
`import * as X from "./x.js"`, `export function|class|const|let ...`, `export { a, b }` and
`export { a, b } from "./x.js"`. Each imported module becomes a function scope run once, in the
order ES modules are evaluated (imports first, depth first), returning its exports; the entry
module's body comes last, at the top of the bundle (itself a module: top-level await works). A
vendored classic script (uPlot's IIFE build) may go first, its global set as the page expects.
"""

from __future__ import annotations

import re
from pathlib import Path

_IMPORT = re.compile(
    r"""^import\s+(?P<what>[^;'"]*?)\s*\bfrom\s+["']\./(?P<name>[^"']+)["'];?[ \t]*$""", re.MULTILINE
)
_REEXPORT = re.compile(
    r"""^export\s*\{(?P<names>[^}]*)\}\s*from\s+["']\./(?P<name>[^"']+)["'];?[ \t]*$""", re.MULTILINE
)
_EXPORT_LIST = re.compile(r"^export\s*\{(?P<names>[^}]*)\};?[ \t]*$", re.MULTILINE)
_DECLARATION = re.compile(
    r"^export\s+(?=(?:async\s+)?(?:function\*?|class|const|let|var)\s+(?P<name>[\w$]+))", re.MULTILINE
)
_LEFT = re.compile(r"""^\s*(?:export\b|import\s+[\w{*"']|import\s*["'])""", re.MULTILINE)
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")


def imports(source: str) -> list[str]:
    """The modules a module imports or re-exports from (names relative to static/), in order."""
    found = [m["name"] for m in _IMPORT.finditer(source)] + [m["name"] for m in _REEXPORT.finditer(source)]
    return list(dict.fromkeys(found))


def evaluation_order(static: Path, entry: str) -> list[str]:
    """`entry` and every module it imports, directly or not, in ES evaluation order (a module
    after the modules it imports, the entry last). A cycle is a ValueError: scopes run once, in order."""
    order: list[str] = []
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        if name in visiting:
            raise ValueError(f"import cycle: {' -> '.join([*visiting, name])}")
        visiting.append(name)
        for target in imports((static / name).read_text(encoding="utf-8")):
            visit(target)
        visiting.pop()
        order.append(name)

    visit(entry)
    return order


def bundle(static: Path, entry: str, classic: tuple[str, ...] = ()) -> str:
    """One script holding the classic scripts `classic` (each defining the global its file is
    named after, e.g. `uPlot`), then `entry`'s module graph."""
    parts = [f"// {entry} and its imports, joined by tallyboard/dashboard/bundle.py from static/"]
    for script in classic:
        name = Path(script).name.split(".")[0]
        source = (static / script).read_text(encoding="utf-8")
        parts.append(f"globalThis.{name} = (function () {{\n{source}\nreturn {name};\n}})();")
    *modules, last = evaluation_order(static, entry)
    for name in modules:
        body, exported = _rewritten(name, (static / name).read_text(encoding="utf-8"))
        parts.append(f"const {_scope(name)} = (() => {{\n{body}\nreturn {{ {', '.join(exported)} }};\n}})();")
    parts.append(_rewritten(last, (static / last).read_text(encoding="utf-8"))[0])
    return "\n".join(parts) + "\n"


def _scope(name: str) -> str:
    """The constant a module's exports are held in."""
    return "$tb_" + re.sub(r"\W", "_", name)


def _rewritten(name: str, source: str) -> tuple[str, list[str]]:
    """The module's body with its imports bound from their scopes and `export` taken off, and the
    entries of the object its scope returns."""
    exported: list[str] = []

    def imported(match: re.Match[str]) -> str:
        what, scope = match["what"].strip(), _scope(match["name"])
        if what.startswith("* as "):
            return f"const {what[5:].strip()} = {scope};"
        if what.startswith("{") and what.endswith("}"):
            names = [_pair(part, ": ", name) for part in what[1:-1].split(",") if part.strip()]
            return f"const {{ {', '.join(names)} }} = {scope};"
        raise ValueError(f"{name}: import form the bundler does not know: {match[0]!r}")

    def reexported(match: re.Match[str]) -> str:
        scope = _scope(match["name"])
        for part in match["names"].split(","):
            if part.strip():
                inner, outer = _names(part, name)
                exported.append(f"{outer}: {scope}.{inner}")
        return ""

    def listed(match: re.Match[str]) -> str:
        exported.extend(
            _pair(part, ": ", name, swap=True) for part in match["names"].split(",") if part.strip()
        )
        return ""

    def declared(match: re.Match[str]) -> str:
        exported.append(match["name"])
        return ""

    body = _IMPORT.sub(imported, source)
    body = _REEXPORT.sub(reexported, body)
    body = _EXPORT_LIST.sub(listed, body)
    body = _DECLARATION.sub(declared, body)
    left = _LEFT.search(body)
    if left is not None:
        line = body[left.start() :].strip().splitlines()[0]
        raise ValueError(f"{name}: import or export the bundler does not know: {line!r}")
    return body, exported


def _names(part: str, module: str) -> tuple[str, str]:
    """'a' -> ('a', 'a'); 'a as b' -> ('a', 'b')."""
    words = part.split()
    if len(words) == 1:
        words = [words[0], "as", words[0]]
    if len(words) != 3 or words[1] != "as" or not all(_IDENTIFIER.fullmatch(w) for w in words[::2]):
        raise ValueError(f"{module}: a name the bundler does not know: {part.strip()!r}")
    return words[0], words[2]


def _pair(part: str, colon: str, module: str, swap: bool = False) -> str:
    """An import's 'a as b' as the destructuring 'a: b' (or an export list's as 'b: a')."""
    inner, outer = _names(part, module)
    if inner == outer:
        return inner
    return f"{outer}{colon}{inner}" if swap else f"{inner}{colon}{outer}"
