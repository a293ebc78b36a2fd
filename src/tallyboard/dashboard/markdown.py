"""Markdown of notes and of texts logged with `markdown=True`, rendered to HTML that is safe to show.

Why two well-kept libraries and no regular expressions of ours: rendering Markdown by hand is how
XSS slips in (a link to `javascript:`, an attribute broken out of). markdown-it-py renders
CommonMark (plus tables and strikethrough) with raw HTML disabled, so `<script>` in the source
stays text; nh3 (the Rust `ammonia` sanitizer) then keeps only an allowlist of tags and
attributes and of URL schemes (http, https, mailto), whatever the renderer produced. Links get
rel="noopener noreferrer nofollow". Both come with the [dashboard] extra.
"""

from __future__ import annotations

import functools

import nh3
from markdown_it import MarkdownIt

# No img: the dashboard fetches nothing from elsewhere; a Markdown image stays its alt text.
TEXT_TAGS = ("p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote", "a")
BLOCK_TAGS = ("ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6")
TABLE_TAGS = ("table", "thead", "tbody", "tr", "th", "td")
TAGS = frozenset((*TEXT_TAGS, *BLOCK_TAGS, *TABLE_TAGS))

ATTRIBUTES = {"a": {"href", "title"}}
URL_SCHEMES = {"http", "https", "mailto"}
LINK_REL = "noopener noreferrer nofollow"


@functools.cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


def render(source: str) -> str:
    """Sanitised HTML for the Markdown `source`."""
    html = _parser().render(source)
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES, link_rel=LINK_REL)
