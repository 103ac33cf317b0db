"""Seams shared by every layer: the clock. Imports nothing from odradek."""
