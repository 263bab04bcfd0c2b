"""LangGraph checkpointers on Actae (the ``langgraph`` extra; docs/langgraph.md)."""

from actae.adapters.langgraph.savers import ActaeSaver, AsyncActaeSaver

__all__ = ["ActaeSaver", "AsyncActaeSaver"]
