"""LaTeX in abstracts and summaries made plain text, at ingest, so that the store holds what a reader reads.

Authors write abstracts in LaTeX (`4.64$\\times$`, `M$^2$D`, `\\textbf{MagicID}`, `30\\%`), and the sources pass it on
as it is or half undone: Hugging Face's pages drop the dollars and the backslash and leave "up to 11.1times", "H_2O",
"O(N^2)", "models~(LLMs)". `plain` converts only what is markup and leaves the prose around it alone: each span of
markup (a `$…$` that holds math, a command with its arguments, `{\\it …}`, an escaped character, TeX quotes) goes
through pylatexenc's LatexNodes2Text on its own, so a "%" or "_" of the prose is never read as LaTeX; then the
residues of dropped markup are mended (a number followed by "times", a single letter's digit sub- and superscripts,
a tie between words). A "$5" price, "MPI_Send", "Q4_0" or "a_b" stays as it is.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

from pylatexenc import latexwalker
from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db
from pylatexenc.macrospec import std_macro

# A span of markup. Math is any `$…$` on one line; `_converted` then decides whether it is math or two prices.
_SPAN = re.compile(r"""
    \$(?P<math>[^$\n]{1,300}?)\$(?P<after>\d?)
  | \\\((?P<inline>[^\n]{1,300}?)\\\)                                              # \( … \)
  | \\[A-Za-z]+\*?(?:\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}|\[[^\]\n]{0,100}\])*   # a command and its arguments
  | \{\\[A-Za-z]+\s(?:[^{}]|\{[^{}]*\})*\}                                          # {\it …}
  | \\['`^"~=.](?:[A-Za-z]|\{[A-Za-z]\})                                            # an accent: B\'{e}zier
  | \\[%&_\#${} ,;:!]                                                                 # an escaped character
  | ``(?=[^`'\n]{1,300}'')|(?<=[^`'\n])''                                            # TeX's quotes
""", re.X)
# What math holds that prose between two dollar amounts does not: a command, a sub- or superscript, a group; else
# math sits tight in its dollars ("$p = 0.72$", "$<$300M") where prices do not ("$5 and $10", "$5-$10").
_MATHLIKE = re.compile(r"[\\^_{}]")
_TIGHT = re.compile(r"\S(?:.*\S)?")
_LIKELY = re.compile(r"[\\$~^_`]|\dtimes")  # none of these: nothing to convert (most texts)

# pylatexenc logs each macro short of its arguments; `_text` keeps such a span as it was, which is the whole story.
logging.getLogger("pylatexenc").setLevel(logging.ERROR)

# Residues of markup a page dropped ("11.1times", "H_2O", "R^2", "models~(LLMs)").
_TIMES = re.compile(r"(?<=\d)times(?:\b|(?=[A-Z0-9]))")  # "1.9times", "4timesRTX 3090", "64times64"
_SUPER = re.compile(r"(?<=[A-Za-z0-9)\]])\^(?:\{([0-9+\-n]{1,6})\}|([0-9]{1,4}|n)(?![A-Za-z0-9]))|"
                    r"(?<=[A-Za-z0-9)\]])\^([0-9]{1,4})(?=[A-Z])")
_SUB = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z])_(?:\{([0-9]{1,4})\}|([0-9]{1,4}))(?![0-9_])")
_TIE = re.compile(r"(?<=[A-Za-z.,;:)])~(?=[A-Za-z(\[])")
_URL = re.compile(r"((?<!\{)https?://[^\s<>\"'{}]+)", re.I)
_GONE = "\x00"  # where a span converted to nothing (`\cite{…}`): the space before it goes too
_SUPERSCRIPTS = str.maketrans("0123456789+-=()ni", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ")
_SUBSCRIPTS = str.maketrans("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ")
# In math: a sub- or superscript of characters Unicode has small forms of ("x_{t+1}", "n^{-1}"); a degree sign.
_SCRIPT = re.compile(r"([_^])(?:\{([0-9A-Za-z+\-=()]{1,8})\}|([0-9A-Za-z]))")
_DEGREE = re.compile(r"\^\{?\\circ\}?")

# Macros authors define for themselves (`\proj`, `\sysName`) are read as their name; these are known and read as words.
_WORDS = {"ie": "i.e.", "eg": "e.g.", "etal": "et al.", "etc": "etc.", "vs": "vs.", "wrt": "w.r.t.", "cf": "cf.",
          "LaTeX": "LaTeX", "TeX": "TeX"}
_SWITCHES = ("it", "bf", "em", "rm", "sc", "tt", "sf", "sl", "small", "large", "Large", "footnotesize", "normalsize",
             "bfseries", "itshape", "ttfamily", "scshape", "upshape", "mdseries", "rmfamily", "sffamily", "b")


def plain(text: str) -> str:
    """`text` with its LaTeX markup converted to plain Unicode text; text without markup comes back unchanged."""
    if not _LIKELY.search(text):
        return text
    return _plain(text)


@lru_cache(maxsize=4_096)  # the same abstract comes from several pages and feeds
def _plain(text: str) -> str:
    # A bare URL is left as written ("https://example.org/~ada/x_1"); the rest is read between the URLs.
    pieces = _URL.split(text)
    pieces[::2] = [_prose(piece) for piece in pieces[::2]]
    return re.sub(r" {2,}", " ", re.sub(r"\s*" + _GONE, "", "".join(pieces))).strip()


def _prose(text: str) -> str:
    text = _SPAN.sub(_converted, text)
    text = _TIMES.sub("×", text)
    text = _SUPER.sub(lambda m: (m.group(1) or m.group(2) or m.group(3)).translate(_SUPERSCRIPTS), text)
    text = _SUB.sub(lambda m: m.group(1) + (m.group(2) or m.group(3)).translate(_SUBSCRIPTS), text)
    return _TIE.sub(" ", text)


def _converted(match: re.Match[str]) -> str:
    span = match.group()
    math = match.group("math")
    if math is not None:
        money = math[:1].isdigit() and (match.group("after") or not _TIGHT.fullmatch(math))
        if not _MATHLIKE.search(math) and (money or not _TIGHT.fullmatch(math)):
            return span  # "$5 and $": money, not math
        span, after = span[: len(span) - len(match.group("after"))], match.group("after")
        return _math(span) + after
    if match.group("inline") is not None:
        return _math("$" + match.group("inline") + "$")
    return _text(span)


def _math(span: str) -> str:
    return _text(_SCRIPT.sub(_script, _DEGREE.sub("°", span)))


def _text(span: str) -> str:
    """One span of markup as text by pylatexenc; the span as it was when pylatexenc cannot read it."""
    if span == "``":
        return "“"
    if span == "''":
        return "”"
    try:
        converted = _converter().latex_to_text(span, latex_context=_parsing())
    except Exception:  # pylatexenc raises IndexError, KeyError or its own errors on malformed input
        return span
    if "%(" in converted or "%s" in converted:  # a macro short of its arguments ("\\frac{1}"): its pattern, unfilled
        return span
    if not converted.strip():
        return " " if converted else _GONE  # a space ("\\,") stays a space; a citation goes with the space before it
    return " ".join(converted.split())


def _script(match: re.Match[str]) -> str:
    """`x_{t+1}` → "xₜ₊₁" when Unicode has a small form of every character, else as it was."""
    characters = match.group(2) or match.group(3)
    table = _SUBSCRIPTS if match.group(1) == "_" else _SUPERSCRIPTS
    small = characters.translate(table)
    return small if all(ord(c) >= 128 for c in small) else match.group()


@lru_cache(maxsize=1)
def _parsing() -> Any:
    """What the parser knows of each macro's arguments: pylatexenc's, and the ones abstracts use that it lacks."""
    context = latexwalker.get_default_latex_context_db()
    context.add_context_category("abstracts", prepend=True, macros=[
        std_macro("href", False, 2), std_macro("unicode", False, 1)])
    return context


@lru_cache(maxsize=1)
def _converter() -> LatexNodes2Text:
    """pylatexenc's converter, math as text ("$\\alpha=0.5$" → "α=0.5"), a macro it does not know read as its name."""
    context = get_default_latex_context_db()
    context.add_context_category("abstracts", prepend=True, macros=[
        MacroTextSpec("href", simplify_repl=lambda node, l2tobj: (_argument(node, l2tobj, 1)
                                                                  or _argument(node, l2tobj, 0))),
        MacroTextSpec("url", simplify_repl=lambda node, l2tobj: _argument(node, l2tobj, 0)),
        MacroTextSpec("unicode", simplify_repl=_unicode),
        MacroTextSpec("cite", ""), MacroTextSpec("citep", ""), MacroTextSpec("citet", ""),
        MacroTextSpec("footnote", ""), MacroTextSpec("label", ""), MacroTextSpec("ref", "?"),
        *(MacroTextSpec(name, text) for name, text in _WORDS.items()),
        *(MacroTextSpec(name, "") for name in _SWITCHES),
    ])
    context.set_unknown_macro_spec(MacroTextSpec("", simplify_repl=lambda node, l2tobj: node.macroname))
    return LatexNodes2Text(latex_context=context, math_mode="text")


def _argument(node: Any, l2tobj: LatexNodes2Text, index: int) -> str:
    arguments = node.nodeargd.argnlist if node.nodeargd is not None else []
    if index >= len(arguments) or arguments[index] is None:
        return ""
    argument = arguments[index]
    if index == 0 and node.macroname in ("href", "url"):  # a URL as written, not read as LaTeX ("~", "%", "_")
        return argument.latex_verbatim().strip("{}")
    return l2tobj.nodelist_to_text([argument])


def _unicode(node: Any, l2tobj: LatexNodes2Text) -> str:
    """MathJax's `\\unicode{x2013}` (or `{8211}`): the character."""
    code = _argument(node, l2tobj, 0).strip().lower()
    try:
        number = int(code[1:], 16) if code.startswith("x") else int(code)
        return chr(number) if 0x20 <= number <= 0x10FFFF and not 0xD800 <= number <= 0xDFFF else ""
    except ValueError:
        return ""
