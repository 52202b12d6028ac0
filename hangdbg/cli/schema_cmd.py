"""``hangdbg schema``: the JSON Schema of every document hangdbg writes, or the finding kinds."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from ..model import SCHEMA_VERSION, Kind, Severity, SourceKind
from ..report.schema import schema_text
from ..outdir import OutDir
from .common import EXIT_OK, Command


class SchemaCommand(Command):
    description = (
        f"Print the JSON Schema (draft 2020-12) of the documents that --json prints and -o DIR writes "
        f"(schema_version {SCHEMA_VERSION}), or with --kinds the finding kinds, severities and evidence kinds."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--kinds", action="store_true",
                       help="print the finding kinds (with the level each is about: rank, node, gpu, job, tool), severities "
                            "and evidence kinds as tables")
        p.add_argument("-o", "--out", metavar="DIR", type=Path, help=f"write DIR/hangdbg-schema-v{SCHEMA_VERSION}.json")

    def run(self, args: argparse.Namespace) -> int:
        text = schema_text()
        if args.out is not None:
            self.files = OutDir(args.out)
            self.files.save_text(f"hangdbg-schema-v{SCHEMA_VERSION}.json", text + "\n")
            for n in self.files.not_saved:
                self.warn(f"not saved: {n.path}: {n.reason}")
        if args.kinds:
            for enum, title in ((Kind, "finding kinds"), (Severity, "severities (most important first)"),
                                (SourceKind, "evidence kinds")):
                t = Table(title=title, title_justify="left", expand=True)
                t.add_column("value", no_wrap=True, style="bold")
                if enum is Kind:
                    t.add_column("level", no_wrap=True)  # what a finding of the kind is about
                t.add_column("meaning", ratio=1)
                for m in enum:
                    t.add_row(m.value, *((m.level.value,) if isinstance(m, Kind) else ()), m.doc)
                self.out.print(t)
            return EXIT_OK
        self.out.file.write(text + "\n")
        self.out.file.flush()
        return EXIT_OK
