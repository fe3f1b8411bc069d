"""Unit tests of plumb.extensions."""
