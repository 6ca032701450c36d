"""Switchboard's scheduler service."""
