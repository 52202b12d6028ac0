"""Reporters: the rich terminal report and its JSON twin (data in, renderables/dicts out)."""
