"""Backends for llm-anchors, one module each; they import llm_anchors, never the reverse."""
