"""LangGraph checkpointers on Actae: ``from actae.langgraph import AsyncActaeSaver``.

Needs LangGraph installed (the ``langgraph`` extra). docs/langgraph.md shows the two-line
swap from ``PostgresSaver``/``AsyncPostgresSaver`` and what a graph gains.
"""

from actae.adapters.langgraph.savers import ActaeSaver, AsyncActaeSaver

__all__ = ["ActaeSaver", "AsyncActaeSaver"]
