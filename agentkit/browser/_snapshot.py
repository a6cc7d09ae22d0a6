"""A page's accessibility tree as an outline a model can read (private, pure).

Chromium's ``Accessibility.getFullAXTree`` nodes become one line each::

    - heading "Welcome" (level=1)
    - text: Some text here.
    - textbox "Name" [ref=e14] (value="Ada")
    - button "Send" [ref=e15]
    - link "Docs" [ref=e16] (url=http://127.0.0.1:8123/docs)

Elements a user can act on (links, buttons, inputs, focusable elements) carry a ref,
``e`` plus the element's DOM node id, which the browser's ``click`` and ``type`` accept.
Nodes that only group others (ignored, ``generic``, ``none``, unnamed containers) are left
out and their children rise to their level; text repeating the name of the element it
sits in is said once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_ACTIONABLE = frozenset({
    "button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox", "option",
    "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider", "spinbutton", "treeitem",
})
_TRANSPARENT = frozenset({"none", "generic", "LabelText", "paragraph", "group", "Section", "div",
                          "MenuListPopup", "LineBreak"})
_SKIPPED = frozenset({"InlineTextBox"})
_SHOWN = ("checked", "selected", "pressed", "expanded", "disabled", "required", "readonly", "level", "url")


def _value(field: Any) -> Any:
    return field.get("value") if isinstance(field, Mapping) else None


def _properties(node: Mapping[str, Any]) -> dict[str, Any]:
    return {p.get("name"): _value(p.get("value")) for p in node.get("properties") or ()}


def _line(node: Mapping[str, Any], role: str, name: str) -> str:
    props = _properties(node)
    parts = [f"- {role}"]
    if name:
        parts.append(f'"{name}"')
    if (role in _ACTIONABLE or props.get("focusable")) and node.get("backendDOMNodeId") is not None:
        parts.append(f"[ref=e{node['backendDOMNodeId']}]")
    shown = []
    value = _value(node.get("value"))
    if value not in (None, "") and value != name:
        shown.append(f"value={str(value)!r}".replace("'", '"'))
    for key in _SHOWN:
        v = props.get(key)
        if v is None or v is False or v in ("false", ""):
            continue
        shown.append(key if v is True or v == "true" else f"{key}={v}")
    if shown:
        parts.append("(" + ", ".join(shown) + ")")
    return " ".join(parts)


def render_outline(nodes: list[dict[str, Any]]) -> str:
    """The outline of a full accessibility tree (nodes as Chromium lists them)."""
    by_id = {n.get("nodeId"): n for n in nodes}
    if not nodes:
        return ""
    lines: list[str] = []
    # iterative depth-first walk: deep pages must not exhaust Python's stack
    stack: list[tuple[Mapping[str, Any], int, str]] = [(nodes[0], 0, "")]
    while stack:
        node, depth, context = stack.pop()
        role = str(_value(node.get("role")) or "")
        name = " ".join(str(_value(node.get("name")) or "").split())
        child_depth, child_context = depth, context
        if role in _SKIPPED:
            continue
        if role == "StaticText":
            if name and name not in context:
                lines.append("  " * depth + f"- text: {name}")
            continue
        shown = not node.get("ignored") and role != "RootWebArea" and not (
            role in _TRANSPARENT and not name and not _properties(node).get("focusable"))
        if shown:
            lines.append("  " * depth + _line(node, role, name))
            child_depth, child_context = depth + 1, name
        children = [by_id[c] for c in node.get("childIds") or () if c in by_id]
        stack.extend((c, child_depth, child_context) for c in reversed(children))
    return "\n".join(lines)
