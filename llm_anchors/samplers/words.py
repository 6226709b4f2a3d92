"""What a word of a text is: the one pattern every text part splits by."""

from __future__ import annotations

import re

__all__ = ["WORD"]

# A word: letters/digits, with inner apostrophes or hyphens ("century's",
# "jean-claud"). Everything between words (spaces, punctuation) is kept
# verbatim, so a perturbation reads like the original.
WORD = re.compile(r"\w+(?:['’\-]\w+)*")
