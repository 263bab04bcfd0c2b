"""LangGraph checkpointers on Actae: a thread is a run, a checkpoint a transition."""
