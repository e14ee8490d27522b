#!/usr/bin/env python3
"""The shape of the code, as issue 24 measures it: lines per crate, the longest functions
outside tests, and `Result<_, String>` in library code.

    scripts/shape.py            # a table
    scripts/shape.py --json     # the same as JSON (for before/after comparisons)

Functions are found by their `fn` line and their braces matched (strings, chars and comments
skipped); a `#[cfg(test)]` module and `tests/`, `benches/`, `examples/` are left out. Data
tables (a function that is mostly one literal) count like any other: read the list.
"""

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
RESULT_STRING = re.compile(r"Result<[^;{]*?,\s*String\s*>")


def strip(text):
    """The text with comments, strings and chars blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
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
        elif c == "r" and re.match(r'r(#*)"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def library_files(crate):
    for path in sorted((crate / "src").rglob("*.rs")):
        # A test module kept in a file of its own (`#[cfg(test)] mod tests;`).
        if path.stem == "tests" or "tests" in path.relative_to(crate / "src").parts[:-1]:
            continue
        yield path


def functions(path):
    text = strip(path.read_text())
    lines = text.split("\n")
    # Leave out `#[cfg(test)] mod … { … }`.
    skip = set()
    for i, line in enumerate(lines):
        if line.strip() == "#[cfg(test)]" and i + 1 < len(lines) and re.match(r"\s*(pub\s+)?mod\s+\w+\s*\{", lines[i + 1]):
            depth, j = 0, i + 1
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                skip.add(j)
                if depth == 0 and "{" in "".join(lines[i + 1:j + 1]):
                    break
                j += 1
            skip.add(i)
    found = []
    for i, line in enumerate(lines):
        if i in skip:
            continue
        m = FN.match(line)
        if not m:
            continue
        # Find the body's opening brace (or a `;`: a declaration without a body).
        depth, j, opened = 0, i, False
        while j < len(lines):
            for ch in lines[j]:
                if ch == ";" and not opened and depth == 0:
                    break
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
            else:
                if opened and depth == 0:
                    break
                j += 1
                continue
            if not opened:
                j = None
            break
        if j is None or not opened:
            continue
        found.append((j - i + 1, m.group(7), f"{path.relative_to(ROOT)}:{i + 1}"))
    return found


def main():
    crates = sorted(p for p in (ROOT / "crates").iterdir() if (p / "Cargo.toml").exists())
    sizes, fns, result_string = {}, [], []
    for crate in crates:
        total = 0
        for path in library_files(crate):
            text = path.read_text()
            total += text.count("\n")
            fns.extend(functions(path))
            for k, line in enumerate(strip(text).split("\n")):
                if RESULT_STRING.search(line):
                    result_string.append(f"{path.relative_to(ROOT)}:{k + 1}")
        sizes[crate.name] = total
    fns.sort(key=lambda f: -f[0])
    report = {
        "crates": len(crates),
        "lines": sizes,
        "longest": [{"lines": n, "fn": name, "at": at} for n, name, at in fns[:10]],
        "over_150": sum(1 for n, _, _ in fns if n > 150),
        "result_string": len(result_string),
        "result_string_at": result_string,
    }
    if "--json" in sys.argv:
        print(json.dumps(report, indent=1))
        return
    print(f"crates: {report['crates']}")
    for name, n in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"  {n:6d}  {name}")
    print("longest functions (outside tests):")
    for f in report["longest"]:
        print(f"  {f['lines']:5d}  {f['fn']}  {f['at']}")
    print(f"functions over 150 lines: {report['over_150']}")
    print(f"Result<_, String> in library code: {report['result_string']}")


if __name__ == "__main__":
    main()
