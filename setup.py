"""The Python package's version is the collection's: galaxy.yml holds the one copy."""

import re
from pathlib import Path

from setuptools import setup

GALAXY = (Path(__file__).parent / "galaxy.yml").read_text()
setup(version=re.search(r"^version: (\S+)$", GALAXY, re.MULTILINE)[1])
