#!/usr/bin/env python3
"""Checks the relative links of the documentation: README.md and docs/*.md (or the Markdown
files given as arguments).

usage: check_doc_links.py [FILE.md ...]

Every Markdown link or image, [text](target) or [label]: target, outside code blocks and code
spans, whose target is not a URL (http:, https:, mailto:) must name a file or folder that exists
inside the repository, and its #anchor, if any, a heading of that Markdown file (GitHub's
anchors: the heading's text in lower case, punctuation removed, spaces made hyphens; a repeated
heading gets -1, -2, ...) or an explicit <a id="..."> / <a name="...">. A target outside the
repository (an absolute path, or ../ past its root) is refused: the documentation is
self-contained. Prints each broken link as FILE:LINE: TARGET: why, and exits 1 if there is one,
else prints how many links it checked and exits 0.
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(?:.|\n)*?(?<!`)\1(?!`)")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)\s*=\s*\"([^\"]+)\"", re.I)
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def blank_code(text):
    """The text with fenced code blocks and code spans replaced by spaces (line numbers kept)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            out.append("")
        elif fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), "\n".join(out))


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(?<!\w)[*_]+|[*_]+(?!\w)", "", text)  # emphasis, not snake_case
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        seen, found = {}, set(HTML_ANCHOR.findall(text))
        fence = None
        for line in text.split("\n"):
            m = FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)[0] * len(m.group(1))
                continue
            if fence is not None:
                if m and m.group(1).startswith(fence):
                    fence = None
                continue
            h = HEADING.match(line)
            if h:
                base = slug(h.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else "%s-%d" % (base, n))
        cache[path] = found
    return cache[path]


def check(md, problems):
    with open(md, encoding="utf-8") as f:
        text = blank_code(f.read())
    targets = [(m.start(2), m.group(2)) for m in INLINE_LINK.finditer(text)]
    targets += [(m.start(1), m.group(1)) for m in REF_DEF.finditer(text)]
    for offset, target in sorted(targets):
        line = text.count("\n", 0, offset) + 1
        where = "%s:%d: %s" % (os.path.relpath(md, ROOT), line, target or "(empty)")
        if URL.match(target):
            continue
        path, _, anchor = target.partition("#")
        if not path and not anchor:
            problems.append(where + ": an empty link")
            continue
        if path.startswith("/"):
            problems.append(where + ": an absolute path (outside the repository)")
            continue
        dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if os.path.commonpath([dest, ROOT]) != ROOT:
            problems.append(where + ": outside the repository")
        elif not os.path.exists(dest):
            problems.append(where + ": no such file")
        elif anchor:
            if not dest.endswith(".md") or os.path.isdir(dest):
                problems.append(where + ": an anchor into a file that is not Markdown")
            elif anchor not in anchors(dest):
                problems.append(where + ": no heading or anchor '%s' in %s"
                                % (anchor, os.path.relpath(dest, ROOT)))
    return len(targets)


def main(argv):
    files = argv[1:]
    if not files:
        docs = os.path.join(ROOT, "docs")
        files = [os.path.join(ROOT, "README.md")] + sorted(
            os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    problems, count = [], 0
    for md in files:
        count += check(os.path.abspath(md), problems)
    for p in problems:
        print(p)
    if problems:
        print("check_doc_links: %d broken link(s) of %d" % (len(problems), count))
        return 1
    print("check_doc_links: %d links in %d files, all resolve" % (count, len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
