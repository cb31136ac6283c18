"""Print the IR's published JSON schema: ``python -m agent.schema > prompts/ir.schema.json``."""
from __future__ import annotations

import sys

from agent.ir_json import schema_text


def main() -> None:
    sys.stdout.write(schema_text())


if __name__ == "__main__":
    main()
