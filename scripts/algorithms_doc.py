#!/usr/bin/env python3
"""docs/algorithms.md, collected from the opening block of each header in include/weft/algorithms/.

    algorithms_doc.py ROOT            rewrites ROOT/docs/algorithms.md
    algorithms_doc.py --check ROOT    exits 1, showing the difference, when the page is out of date

The opening block is the header's leading comment: its first line names the file and says what
the algorithm is ("// weft/algorithms/ring.hpp — ring: ..."); the lines after it, up to the first
line that is not a comment, are the page's text for that algorithm.
"""
import difflib
import glob
import os
import sys


def opening_block(path):
    lines = []
    with open(path, encoding="utf-8") as header:
        for line in header:
            if not line.startswith("//"):
                break
            lines.append(line[3:].rstrip("\n") if line.startswith("// ") else line[2:].rstrip("\n"))
    if not lines or " — " not in lines[0]:
        raise SystemExit("%s: no opening block ('// weft/algorithms/NAME.hpp — what it is')" % path)
    title = lines[0].split(" — ", 1)[1]
    body = lines[1:]
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return title, body


def page(root):
    out = ["# Algorithms",
           "Collected from the opening block of each header in `include/weft/algorithms/` (the headers "
           "are the source; `scripts/algorithms_doc.py` writes this page and a test checks it).", ""]
    for path in sorted(glob.glob(os.path.join(root, "include", "weft", "algorithms", "*.hpp"))):
        name = os.path.splitext(os.path.basename(path))[0]
        title, body = opening_block(path)
        out += ["## `%s` — %s" % (name, title), "```"] + body + ["```", ""]
    return "\n".join(out)


def main(argv):
    check = "--check" in argv
    roots = [a for a in argv if a != "--check"]
    if len(roots) != 1:
        print(__doc__)
        return 2
    root = roots[0]
    target = os.path.join(root, "docs", "algorithms.md")
    wanted = page(root)
    if check:
        with open(target, encoding="utf-8") as current:
            have = current.read()
        if have == wanted:
            print("docs/algorithms.md matches the headers' opening blocks")
            return 0
        print("docs/algorithms.md is out of date with the headers (run scripts/algorithms_doc.py %s):" % root)
        sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), wanted.splitlines(True),
                                                   "docs/algorithms.md", "from the headers"))
        return 1
    with open(target, "w", encoding="utf-8") as out:
        out.write(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
