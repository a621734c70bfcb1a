#!/usr/bin/env python3
"""Checks that a document quotes example files exactly, and quotes all of them.

In the document, a line `<!-- example: examples/cpp/NAME -->` is followed by a fenced code block
(```cpp ... ```) that must equal the file examples/cpp/NAME (relative to the repository root, the
document's parent's parent). Every file in the examples directory must be quoted once.

Usage: scripts/check_doc_examples.py docs/cpp-api.md examples/cpp   (exit status 1 with the
differences when they do not match)
"""
import difflib
import pathlib
import re
import sys


def main():
    doc = pathlib.Path(sys.argv[1])
    examples = pathlib.Path(sys.argv[2])
    root = doc.resolve().parent.parent
    text = doc.read_text()
    pattern = re.compile(r'<!-- example: (\S+) -->\n```\w*\n(.*?)^```$', re.S | re.M)
    problems = []
    quoted = {}
    for match in pattern.finditer(text):
        name, block = match.group(1), match.group(2)
        path = root / name
        if name in quoted:
            problems.append(f'{doc}: {name} is quoted twice')
        quoted[name] = True
        if not path.is_file():
            problems.append(f'{doc}: quotes {name}, which does not exist')
            continue
        want = path.read_text()
        if block != want:
            diff = difflib.unified_diff(want.splitlines(), block.splitlines(), name, f'{doc} quoting it', lineterm='')
            problems.append('\n'.join(diff))
    for path in sorted(examples.iterdir()):
        name = str(path.resolve().relative_to(root))
        if path.suffix in ('.cc', '.h') and name not in quoted:
            problems.append(f'{doc}: does not quote {name}')
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f'check_doc_examples: {doc} quotes {len(quoted)} files exactly')
    return 0


if __name__ == '__main__':
    sys.exit(main())
