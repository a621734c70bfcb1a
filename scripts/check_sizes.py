#!/usr/bin/env python3
"""The size rules of stoke's sources: no function over 80 lines and no file over 900 lines in src/
and python/src (tests, fuzz targets and benchmarks of the format excepted).

Functions are found by their braces: a '{' at namespace or class scope whose header holds a ')' (a
function, constructor, operator or function-like macro such as TEST or PYBIND11_MODULE) opens one,
and its lines run from that '{' to the matching '}'. Comments, string literals (raw ones included)
and character literals are blanked first, so their braces do not count.

Code that broke a rule before the rule was checked is listed in scripts/size_limits_known.txt with
its size then: it may shrink, never grow, and an entry that meets the rule again must be removed,
so the list only gets shorter. Anything not listed must meet the rules.

    scripts/check_sizes.py            check; exit 1 with one line per breach
    scripts/check_sizes.py --list     print every breach in the known-list format
    scripts/check_sizes.py --self-test  check the function finder on inputs with known answers
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ["src", "python/src"]
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 900
KNOWN = os.path.join(ROOT, "scripts", "size_limits_known.txt")
EXEMPT = re.compile(r"_(test|fuzz|benchmark)\.cc$")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|return|case)\b")
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def blank(text):
    """The text with comments, preprocessor lines and string and character literals replaced by spaces
    (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":  # a preprocessor line
            j = i
            while True:
                j = text.find("\n", j)
                if j < 0 or text[j - 1] != "\\":
                    break
                j += 1
            j = n if j < 0 else j
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line, line count) of each function body at namespace or class scope."""
    code = blank(text)
    stack = []  # per open brace: (kind, line, name); kinds: scope, func, other
    header_start = 0
    found = []
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c in ";":
            if not stack or stack[-1][0] == "scope":
                header_start = i + 1
        elif c == "{":
            header = code[header_start:i]
            if stack and stack[-1][0] != "scope":
                kind, name = "other", ""
            elif SCOPE.search(header) and "(" not in header.split("{")[0].split(":")[0]:
                kind, name = "scope", ""
            elif ")" in header and not CONTROL.match(header) and "=" not in header.split("(")[0]:
                kind = "func"
                name = header.split("(")[0].split()[-1] if header.split("(")[0].split() else "?"
            else:
                kind, name = "other", ""
            stack.append((kind, line, name))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, first, name = stack.pop()
                if kind == "func":
                    found.append((name, first, line - first + 1))
            if not stack or stack[-1][0] == "scope":
                header_start = i + 1
    return found


def breaches():
    """(key, size, limit) for every file and function over its limit."""
    out = []
    for d in DIRS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, d)):
            for name in sorted(names):
                if not name.endswith((".cc", ".h", ".cu")) or EXEMPT.search(name):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                lines = text.count("\n")
                if lines > MAX_FILE_LINES:
                    out.append((rel, lines, MAX_FILE_LINES))
                for fname, _first, count in functions(text):
                    if count > MAX_FUNCTION_LINES:
                        out.append((f"{rel}:{fname}", count, MAX_FUNCTION_LINES))
    return out


def known():
    """key -> lines, from the known list ("<size> <key>" per line; '#' starts a comment)."""
    entries = {}
    if not os.path.exists(KNOWN):
        return entries
    with open(KNOWN, encoding="utf-8") as f:
        for raw in f:
            text = raw.split("#", 1)[0].strip()
            if text:
                size, key = text.split(None, 1)
                entries[key] = max(entries.get(key, 0), int(size))
    return entries


def self_test():
    """The function finder on inputs whose answers are known; returns a list of what it got wrong."""
    body = "".join(f"  x += {i};\n" for i in range(78))
    text = (
        "namespace a {\n"                                              # 1
        "struct S {\n"                                                 # 2
        "  int f() const { return 1; }\n"                              # 3: one line
        "};\n"                                                         # 4
        "int Long(int x) {\n" + body + "}\n"                          # 5..84: 80 lines
        "int Longer(int x) {\n" + body + "  x++;\n}\n"               # 85..165: 81 lines
        "void Braces() {\n"                                            # 166
        '  const char* s = "{{{"; // }\n'                               # braces in a string, a comment
        '  auto r = R"x({ ")" })x"; /* { */ char c = \'{\';\n'          # a raw string, a block comment, a char
        "  auto l = [&]() { if (true) { return; } };\n"                # a lambda and a control block inside
        "#define M {\n"                                                # a preprocessor line
        "}\n"                                                          # 171: 6 lines
        "}  // namespace a\n"
    )
    got = [(name, count) for name, _, count in functions(text)]
    want = [("f", 1), ("Long", 80), ("Longer", 81), ("Braces", 6)]
    return [] if got == want else [f"self-test: found {got}, expected {want}"]


def main():
    if "--self-test" in sys.argv[1:]:
        errors = self_test()
        for e in errors:
            print(f"check_sizes: {e}")
        return 1 if errors else 0
    found = breaches()
    if "--list" in sys.argv[1:]:
        for key, size, _ in sorted(found, key=lambda b: b[0]):
            print(f"{size} {key}")
        return 0
    allowed = known()
    failures = []
    seen = {}
    for key, size, limit in found:
        seen[key] = max(seen.get(key, 0), size)
    for key, size in sorted(seen.items()):
        limit = MAX_FUNCTION_LINES if ":" in key else MAX_FILE_LINES
        if key not in allowed:
            failures.append(f"{key}: {size} lines, over the limit of {limit}")
        elif size > allowed[key]:
            failures.append(f"{key}: {size} lines, grown from {allowed[key]} (the limit is {limit}): shrink it")
    for key in sorted(set(allowed) - set(seen)):
        failures.append(f"{key}: now within its limit: remove it from scripts/size_limits_known.txt")
    for f in failures:
        print(f"check_sizes: {f}")
    if failures:
        return 1
    print(f"check_sizes: every file within {MAX_FILE_LINES} lines and every function within {MAX_FUNCTION_LINES}, "
          f"but for {len(allowed)} known exceptions (scripts/size_limits_known.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
