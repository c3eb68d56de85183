#!/usr/bin/env python3
"""Checks the links between the repository's Markdown files: every relative link must name a
file or directory that exists, and every `#anchor` must name a heading of its target (as GitHub
makes anchors from headings). External links (http, https, mailto) are not followed.

    python3 scripts/check-doc-links.py [file.md ...]

Without arguments it checks every Markdown file git tracks. Exits 1 and lists each broken link
(file, line, link, what is wrong); prints a one-line count otherwise. Run by .ci/run.
"""
import os
import re
import subprocess
import sys
import urllib.parse

FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
# [text](target) and ![alt](target); the target ends at the first space or closing parenthesis.
LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
INLINE_CODE = re.compile(r'`[^`]*`')


def slug(heading):
    """The anchor GitHub gives a heading: its text without Markdown, lower-cased, with every
    character that is not a letter, digit, space, hyphen or underscore removed and each space
    made a hyphen."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # links keep their text
    text = text.replace('`', '')
    text = re.sub(r'<[^>]+>', '', text)  # inline HTML
    text = text.lower()
    text = ''.join(c for c in text if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')


def scan(path):
    """(anchors, links) of a Markdown file: its headings' anchors (repeated headings get -1,
    -2, ... as on GitHub) and its links as (line number, target), outside fenced code."""
    anchors, seen, links = set(), {}, []
    fenced = False
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                anchors.add(base if n == 0 else f'{base}-{n}')
            for m in LINK.finditer(INLINE_CODE.sub('', line)):
                links.append((number, m.group(1)))
    return anchors, links


def main():
    root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True,
                          text=True, check=True).stdout.strip()
    os.chdir(root)
    files = sys.argv[1:] or subprocess.run(['git', 'ls-files', '*.md'], capture_output=True,
                                           text=True, check=True).stdout.split()
    scanned = {}

    def scan_once(path):
        if path not in scanned:
            scanned[path] = scan(path)
        return scanned[path]

    broken, checked = [], 0
    for source in files:
        _, links = scan_once(source)
        for number, target in links:
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):  # http:, https:, mailto:, ...
                continue
            checked += 1
            path, _, anchor = target.partition('#')
            path = urllib.parse.unquote(path)
            anchor = urllib.parse.unquote(anchor)
            resolved = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
            if not os.path.exists(resolved):
                broken.append(f'{source}:{number}: {target}: no such file or directory {resolved}')
                continue
            if anchor:
                if not resolved.endswith('.md') or os.path.isdir(resolved):
                    broken.append(f'{source}:{number}: {target}: an anchor into {resolved}, '
                                  'which is not a Markdown file')
                elif anchor.lower() not in scan_once(resolved)[0]:
                    broken.append(f'{source}:{number}: {target}: no heading in {resolved} '
                                  f'has the anchor #{anchor}')
    for line in broken:
        print(line)
    if broken:
        print(f'{len(broken)} broken of {checked} relative links in {len(files)} files')
        sys.exit(1)
    print(f'doc links: {checked} relative links in {len(files)} files, all resolve')


if __name__ == '__main__':
    main()
