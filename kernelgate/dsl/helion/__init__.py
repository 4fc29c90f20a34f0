"""Helion plug-in (``@helion.kernel``): screened as the Triton code Helion generates; see ``plugin``.

Importing this package does not import Helion: the registry loads every plug-in, and Helion is an
optional extra. ``prepare`` imports it in the candidate's process.
"""

from kernelgate.dsl.helion.plugin import PLUGIN, HelionPlugin, config_summary

__all__ = ["PLUGIN", "HelionPlugin", "config_summary"]
