"""Test doubles run inside a real ``plumb run`` process (never imported by plumb itself)."""
