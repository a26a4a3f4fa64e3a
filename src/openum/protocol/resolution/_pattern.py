"""Wildcard patterns received from the network, matched with bounded cost (UM Concepts Guide, section
8.1.3; ARCHITECTURE.md rule 6).

A wildcard TQR carries a PCRE pattern chosen by whoever sent the datagram.  Python's ``re`` backtracks
(``(.*)(.*)...(.*)X`` takes exponential time against a long topic), has no timeout and holds the GIL,
so one datagram could freeze the context.  Remote patterns are therefore compiled here, to a Thompson
NFA simulated one topic character at a time (a Pike VM without captures): every instruction is visited
at most once per character position, so matching a topic of ``n`` characters costs at most
``(n + 1) * len(program)`` steps, whatever the pattern.

Supported syntax (the part of PCRE that topic patterns use): literals; ``.`` (any character but a
newline); character classes ``[...]``/``[^...]`` with ranges and ``\\d \\w \\s \\D \\W \\S`` (ASCII, as
PCRE's defaults); escaped punctuation (``\\.``, ``\\/``, ...) and ``\\t \\n \\r \\f \\v \\xhh``; anchors
``^`` (start) and ``$`` (end, or before a final newline); ``*``, ``+``, ``?`` and ``{n}``, ``{n,}``,
``{n,m}`` (greedy or lazy ``?``: the same answer for match/no match); alternation ``|``; groups
``(...)``, ``(?:...)`` and named groups ``(?P<name>...)``/``(?<name>...)``.  Anything else
(backreferences, lookaround, atomic groups, possessive quantifiers, inline flags, ``\\b``, ``\\A``,
``\\Q...\\E``, Unicode properties, POSIX ``[:classes:]``) is refused with :class:`PatternRefusedError`, and so
is a pattern longer than :data:`MAX_PATTERN_LENGTH` characters or compiling to more than
:data:`MAX_PROGRAM_SIZE` instructions.  Matching is a search (UM patterns are unanchored unless they use
``^``/``$``), with the same answer as ``re.search(pattern, topic, re.ASCII)`` for every supported pattern
(a property test checks it).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_PATTERN_LENGTH",
    "MAX_PROGRAM_SIZE",
    "MatchBudget",
    "PatternRefusedError",
    "SafePattern",
    "WorkLimitExceededError",
    "compile_remote_pattern",
]

#: Longest remote pattern accepted, in characters (a wildcard TQR carries at most 255 bytes).
MAX_PATTERN_LENGTH: Final = 255
#: Largest compiled program accepted, in instructions (``{n,m}`` copies its operand).
MAX_PROGRAM_SIZE: Final = 512

# Instructions.
_CHAR: Final = 0  # arg: the character
_ANY: Final = 1  # any character but "\n"
_CLASS: Final = 2  # arg: _Class
_SPLIT: Final = 3  # x, y: both
_JMP: Final = 4  # x
_BOL: Final = 5
_EOL: Final = 6
_MATCH: Final = 7

_DIGITS: Final = (("0", "9"),)
_WORD: Final = (("0", "9"), ("A", "Z"), ("_", "_"), ("a", "z"))
_SPACE: Final = (("\t", "\r"), (" ", " "))  # \t \n \v \f \r and space
_CLASS_ESCAPES: Final = {
    "d": (_DIGITS, False),
    "D": (_DIGITS, True),
    "w": (_WORD, False),
    "W": (_WORD, True),
    "s": (_SPACE, False),
    "S": (_SPACE, True),
}
_CHAR_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v"}


class PatternRefusedError(ValueError):
    """The pattern is outside the supported syntax or above a size limit; the message says which."""


class WorkLimitExceededError(Exception):
    """A :class:`MatchBudget` ran out."""


class MatchBudget:
    """Steps left for the matching of one query; :meth:`SafePattern.search` spends them."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0


class _Class:
    """A character class: ranges of characters, possibly negated (a negated ``\\W`` inside ``[...]`` is
    kept as a nested member)."""

    __slots__ = ("members", "negated", "ranges")

    def __init__(self, ranges: list[tuple[str, str]], members: list[_Class], negated: bool) -> None:
        self.ranges = tuple(ranges)
        self.members = tuple(members)
        self.negated = negated

    def contains(self, ch: str) -> bool:
        hit = any(lo <= ch <= hi for lo, hi in self.ranges) or any(m.contains(ch) for m in self.members)
        return hit != self.negated


# -- the parser: pattern text -> a tree of tuples ---------------------------------------------------------
# ("char", c) ("any",) ("class", _Class) ("bol",) ("eol",) ("cat", [nodes]) ("alt", [nodes])
# ("rep", node, min, max or -1)

_Node = tuple[object, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def refuse(self, what: str) -> PatternRefusedError:
        where = f"at offset {self.pos}"
        return PatternRefusedError(f"{what} {where} is not supported in remote wildcard patterns")

    def peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def parse(self) -> _Node:
        node = self.alternation()
        if self.pos != len(self.text):
            raise self.refuse("an unmatched ')'")
        return node

    def alternation(self) -> _Node:
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.concatenation())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concatenation(self) -> _Node:
        items: list[_Node] = []
        while (ch := self.peek()) is not None and ch not in "|)":
            items.append(self.repetition())
        return ("cat", items)

    def repetition(self) -> _Node:
        start = self.pos
        atom = self.atom()
        quantified = False
        while (ch := self.peek()) is not None and ch in "*+?{":
            if quantified:
                raise self.refuse("a quantifier after a quantifier (possessive or repeated)")
            if atom[0] in ("bol", "eol"):
                raise self.refuse("a quantifier on an anchor")
            bounds = self.quantifier()
            if bounds is None:
                break
            atom = ("rep", atom, bounds[0], bounds[1])
            quantified = True
            if self.peek() == "?":  # lazy: the same answer to "does it match"
                self.pos += 1
        if self.pos == start:
            raise self.refuse("an empty atom")
        return atom

    def quantifier(self) -> tuple[int, int] | None:
        ch = self.text[self.pos]
        if ch != "{":
            self.pos += 1
            return {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[ch]
        end = self.text.find("}", self.pos)
        body = self.text[self.pos + 1 : end] if end >= 0 else ""
        low, comma, high = body.partition(",")
        if end < 0 or not low.isdigit() or not (high == "" or high.isdigit()) or not low.isascii():
            raise self.refuse("a '{' that is not a {n}, {n,} or {n,m} quantifier")
        if not high.isascii():
            raise self.refuse("a non-ASCII digit in a quantifier")
        minimum = int(low)
        maximum = minimum if not comma else (int(high) if high else -1)
        if minimum > MAX_PROGRAM_SIZE or maximum > MAX_PROGRAM_SIZE:
            raise self.refuse(f"a repeat count above {MAX_PROGRAM_SIZE}")
        if maximum != -1 and maximum < minimum:
            raise self.refuse("a {n,m} quantifier with m < n")
        self.pos = end + 1
        return minimum, maximum

    def atom(self) -> _Node:
        ch = self.text[self.pos]
        if ch == "(":
            return self.group()
        if ch in "*+?{":
            raise self.refuse("a quantifier with nothing to repeat")
        self.pos += 1
        if ch == ".":
            return ("any",)
        if ch == "^":
            return ("bol",)
        if ch == "$":
            return ("eol",)
        if ch == "[":
            return ("class", self.char_class())
        if ch == "\\":
            return self.escape(in_class=False)
        return ("char", ch)

    def group(self) -> _Node:
        self.pos += 1
        if self.text.startswith("?", self.pos):
            if self.text.startswith("?:", self.pos):
                self.pos += 2
            elif self.text.startswith(("?P<", "?<"), self.pos) and not self.text.startswith(
                ("?<=", "?<!"), self.pos
            ):
                end = self.text.find(">", self.pos)
                name = self.text[self.text.index("<", self.pos) + 1 : end] if end >= 0 else ""
                if not name or not name.isidentifier() or not name.isascii():
                    raise self.refuse("a bad group name")
                self.pos = end + 1
            else:
                raise self.refuse("a '(?' group other than (?:...) or a named group (lookaround, flags)")
        node = self.alternation()
        if self.peek() != ")":
            raise self.refuse("a missing ')'")
        self.pos += 1
        return node

    def escape(self, *, in_class: bool) -> _Node:
        if self.pos >= len(self.text):
            raise self.refuse("a trailing backslash")
        ch = self.text[self.pos]
        self.pos += 1
        if ch in _CLASS_ESCAPES:
            ranges, negated = _CLASS_ESCAPES[ch]
            return ("class", _Class(list(ranges), [], negated))
        if ch in _CHAR_ESCAPES:
            return ("char", _CHAR_ESCAPES[ch])
        if ch == "x":
            digits = self.text[self.pos : self.pos + 2]
            if len(digits) != 2 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.refuse("a \\x escape without two hex digits")
            self.pos += 2
            return ("char", chr(int(digits, 16)))
        if ch.isascii() and ch.isalnum():
            self.pos -= 1
            raise self.refuse(f"the escape \\{ch}")
        return ("char", ch)  # escaped punctuation (and any non-ASCII character): itself

    def char_class(self) -> _Class:
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[str, str]] = []
        members: list[_Class] = []
        first = True
        while True:
            ch = self.peek()
            if ch is None:
                raise self.refuse("a missing ']'")
            if ch == "]" and not first:
                self.pos += 1
                return _Class(ranges, members, negated)
            first = False
            if ch == "[" and self.text.startswith((":", ".", "="), self.pos + 1):
                raise self.refuse("a POSIX [:class:] inside a character class")
            low = self.class_char()
            if isinstance(low, _Class):
                members.append(low)
                continue
            if self.peek() == "-" and self.pos + 1 < len(self.text) and self.text[self.pos + 1] != "]":
                self.pos += 1
                high = self.class_char()
                if isinstance(high, _Class):
                    raise self.refuse("a range ending in a class escape")
                if high < low:
                    raise self.refuse("a character range out of order")
                ranges.append((low, high))
            else:
                ranges.append((low, low))

    def class_char(self) -> str | _Class:
        ch = self.text[self.pos]
        self.pos += 1
        if ch != "\\":
            return ch
        node = self.escape(in_class=True)
        if node[0] == "class":
            cls = node[1]
            assert isinstance(cls, _Class)
            return cls
        char = node[1]
        assert isinstance(char, str)
        return char


# -- the compiler: tree -> program ----------------------------------------------------------------------


class _Program:
    def __init__(self) -> None:
        self.op: list[int] = []
        self.arg: list[object] = []
        self.x: list[int] = []
        self.y: list[int] = []

    def emit(self, op: int, arg: object = None, x: int = 0, y: int = 0) -> int:
        if len(self.op) >= MAX_PROGRAM_SIZE:
            raise PatternRefusedError(
                f"the pattern compiles to more than {MAX_PROGRAM_SIZE} instructions (remote wildcard limit)"
            )
        self.op.append(op)
        self.arg.append(arg)
        self.x.append(x)
        self.y.append(y)
        return len(self.op) - 1

    def compile(self, node: _Node) -> None:
        kind = node[0]
        if kind == "char":
            self.emit(_CHAR, node[1])
        elif kind == "any":
            self.emit(_ANY)
        elif kind == "class":
            self.emit(_CLASS, node[1])
        elif kind == "bol":
            self.emit(_BOL)
        elif kind == "eol":
            self.emit(_EOL)
        elif kind == "cat":
            items = node[1]
            assert isinstance(items, list)
            for item in items:
                self.compile(item)
        elif kind == "alt":
            branches = node[1]
            assert isinstance(branches, list)
            jumps: list[int] = []
            for i, branch in enumerate(branches):
                if i < len(branches) - 1:
                    split = self.emit(_SPLIT)
                    self.x[split] = len(self.op)
                    self.compile(branch)
                    jumps.append(self.emit(_JMP))
                    self.y[split] = len(self.op)
                else:
                    self.compile(branch)
            for jump in jumps:
                self.x[jump] = len(self.op)
        else:
            sub, minimum, maximum = node[1], node[2], node[3]
            assert isinstance(sub, tuple)
            assert isinstance(minimum, int)
            assert isinstance(maximum, int)
            self.repeat(sub, minimum, maximum)

    def repeat(self, sub: _Node, minimum: int, maximum: int) -> None:
        for _ in range(minimum):
            self.compile(sub)
        if maximum == -1:  # e*: L1: split L2, L3; L2: e; jmp L1; L3:
            split = self.emit(_SPLIT)
            self.x[split] = len(self.op)
            self.compile(sub)
            self.emit(_JMP, x=split)
            self.y[split] = len(self.op)
            return
        splits: list[int] = []
        for _ in range(maximum - minimum):  # e?e?...: each optional copy
            split = self.emit(_SPLIT)
            self.x[split] = len(self.op)
            splits.append(split)
            self.compile(sub)
        for split in splits:
            self.y[split] = len(self.op)


class SafePattern:
    """A compiled remote pattern; :meth:`search` costs at most ``(len(topic) + 1) * size`` steps."""

    __slots__ = ("_arg", "_op", "_x", "_y", "pattern", "size")

    def __init__(self, pattern: str, program: _Program) -> None:
        self.pattern = pattern
        self._op = program.op
        self._arg = program.arg
        self._x = program.x
        self._y = program.y
        self.size = len(program.op)

    def search(self, text: str, budget: MatchBudget) -> bool:
        """Whether the pattern matches somewhere in ``text``.  Every instruction visited is one step
        taken from ``budget``; :class:`WorkLimitExceededError` when it runs out."""
        op, arg, xs, ys = self._op, self._arg, self._x, self._y
        n = len(text)
        marks = [-1] * self.size
        steps = 0
        limit = budget.limit - budget.used
        current: list[int] = []  # consuming instructions alive at position pos
        for pos in range(n + 1):
            at_end = pos == n or (pos == n - 1 and text[pos] == "\n")
            # the thread started at this position (the search is unanchored), after the survivors
            stack = [0]
            pending = current
            current = []
            ch = text[pos - 1] if pos else ""
            # advance the survivors of the previous position over its character
            for pc in reversed(pending):
                steps += 1
                kind = op[pc]
                if (
                    (kind == _CHAR and arg[pc] == ch)
                    or (kind == _ANY and ch != "\n")
                    or (kind == _CLASS and arg[pc].contains(ch))  # type: ignore[attr-defined]
                ):
                    stack.append(pc + 1)
            while stack:
                pc = stack.pop()
                if marks[pc] == pos:
                    continue
                marks[pc] = pos
                steps += 1
                kind = op[pc]
                if kind == _MATCH:
                    budget.used += steps
                    return True
                if kind == _JMP:
                    stack.append(xs[pc])
                elif kind == _SPLIT:
                    stack.append(ys[pc])
                    stack.append(xs[pc])
                elif kind == _BOL:
                    if pos == 0:
                        stack.append(pc + 1)
                elif kind == _EOL:
                    if at_end:
                        stack.append(pc + 1)
                else:
                    current.append(pc)
            if steps > limit:
                budget.used += steps
                raise WorkLimitExceededError
        budget.used += steps
        return False


def compile_remote_pattern(pattern: str) -> SafePattern:
    """Compile a pattern received from the network.

    :class:`PatternRefusedError` names what is not supported (and where)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternRefusedError(
            f"a pattern of {len(pattern)} characters is longer than the {MAX_PATTERN_LENGTH} accepted from "
            "the network"
        )
    tree = _Parser(pattern).parse()
    program = _Program()
    program.compile(tree)
    program.emit(_MATCH)
    return SafePattern(pattern, program)
