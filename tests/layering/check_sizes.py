#!/usr/bin/env python3
"""Fails if a source file in src/ or include/ is too long, or a function in it is.

Why: issue 32 asks for no file over ~400 lines and no function over ~80 lines, so that a
newcomer can read one piece at a time; this check keeps it that way after the refactor.

  check_sizes.py [--root DIR] [--max-file-lines N] [--max-function-lines N] [DIR...]
  check_sizes.py --self-test

DIRs (relative to --root, default src include) are searched for .c .cc .cpp .cxx .cu .h
.hpp files. Exit status 0 when nothing exceeds the limits, 1 when something does (each
offender is listed), 2 when a file cannot be scanned (unbalanced braces).

Function scanner: a heuristic for clang-formatted C and C++ (the repository's rule), not a
parser. Comments, string and character literals (raw strings included) and preprocessor
lines are blanked first, so their braces do not count. Then every `{` is matched with its
`}`. A `{` opened where declarations live (file scope, a namespace, extern "C", a class
body) starts a function when the text before it since the last `;`, `{` or `}` (its "head")
has a `(` and is not a class head, an initializer (`= ...` other than a lambda or an
operator) or a control statement; everything inside a function (lambdas, local classes)
belongs to it. A function's length is counted from the line of its `{` to the line of its
`}`, both included, i.e. the body, as clang-tidy's readability-function-size counts lines.
Code that opens a brace in one preprocessor branch and another in the other branch would
unbalance the count: such a file is reported as unscannable rather than passed.
"""

import argparse
import os
import re
import sys
import tempfile

SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hpp")
CONTROL_WORDS = {"if", "for", "while", "switch", "catch", "do", "else", "try", "return"}
ENUM_HEAD = re.compile(r"^(?:typedef\s+)?enum\b")
# extern "C" { ... }: the literal is blanked before heads are classified.
NAMESPACE_HEAD = re.compile(r"^(?:inline\s+)?namespace\b|^extern$")
LAMBDA_INIT = re.compile(r"=\s*\[[^\]]*\]\s*(?:\(|\{|$|mutable)")


def starts_raw_string(text, i):
    """Whether the R at text[i] (followed by a quote) is a raw string's prefix (R, uR, UR,
    LR, u8R) rather than the end of an identifier."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
        j -= 1
    return text[j:i] in ("", "u", "U", "L", "u8")


def is_digit_separator(text, i):
    """Whether the quote at text[i] separates digits (1'000'000) instead of opening a
    character literal (u8'a' is a literal: its token does not start with a digit)."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "'."):
        j -= 1
    return text[j:j + 1].isdigit() and i + 1 < len(text) and text[i + 1].isalnum()


def blank_non_code(text):
    """Returns text with comments, literals and preprocessor lines replaced by spaces
    (newlines kept, so line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start:
            # Preprocessor line, with its backslash continuations.
            j = i
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "#":
                while j < n:
                    if text[j] == "\n" and text[j - 1] != "\\":
                        break
                    j += 1
                out.append(re.sub(r"[^\n]", " ", text[i:j]))
                i = j
                continue
            at_line_start = False
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('"', i + 1) and starts_raw_string(text, i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and is_digit_separator(text, i):
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_template_prefix(head):
    """head without a leading `template <...>` (angle brackets balanced, so default
    arguments such as sizeof(T) or std::vector<int> stay inside)."""
    m = re.match(r"template\s*<", head)
    if not m:
        return head
    depth, i = 1, m.end()
    while i < len(head) and depth > 0:
        depth += {"<": 1, ">": -1}.get(head[i], 0)
        i += 1
    return head[i:].lstrip()


def is_class_head(head):
    """class/struct/union NAME [final] [: bases]: no parenthesis before the base clause
    (`struct x* make(void)` is a function returning a pointer to struct)."""
    head = strip_template_prefix(head)
    if not re.match(r"(?:class|struct|union)\b", head):
        return False
    head = re.sub(r"alignas\s*\([^)]*\)|\[\[.*?\]\]", " ", head)
    before_bases = re.split(r"(?<!:):(?!:)", head, maxsplit=1)[0]
    return "(" not in before_bases


def classify(head):
    """'namespace', 'class', 'function' or 'other' for the text before a `{` that opens in
    a declaration context."""
    head = " ".join(head.split())
    # An access specifier or a label ends the previous declaration.
    head = re.sub(r"^(?:(?:public|private|protected)\s*:(?!:)\s*)+", "", head)
    if not head or NAMESPACE_HEAD.search(head):
        return "namespace" if head else "other"
    if ENUM_HEAD.search(head):
        return "other"
    if is_class_head(head):
        return "class"
    first_word = re.match(r"[A-Za-z_]\w*", head)
    if first_word and first_word.group(0) in CONTROL_WORDS:
        return "other"
    if re.search(r"\boperator\b", head) or LAMBDA_INIT.search(head):
        return "function"
    depth = 0
    for ch in head:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        elif ch == "=" and depth == 0:
            return "other"  # an initializer: int x[] = {...}
    return "function" if "(" in head else "other"


def function_name(head):
    head = " ".join(head.split())
    m = re.search(r"=\s*\[", head)
    if m:  # a lambda bound to a name
        before = re.findall(r"[A-Za-z_][\w:]*", head[: m.start()])
        return before[-1] if before else "lambda"
    m = re.search(r"(operator\s*\S+?|~?[A-Za-z_][\w:~]*)\s*(?:<[^()]*>)?\s*\(", head)
    return m.group(1) if m else head[:40]


def scan_functions(text):
    """Returns ([(name, first_line, last_line)], error or None) for C/C++ source text."""
    code = blank_non_code(text)
    stack = []  # per open brace: (kind, line, head)
    functions = []
    head_start = 0
    line = 1
    for i, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch == ";":
            head_start = i + 1
        elif ch == "{":
            in_decl = all(kind in ("namespace", "class") for kind, _, _ in stack)
            head = code[head_start:i]
            kind = classify(head) if in_decl else "inner"
            stack.append((kind, line, head))
            head_start = i + 1
        elif ch == "}":
            if not stack:
                return functions, "unbalanced '}' at line %d" % line
            kind, first, head = stack.pop()
            if kind == "function":
                functions.append((function_name(head), first, line))
            head_start = i + 1
    if stack:
        return functions, "%d unclosed '{' (first at line %d)" % (len(stack), stack[0][1])
    return functions, None


def check_file(path, rel, max_file, max_function):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    problems = []
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > max_file:
        problems.append("%s: %d lines (limit %d)" % (rel, lines, max_file))
    functions, error = scan_functions(text)
    if error:
        return problems, "%s: cannot scan: %s" % (rel, error)
    for name, first, last in functions:
        length = last - first + 1
        if length > max_function:
            problems.append("%s:%d: function %s: %d lines (limit %d)" %
                            (rel, first, name, length, max_function))
    return problems, None


def check_tree(root, dirs, max_file, max_function, out=sys.stdout):
    problems, errors, count = [], [], 0
    for d in dirs:
        for base, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs.sort()
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(base, name)
                rel = os.path.relpath(path, root)
                p, e = check_file(path, rel, max_file, max_function)
                problems += p
                if e:
                    errors.append(e)
                count += 1
    for e in errors:
        print("error: " + e, file=out)
    for p in problems:
        print(p, file=out)
    print("checked %d files under %s: %d over the limits (file %d lines, function %d lines)%s" %
          (count, ", ".join(dirs), len(problems), max_file, max_function,
           ", %d unscannable" % len(errors) if errors else ""), file=out)
    if count == 0:
        print("error: no sources found: wrong --root?", file=out)
        return 2
    if errors:
        return 2
    return 1 if problems else 0


def self_test():
    """The check must be able to fail: synthetic files over and under each limit, and the
    scanner's corner cases (braces in comments and literals, classes, lambdas)."""
    body = "\n".join("  x += %d;" % i for i in range(8))
    tricky = r'''// a { in a comment
namespace a {
struct S : public B<int> {
  int v{0};
  void f() const {
    const char* s = "}{";
    char c = '{';
    auto r = R"x(}})x";
    int n = 1'000;
  }
};
enum class E { one, two };
const int table[] = {1, 2, 3};
auto lam = [](int x) {
%s
  return x;
};
int g(int x) {
  if (x) {
    return [&] { return x; }();
  }
%s
  return x;
}
#define M(x) { x }
extern "C" {
int h(void) {
  return 0;
}
}
template <class T, int N = sizeof(std::vector<T>)>
struct alignas(64) Slot : Base<(N > 1)> {
  void put(T) {}
};
struct omgs_x* make(void) {
  return 0;
}
}  // namespace a
''' % (body, body)
    functions, error = scan_functions(tricky)
    names = {name: last - first + 1 for name, first, last in functions}
    expected = {"f": 6, "lam": 11, "g": 14, "h": 3, "put": 1, "make": 3}
    failures = []
    if error or names != expected:
        failures.append("scanner: got %r (error %r), expected %r" % (names, error, expected))

    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src"))
        short_fn = "int f() {\n" + "  ;\n" * 8 + "}\n"  # 10 lines
        long_fn = "int g() {\n" + "  ;\n" * 9 + "}\n"  # 11 lines
        cases = [
            ("at both limits", short_fn + "\n" * 10, 0),  # 20 lines, function 10
            ("file over the limit", short_fn + "\n" * 11, 1),  # 21 lines
            ("function over the limit", long_fn, 1),
            ("unbalanced", "int f() {\n", 2),
        ]
        for label, text, want in cases:
            with open(os.path.join(root, "src", "x.cpp"), "w") as f:
                f.write(text)
            with open(os.devnull, "w") as sink:
                got = check_tree(root, ["src"], 20, 10, out=sink)
            if got != want:
                failures.append("%s: exit %d, expected %d" % (label, got, want))
    for f in failures:
        print("self-test FAILED: " + f)
    if not failures:
        print("self-test passed: the scanner finds the synthetic functions and the check "
              "fails on a file and on a function over the limits")
    return 1 if failures else 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    p.add_argument("--max-file-lines", type=int, default=400)
    p.add_argument("--max-function-lines", type=int, default=80)
    p.add_argument("--self-test", action="store_true")
    p.add_argument("dirs", nargs="*", default=["src", "include"])
    a = p.parse_args()
    if a.self_test:
        return self_test()
    return check_tree(a.root, a.dirs, a.max_file_lines, a.max_function_lines)


if __name__ == "__main__":
    sys.exit(main())
