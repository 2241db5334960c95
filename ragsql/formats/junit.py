"""JUnit XML, the test report format CI systems (GitHub Actions, GitLab, Jenkins) display."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Case", "write_junit"]


@dataclass(frozen=True)
class Case:
    """One test case: its name, and the failure message when it failed."""

    name: str
    failure: str | None = None
    output: str | None = None


def write_junit(path: Path, suite: str, cases: Sequence[Case], seconds: float = 0.0) -> None:
    """Write one <testsuite> (inside <testsuites>) with a <testcase> per case and <failure> for failed ones."""
    failures = sum(1 for c in cases if c.failure is not None)
    root = ET.Element("testsuites", tests=str(len(cases)), failures=str(failures), errors="0", time=f"{seconds:.3f}")
    element = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{seconds:.3f}",
    )
    for case in cases:
        test = ET.SubElement(element, "testcase", classname=suite, name=case.name, time="0")
        if case.failure is not None:
            ET.SubElement(test, "failure", message=case.failure, type="gate").text = case.failure
        if case.output:
            ET.SubElement(test, "system-out").text = case.output
    ET.indent(root)
    path.write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
