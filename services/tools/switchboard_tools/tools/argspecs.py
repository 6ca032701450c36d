"""The options of the programs exec's allowlist mode knows, as their getopt declares them.

Each program has its short options as a getopt-like string and its long options as
space-separated names; a name or letter is followed by what its argument is:

- nothing: a flag, no argument;
- ``:``: a required value (free text: a pattern, a number, a format);
- ``=``: a required value that is a path (it must resolve inside the workspace);
- ``?``: an optional value (attached: ``-Iseconds``, ``--color=never``);
- ``!`` / ``!:``: refused (it changes the system or runs another program), without / with a
  value.

``digits``: ``-NUM`` is accepted (``head -5``, ``grep -2``). ``operands``: ``"path"`` (every
operand is checked like a path), ``"text"`` (echo: printed, never opened; still checked, as
paths, by the caller's conservative default) or ``"date"`` (only ``+FORMAT``: any other operand
sets the clock). ``wrap``: the program runs another one -- ``"plain"`` (the command follows the
options), ``"env"`` (after ``NAME=VALUE`` assignments) or ``"timeout"`` (after a duration) --
and option parsing stops at the first operand, as these programs' getopt does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAG, VALUE, PATH, OPTIONAL, DENY = "flag", "value", "path", "optional", "deny"


@dataclass(frozen=True)
class Opt:
    """One option: ``kind`` is one of FLAG, VALUE, PATH, OPTIONAL, DENY; ``takes``: whether it
    takes an argument (``"none"``, ``"required"``, ``"optional"``)."""

    kind: str
    takes: str


@dataclass(frozen=True)
class Spec:
    short: dict[str, Opt] = field(default_factory=dict)
    long: dict[str, Opt] = field(default_factory=dict)
    digits: bool = False
    operands: str = "path"
    wrap: str | None = None


_MARKERS = {
    "": Opt(FLAG, "none"),
    ":": Opt(VALUE, "required"),
    "=": Opt(PATH, "required"),
    "?": Opt(OPTIONAL, "optional"),
    "!": Opt(DENY, "none"),
    "!:": Opt(DENY, "required"),
}


def _short(text: str) -> dict[str, Opt]:
    options: dict[str, Opt] = {}
    i = 0
    while i < len(text):
        letter, i = text[i], i + 1
        marker = ""
        while i < len(text) and text[i] in ":=?!":
            marker, i = marker + text[i], i + 1
        options[letter] = _MARKERS[marker]
    return options


def _long(text: str) -> dict[str, Opt]:
    options: dict[str, Opt] = {}
    for word in text.split():
        name = word.rstrip(":=?!")
        options[name] = _MARKERS[word[len(name) :]]
    return options


def spec(
    short: str = "",
    long: str = "",
    *,
    digits: bool = False,
    operands: str = "path",
    wrap: str | None = None,
) -> Spec:
    return Spec(_short(short), _long(long + " help version"), digits, operands, wrap)


SPECS: dict[str, Spec] = {
    "cat": spec(
        "AbeEnstTuv",
        "show-all number-nonblank show-ends number squeeze-blank show-tabs show-nonprinting",
    ),
    "date": spec(
        "d:f=I?r=Rs!:u",
        "date: debug file= iso-8601? resolution reference= rfc-email rfc-822 rfc-2822 "
        "rfc-3339: set!: universal utc",
        operands="date",
    ),
    "echo": spec(operands="text"),
    "true": spec(operands="text"),
    "false": spec(operands="text"),
    "grep": spec(
        "EFGPe:f=iyvwxcLloqsbHhnTZzrRUaIVA:B:C:d:D:m:",
        "extended-regexp fixed-strings basic-regexp perl-regexp regexp: file= ignore-case "
        "no-ignore-case word-regexp line-regexp null-data no-messages invert-match "
        "max-count: byte-offset line-number no-line-number line-buffered with-filename "
        "no-filename label: only-matching quiet silent binary-files: text directories: "
        "devices: recursive dereference-recursive include: exclude: exclude-from= "
        "exclude-dir: files-without-match files-with-matches count initial-tab null "
        "before-context: after-context: context: color? colour? group-separator: "
        "no-group-separator",
        digits=True,
    ),
    "head": spec("c:n:qvz", "bytes: lines: quiet silent verbose zero-terminated", digits=True),
    "tail": spec(
        "c:n:fFqs:vz",
        "bytes: follow? lines: max-unchanged-stats: pid: quiet silent retry sleep-interval: "
        "verbose zero-terminated",
        digits=True,
    ),
    "ls": spec(
        "aAbBcCdDfFgGhHiI:klLmnNopqQrRsStT:uUvw:xXZ1",
        "all almost-all author escape block-size: ignore-backups color? directory dired "
        "classify? file-type format: full-time group-directories-first no-group "
        "human-readable si dereference-command-line dereference-command-line-symlink-to-dir "
        "hide: hyperlink? indicator-style: inode ignore: kibibytes dereference "
        "numeric-uid-gid literal hide-control-chars show-control-chars quote-name "
        "quoting-style: reverse recursive size sort: time: time-style: tabsize: width: "
        "context zero",
    ),
    "pwd": spec("LP", "logical physical"),
    "sort": spec(
        "bdfgiMhnRrVcCmsuzk:o=S:t:T=",
        "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort "
        "ignore-nonprinting month-sort human-numeric-sort numeric-sort random-sort "
        "random-source= reverse sort: version-sort batch-size: check? compress-program!: "
        "debug files0-from!: key: merge output= stable buffer-size: field-separator: "
        "temporary-directory= unique zero-terminated parallel:",
    ),
    "uname": spec(
        "asnrvmpio",
        "all kernel-name nodename kernel-release kernel-version machine processor "
        "hardware-platform operating-system",
    ),
    "uniq": spec(
        "cdDf:is:uw:z",
        "count repeated all-repeated? skip-fields: group? ignore-case skip-chars: unique "
        "zero-terminated check-chars:",
    ),
    "wc": spec("cmlLw", "bytes chars lines files0-from!: max-line-length words total:"),
    "whoami": spec(),
    "du": spec(
        "0abB:cd:DhHklLmPsSt:xX=",
        "null all apparent-size block-size: bytes total dereference-args max-depth: "
        "files0-from!: human-readable inodes kibibytes count-links dereference "
        "no-dereference separate-dirs si summarize threshold: time? time-style: "
        "one-file-system exclude-from= exclude:",
    ),
    "sleep": spec(operands="text"),
    # Programs that run another program: it must be allowlisted and is checked in turn.
    "env": spec(
        "i0u:C=S!:v",
        "ignore-environment null unset: chdir= split-string!: debug block-signal? "
        "default-signal? ignore-signal? list-signal-handling",
        wrap="env",
    ),
    "nice": spec("n:", "adjustment:", digits=True, wrap="plain"),
    "nohup": spec(wrap="plain"),
    "stdbuf": spec("i:o:e:", "input: output: error:", wrap="plain"),
    "timeout": spec(
        "k:s:v", "foreground kill-after: preserve-status signal: verbose", wrap="timeout"
    ),
    "xargs": spec(
        "0a=d:E:e?I:i?L:l?n:oP:prs:tx",
        "null arg-file= delimiter: eof? replace? max-lines? max-args: open-tty max-procs: "
        "interactive process-slot-var: no-run-if-empty max-chars: show-limits verbose exit",
        wrap="plain",
    ),
}
