"""LangGraph checkpointers on Actae: ``actae.langgraph.ActaeSaver`` and ``AsyncActaeSaver``.

A LangGraph thread is an Actae run, each checkpoint a state transition on its channel and
each batch of pending writes a record, so a graph gets version guards, idempotent writes,
forks with receipts and the read models without changing how it is written
(docs/langgraph.md). The translation is written once, as plain code calling ``Store``; the
asynchronous saver runs the synchronous saver's methods inside a greenback portal, as
``AsyncStore`` runs ``Store``'s (:mod:`~actae.adapters.langgraph.savers`).

This is the only part of Actae that imports ``langgraph``; it is an optional extra.
"""
