#!/usr/bin/env python3
"""Check every relative Markdown link and anchor in README.md and docs/.

Usage: scripts/check-links.py [FILE.md ...]   (default: README.md, docs/**/*.md)

A link is checked when it is relative (no scheme, not mailto:): the file it
names must exist (relative to the linking file), and a `#fragment` must be
the GitHub anchor of a heading in the target Markdown file (or in the same
file for `#fragment` alone). Links inside code blocks and code spans are
ignored. Exits 1 and lists each broken link as FILE:LINE: TARGET: REASON.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def strip_code(lines):
    """Yield (line number, line, line with code spans blanked), fenced blocks dropped."""
    fence = None
    for n, line in enumerate(lines, 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line, re.sub(r"`[^`]*`", lambda s: " " * len(s.group(0)), line)


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, found = {}, set()
        with open(path, encoding="utf-8") as f:
            for _, line, _ in strip_code(f.read().split("\n")):
                m = HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(2))
                k = seen.get(base, 0)
                seen[base] = k + 1
                found.add(base if k == 0 else f"{base}-{k}")
        # Explicit HTML anchors.
        with open(path, encoding="utf-8") as f:
            found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", f.read()))
        _anchors[path] = found
    return _anchors[path]


def check(path):
    errors = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, _, line in strip_code(lines):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto:
            file_part, _, frag = target.partition("#")
            dest = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            rel = os.path.relpath(path, ROOT)
            if not os.path.exists(dest):
                errors.append(f"{rel}:{n}: {target}: no such file")
                continue
            if frag and dest.endswith(".md") and frag not in anchors(dest):
                errors.append(f"{rel}:{n}: {target}: no heading with anchor #{frag}")
    return errors


def main(argv):
    files = [os.path.abspath(a) for a in argv[1:]]
    if not files:
        files = [os.path.join(ROOT, "README.md")]
        for d, _, names in os.walk(os.path.join(ROOT, "docs")):
            files += [os.path.join(d, x) for x in sorted(names) if x.endswith(".md")]
    errors = [e for f in files for e in check(f)]
    for e in errors:
        print(e)
    print(f"{len(files)} files, {len(errors)} broken links", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
