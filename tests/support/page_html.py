"""A rendered console page parsed into elements, so a test reads what a person reads (a cell's
text, a heading, a link's target) rather than grepping the markup for a word that may be there
for another reason.

The standard library's parser, into a small tree: each :class:`Element` has its tag, its
attributes, its children and its text with entities decoded (``&lt;`` becomes ``<``), as a
browser shows it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser

__all__ = ["Element", "bytes_as_shown", "parse_page"]

#: Elements that never have children or a closing tag.
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)


@dataclass
class Element:
    """One element: its tag, attributes (a bare attribute's value is ``""``), children and
    text pieces in order."""

    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Element | str] = field(default_factory=list)

    def text(self) -> str:
        """Its text and its descendants', whitespace runs folded into one space."""
        return " ".join("".join(self._pieces()).split())

    def text_as_written(self) -> str:
        """Its text and its descendants', whitespace kept (what a ``<pre>`` shows)."""
        return "".join(self._pieces())

    def _pieces(self) -> Iterator[str]:
        for child in self.children:
            if isinstance(child, str):
                yield child
            else:
                yield from child._pieces()

    def iter(self) -> Iterator[Element]:
        """This element and every element under it, in document order."""
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str | None) -> list[Element]:
        """The elements under (and including) this one with ``tag`` (any when None) and each
        attribute given (``data_named="x"`` is ``data-named="x"``; None: present, any value)."""
        wanted = {name.replace("_", "-"): value for name, value in attrs.items()}
        return [each for each in self.iter() if _matches(each, tag, wanted)]

    def find(self, tag: str | None = None, **attrs: str | None) -> Element:
        """The one element :meth:`find_all` finds; fails the test unless exactly one."""
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"{len(found)} <{tag or '*'} {attrs}> elements, not one"
        return found[0]

    def where(self, test: Callable[[Element], bool]) -> list[Element]:
        """The elements under (and including) this one that pass ``test``."""
        return [each for each in self.iter() if test(each)]


def _matches(element: Element, tag: str | None, wanted: dict[str, str | None]) -> bool:
    if tag is not None and element.tag != tag:
        return False
    return all(
        name in element.attrs and (value is None or element.attrs[name] == value)
        for name, value in wanted.items()
    )


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document")
        self._open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self._open[-1].children.append(element)
        if tag not in _VOID:
            self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open[-1].children.append(Element(tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self._open) - 1, 0, -1):
            if self._open[depth].tag == tag:
                del self._open[depth:]
                return

    def handle_data(self, data: str) -> None:
        self._open[-1].children.append(data)


def parse_page(html: str) -> Element:
    """The document ``html`` as a tree of :class:`Element` under a ``#document`` root."""
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


_MARK = re.compile(r'<span class="mark mark-(bytes|controls)" title="[^"<>]*">([^<]*)</span>')


def bytes_as_shown(block: str) -> bytes:
    """The bytes a body shown as received (the HTML inside its ``<pre data-raw>``) says were
    received: its text unescaped, each mark decoded (``\\xNN`` a byte that was not UTF-8,
    ``\\uNNNN`` a character)."""
    out = bytearray()
    at = 0
    for match in _MARK.finditer(block):
        out += unescape(block[at : match.start()]).encode("utf-8")
        for code in re.findall(r"\\[xu]([0-9a-f]+)", match.group(2)):
            number = int(code, 16)
            out += bytes([number]) if match.group(1) == "bytes" else chr(number).encode()
        at = match.end()
    out += unescape(block[at:]).encode("utf-8")
    return bytes(out)
