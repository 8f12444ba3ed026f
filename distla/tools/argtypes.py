"""What the tools' options accept, and how their ``--help`` shows it.

The types reject bad values through argparse itself (``argparse.ArgumentTypeError``),
so ``python -m distla demo --scale -1`` stops with argparse's usage line and exit
status 2 before jax starts. ``HelpFormatter`` prints every option's default.
"""

from __future__ import annotations

import argparse
import textwrap


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written; each option's default appended, unless its help says it.

    Flags (``store_true``) and defaults of ``None`` show nothing: their help says what
    happens without them.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Paragraphs wrapped to the terminal; indented ones (examples) kept as written."""
        out = []
        for para in text.strip("\n").split("\n\n"):
            if any(line.startswith((" ", "\t")) for line in para.splitlines()):
                out.append("\n".join(indent + line for line in para.splitlines()))
            else:
                out.append(
                    textwrap.fill(
                        " ".join(para.split()),
                        width,
                        initial_indent=indent,
                        subsequent_indent=indent,
                    )
                )
        return "\n\n".join(out)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            "%(default)" in text
            or "(default" in text
            or action.default in (None, False, argparse.SUPPRESS)
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number; got {text!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number; got {text}")
    return value
