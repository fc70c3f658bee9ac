#!/usr/bin/env python3
"""Checks that the C++ shown in the Markdown docs is the code the test suite compiles.

    python3 scripts/check_doc_snippets.py         # exits 1 on any difference
    python3 scripts/check_doc_snippets.py --fix   # rewrites the Markdown copies from the files

In README.md and docs/**/*.md, a C++ block is written as

    <!-- snippet: docs/snippets/first_function.cpp -->
    ```cpp
    ...the file's text, verbatim...
    ```
    <!-- end snippet -->

The file (a path from the repository root) is compiled and run by the docs_snippets tests;
this script checks that the fenced copy equals it. A ```cpp block outside such markers is an
error too: it would be code that nothing compiles.
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNIPPET_DIR = ROOT / "docs" / "snippets"

BEGIN = re.compile(r"^<!--\s*snippet:\s*(\S+)\s*-->\s*$")
END = re.compile(r"^<!--\s*end snippet\s*-->\s*$")
FENCE_OPEN = re.compile(r"^```\s*(\S*)\s*$")
CPP_LANGS = {"cpp", "c++", "cxx", "cc", "hpp"}


def markdown_files():
    files = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    return [f for f in files if f.is_file()]


def check_file(md: Path, used: set):
    """Returns (problems, new text or None)."""
    rel = md.relative_to(ROOT).as_posix()
    lines = md.read_text(encoding="utf-8").split("\n")
    problems = []
    out = []
    changed = False
    i = 0
    while i < len(lines):
        line = lines[i]
        begin = BEGIN.match(line)
        fence = FENCE_OPEN.match(line)
        if fence and not begin:
            # A fenced block outside any snippet marker: skip it whole, complaining if it is C++.
            if fence.group(1).lower() in CPP_LANGS:
                problems.append(f"{rel}:{i + 1}: a ```{fence.group(1)} block outside <!-- snippet: ... --> markers; "
                                f"put the code in docs/snippets/ and include it with the markers")
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.extend(lines[i:j + 1])
            i = j + 1
            continue
        if not begin:
            out.append(line)
            i += 1
            continue
        where = f"{rel}:{i + 1}"
        path = ROOT / begin.group(1)
        if not path.is_file():
            problems.append(f"{where}: snippet file {begin.group(1)} does not exist")
            out.append(line)
            i += 1
            continue
        used.add(path.resolve())
        expected = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
        # The marker, then a ```cpp fence, the code, the closing fence and the end marker.
        j = i + 1
        if j >= len(lines) or not FENCE_OPEN.match(lines[j]) or FENCE_OPEN.match(lines[j]).group(1).lower() not in CPP_LANGS:
            problems.append(f"{where}: expected a ```cpp fence on the line after the snippet marker")
            out.append(line)
            i += 1
            continue
        k = j + 1
        while k < len(lines) and lines[k].rstrip() != "```":
            k += 1
        if k >= len(lines):
            problems.append(f"{where}: the ```cpp block after the snippet marker is not closed")
            out.extend(lines[i:])
            break
        e = k + 1
        if e >= len(lines) or not END.match(lines[e]):
            problems.append(f"{rel}:{k + 2}: expected <!-- end snippet --> right after the closing fence")
            out.extend(lines[i:k + 1])
            i = k + 1
            continue
        shown = lines[j + 1:k]
        if shown != expected:
            changed = True
            first = next((n for n, (a, b) in enumerate(zip(shown, expected)) if a != b), min(len(shown), len(expected)))
            detail = (f"first difference at line {first + 1} of the snippet:\n"
                      f"    markdown: {shown[first] if first < len(shown) else '<end of block>'}\n"
                      f"    file:     {expected[first] if first < len(expected) else '<end of file>'}")
            problems.append(f"{where}: the copy of {begin.group(1)} differs from the file; {detail}")
        out.append(line)
        out.append(lines[j])
        out.extend(expected)
        out.append(lines[k])
        out.append(lines[e])
        i = e + 1
    return problems, ("\n".join(out) if changed else None)


def main() -> int:
    parser = argparse.ArgumentParser(description="Check that Markdown C++ snippets equal docs/snippets/ files.")
    parser.add_argument("--fix", action="store_true", help="rewrite the Markdown copies from the snippet files")
    args = parser.parse_args()
    used = set()
    problems = []
    fixed = []
    for md in markdown_files():
        found, new_text = check_file(md, used)
        if args.fix and new_text is not None:
            md.write_text(new_text, encoding="utf-8")
            fixed.append(md.relative_to(ROOT).as_posix())
            found = [p for p in found if "differs from the file" not in p]
        problems.extend(found)
    unused = sorted(p.relative_to(ROOT).as_posix() for p in SNIPPET_DIR.glob("*.cpp") if p.resolve() not in used)
    for path in unused:
        print(f"check_doc_snippets.py: note: {path} is compiled but shown in no Markdown file")
    for f in fixed:
        print(f"check_doc_snippets.py: rewrote the snippet copies in {f}")
    if problems:
        for p in problems:
            print(f"check_doc_snippets.py: {p}", file=sys.stderr)
        print(f"check_doc_snippets.py: {len(problems)} problem(s); "
              f"`python3 scripts/check_doc_snippets.py --fix` copies the files into the Markdown", file=sys.stderr)
        return 1
    n = len(used)
    print(f"check_doc_snippets.py: {n} snippet file(s) shown, every copy matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
