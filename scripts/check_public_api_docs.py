#!/usr/bin/env python3
"""Checks the public headers (include/stoke/*.h) keep what docs/cpp-api.md promises.

- Every public declaration (a type, a field, a function, an enum value) has a comment: one that ends
  a line of the declaration, or comment lines right above it. Private sections, function bodies,
  friend and deleted declarations are not checked.
- One top-level namespace block per header, and every #include before the first line of code.

Usage: scripts/check_public_api_docs.py [DIR]   (default include/stoke; exit status 1 with a list of
the problems, "file:line: what")
"""
import pathlib
import re
import sys


def without_strings(text):
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def check(path):
    problems = []
    scopes = []  # per open brace: [kind, access]; kind is ns, class, enum or body
    top_namespaces = 0
    seen_code = False
    doc_above = False  # the previous line was a comment line
    decl = None  # the declaration being read: [first line number, text, documented]
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = without_strings(raw)
        code, slash, comment = line.partition('//')
        code = code.strip()
        if not code:
            if slash:
                doc_above = True
            elif not raw.strip():
                doc_above = False
            continue
        if code.startswith('#'):
            if code.startswith('#include') and seen_code:
                problems.append(f'{path}:{number}: #include after the first line of code')
            doc_above = False
            continue
        seen_code = True
        kind, access = scopes[-1] if scopes else ('file', 'public')
        in_body = any(s[0] == 'body' for s in scopes)
        if kind == 'class' and re.fullmatch(r'(public|private|protected):', code):
            scopes[-1][1] = code[:-1]
            doc_above = False
            continue
        checked = kind in ('ns', 'enum', 'class') and access == 'public' and not in_body
        if checked and decl is None and not code.startswith('}'):
            decl = [number, code, doc_above]
        if decl is not None and slash:
            decl[2] = True
        # Braces: what each opens.
        opening = code
        for ch in code:
            if ch == '{':
                head = opening.split('{')[0]
                if re.match(r'(enum)\b', head):
                    scopes.append(['enum', 'public'])
                elif re.match(r'namespace\b', head):
                    if not scopes:
                        top_namespaces += 1
                    scopes.append(['ns', 'public'])
                elif re.match(r'(template\s*<[^>]*>\s*)?(class|struct)\b', head) and '(' not in head:
                    scopes.append(['class', 'private' if head.lstrip().startswith('class') else 'public'])
                else:
                    scopes.append(['body', 'public'])
                opening = opening.split('{', 1)[1] if '{' in opening else opening
            elif ch == '}':
                if scopes:
                    scopes.pop()
        # The declaration ends with ';', an opening brace, a closed body, or (enum values) a comma.
        ends = code.endswith((';', '{', '}')) or (kind == 'enum' and (code.endswith(',') or not code.endswith('(')))
        if decl is not None and ends:
            first, text, documented = decl
            exempt = (text.startswith(('friend ', 'namespace', 'static_assert', 'using namespace')) or
                      '= delete' in text or text in ('};', '}'))
            if not documented and not exempt:
                problems.append(f'{path}:{first}: undocumented: {text}')
            decl = None
        doc_above = False
    if top_namespaces != 1:
        problems.append(f'{path}: {top_namespaces} top-level namespace blocks (one expected)')
    return problems


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else 'include/stoke')
    headers = sorted(root.glob('*.h'))
    problems = [p for h in headers for p in check(h)]
    for p in problems:
        print(p)
    if problems:
        print(f'check_public_api_docs: {len(problems)} problem(s) in {root}', file=sys.stderr)
        return 1
    print(f'check_public_api_docs: {len(headers)} headers, every public declaration documented')
    return 0


if __name__ == '__main__':
    sys.exit(main())
