"""LangGraph checkpointers on Actae: a thread is a run, a checkpoint a transition.

Each batch of pending writes is a record (docs/langgraph.md). The only part of Actae that
imports ``langgraph``, an optional extra.
"""
