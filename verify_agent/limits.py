"""Caps checked before work is done, each with a message that says which limit was hit.

The numbers are far above what training code needs and far below what would make the tool
allocate gigabytes or run for hours on a hostile input.
"""
from __future__ import annotations

MAX_FILE_BYTES = 2_000_000  # source files and IR files read by any command
MAX_WORLD = 1024  # ranks in a --mesh (product of its sizes)
MAX_DIAGNOSTICS = 200  # per report printed
MAX_MESSAGE_CHARS = 4_000  # per diagnostic message, hint or patch printed
