"""LangGraph checkpointers on Actae: ``actae.langgraph.ActaeSaver`` and ``AsyncActaeSaver``.

A LangGraph thread is an Actae run, each checkpoint a state transition on its channel and
each batch of pending writes a record, so a graph gets version guards, idempotent writes,
forks with receipts and the read models without changing how it is written
(docs/langgraph.md). The translation is written once, as generators that yield store calls
(:mod:`~actae.adapters.langgraph.calls`); a synchronous and an asynchronous driver answer
them (:mod:`~actae.adapters.langgraph.drivers`).

This is the only part of Actae that imports ``langgraph``; it is an optional extra.
"""
